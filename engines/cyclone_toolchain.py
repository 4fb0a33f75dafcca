"""What a program built on Eclipse Cyclone DDS needs, for this machine or a Pi: the compilers,
Cyclone's headers and its library for the architecture (another architecture's from
Debian's packages, unpacked into a cached root), and how a build step fails. Shared by
engines/perftest/build.py (RTI Perftest on Cyclone DDS) and engines/discovery/build.py
(k8sdds-discovery); Python's standard library only, but for another architecture's root
(k8sdds' own downloader)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

# Debian architecture -> the GNU triplet of its cross compilers and libraries
TRIPLETS = {"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu",
            "armhf": "arm-linux-gnueabihf"}


class BuildError(Exception):
    """What stops the build, said so that the user can fix it."""


def host_arch() -> str:
    try:
        return subprocess.run(["dpkg", "--print-architecture"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "amd64"


def toolchain(arch: str, say=print, needs: tuple[str, ...] = ("cxx", "cc", "idlc")) -> dict:
    """The compilers, the include and link flags of Cyclone DDS for `arch`, or a BuildError
    naming the package to install. Another architecture's Cyclone DDS comes from Debian's
    packages of it, downloaded and unpacked (never installed) into a cached root."""
    triplet = TRIPLETS.get(arch)
    if triplet is None:
        raise BuildError(f"--arch {arch}: builds for {', '.join(TRIPLETS)}")
    native = arch == host_arch()
    prefix = "" if native else f"{triplet}-"
    tools = {"cxx": f"{prefix}g++", "cc": f"{prefix}gcc", "idlc": "idlc"}
    packages = {"cxx": f"g++{'' if native else '-' + triplet.replace('_', '-')}",
                "cc": f"gcc{'' if native else '-' + triplet.replace('_', '-')}",
                "idlc": "cyclonedds-tools"}
    for key, tool in tools.items():
        if key not in needs:
            continue
        if shutil.which(tool) is None:
            raise BuildError(f"{tool} is missing (apt-get install {packages[key]})")
    if not Path("/usr/include/dds/dds.h").is_file():
        raise BuildError("Cyclone DDS's headers are missing: /usr/include/dds/dds.h "
                         "(apt-get install cyclonedds-dev)")
    root = Path("/") if native else sysroot(arch, say)
    lib = root / "usr" / "lib" / triplet
    if not (lib / "libddsc.so").exists():
        raise BuildError(f"Cyclone DDS's library for {arch} is missing: {lib}/libddsc.so "
                         "(apt-get install cyclonedds-dev)")
    includes = [] if native else [f"-I{root}/usr/include/{triplet}", f"-I{root}/usr/include"]
    return {**tools, "includes": includes, "version": root / "usr/include/dds/version.h",
            "link": [f"-L{lib}", f"-Wl,-rpath-link,{lib}",
                     f"-Wl,-rpath-link,{root}/lib/{triplet}"]}


def sysroot(arch: str, say=print) -> Path:
    """Debian's cyclonedds-dev for `arch` and what it depends on, unpacked once into
    $K8SDDS_CACHE/perftest-sysroot-ARCH (k8sdds' own downloader: a private apt configuration,
    nothing of this machine's apt changed)."""
    cache = Path(os.environ.get("K8SDDS_CACHE", "/var/cache/k8sdds"))
    root = cache / f"perftest-sysroot-{arch}"
    if (root / "usr" / "lib" / TRIPLETS[arch] / "libddsc.so").exists():
        return root
    try:
        from k8sdds.images import foreign
        from k8sdds.images.build import DEFAULT_MIRROR, run_tool
        from k8sdds.images.debian_engines import SUITE
    except ImportError:
        raise BuildError(f"--arch {arch} takes Cyclone DDS for {arch} from Debian's packages "
                         "with k8sdds' downloader: run this with the project's Python "
                         "(.venv/bin/python; `make perftest ARCH=...` does)") from None
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f"perftest-sysroot-{arch}-", dir=cache) as tmp:
        staged = Path(tmp) / "root"
        staged.mkdir()
        try:
            foreign.unpack(staged, ("cyclonedds-dev",), arch, SUITE, DEFAULT_MIRROR,
                           Path(tmp) / "apt", run_tool, say)
        except Exception as exc:  # noqa: BLE001 - the downloader's own error, said as ours
            raise BuildError(f"Cyclone DDS for {arch} from {DEFAULT_MIRROR}: {exc}") from None
        shutil.rmtree(root, ignore_errors=True)
        staged.rename(root)
    return root


def run(argv: list[str], cwd: Path, what: str) -> None:
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise BuildError(f"{argv[0]} failed on {what}:\n"
                         f"{(done.stderr or done.stdout).strip()[-3000:]}")


def linked_to(arch: str) -> list[str]:
    """The link flags that find Cyclone DDS: beside the binary first (debian-ARCH/lib, where
    `k8sdds cluster engines` puts Debian's libraries on an air-gapped host), else the
    system's."""
    return ["-Wl,--disable-new-dtags", f"-Wl,-rpath,$ORIGIN/debian-{arch}/lib", "-lddsc"]


def publish(target: Path, link: Path, earlier: str) -> Path:
    """Point `link` at the built `target` and remove the earlier builds (`earlier`, a glob
    beside it) that nothing links any more; the link."""
    link.unlink(missing_ok=True)
    link.symlink_to(target.name)
    for old in target.parent.glob(earlier):
        if old.name != target.name and not old.name.endswith(".partial"):
            old.unlink(missing_ok=True)
    return link


def add_options(parser) -> None:
    """The --bin and --arch every build here takes."""
    parser.add_argument("--bin", type=Path, default=Path(os.environ.get(
        "K8SDDS_ENGINE_BIN", "/var/cache/k8sdds/bin")), help="where the binary goes "
        "[$K8SDDS_ENGINE_BIN or /var/cache/k8sdds/bin]")
    parser.add_argument("--arch", default=host_arch(), help="Debian architecture to build "
                        f"for: {', '.join(TRIPLETS)} [this machine's]")
