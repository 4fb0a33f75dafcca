"""Debian's container runtime and CNI plugins for a kubeadm node (containerd, runc,
containernetworking-plugins) as the .deb files of one architecture, with the packages they
depend on, downloaded once here for `k8sdds cluster install`: a host with no package
repository (an air-gapped Pi) gets Debian's own packages from k8sdds, and `dpkg` on the host
installs them, their units and maintainer scripts included.

glibc and what it depends on are the host's own (every Debian has them); each other package
is installed on a host only when it lacks it."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from k8sdds.images import foreign
from k8sdds.images.build import DEFAULT_MIRROR, cache_dir, one_builder, run_tool
from k8sdds.images.debian_engines import SUITE

PACKAGES = ("containerd", "runc", "containernetworking-plugins")
HOST_OWN = ("libc6", "libgcc-s1", "gcc-12-base")  # glibc's: never a second copy


@dataclass(frozen=True)
class Deb:
    """One downloaded package: its name, version and file."""

    package: str
    version: str
    path: Path

    @classmethod
    def of(cls, path: Path) -> Deb:
        """From Debian's file name, package_version_arch.deb (the version's ':' as %3a)."""
        package, version, _ = path.stem.split("_")
        return cls(package, version.replace("%3a", ":"), path)


def folder(arch: str, cache: Path | None = None) -> Path:
    """Where the packages for Debian architecture `arch` are kept."""
    return Path(cache or cache_dir()) / f"debian-node-{SUITE}-{arch}"


def packages(arch: str, mirror: str = DEFAULT_MIRROR, cache: Path | None = None,
             say: Callable[[str], None] = lambda _: None) -> list[Deb]:
    """The .deb files for Debian architecture `arch`, dependencies first (downloaded once,
    from the mirror)."""
    out = folder(arch, cache)
    out.parent.mkdir(parents=True, exist_ok=True)
    with one_builder(out):
        if not out.is_dir():
            say(f"Debian's {', '.join(PACKAGES)} for {arch}, with what they depend on, from "
                f"{mirror}, once")
            with tempfile.TemporaryDirectory(prefix="debian-node-", dir=out.parent) as work:
                env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive",
                       "APT_CONFIG": str(foreign.apt_config(Path(work), arch, SUITE, mirror))}
                run_tool(["apt-get", "-q", "update"], f"apt-get update for {arch}", env)
                run_tool(["apt-get", "-q", "-y", "install", "--download-only", *PACKAGES],
                         f"downloading the {arch} packages", env)
                staged = Path(work) / "debs"
                staged.mkdir()
                for deb in Path(work, "cache", "archives").glob("*.deb"):
                    if Deb.of(deb).package not in HOST_OWN:
                        shutil.copy2(deb, staged / deb.name)
                os.replace(staged, out)
    debs = [Deb.of(p) for p in sorted(out.glob("*.deb"))]
    # what the named packages depend on first: dpkg configures them in one call anyway
    return sorted(debs, key=lambda d: (d.package in PACKAGES, d.package))
