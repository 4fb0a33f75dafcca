"""A board's own user space: Debian's packages of another architecture (a Raspberry Pi's armhf
or arm64), unpacked here once, in which an emulated board runs its own programs under
qemu-user (k8sdds.testbed.userspace).

It holds the Debian engines (ddsperf, mosquitto), the network's (iperf3, qperf, ping, ab),
the userspace WireGuard of the encrypted datapaths (wireguard-go) and every library they
load, glibc's loader and libc of that architecture among them (qemu-user's `-L` prefix finds
them), and libstdc++ for the programs k8sdds builds for the board (Perftest on Cyclone DDS,
NAME-ARCH in the engines' folder). Nothing of it runs while it is made (`foreign.unpack`:
no maintainer script)."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from k8sdds.images import debian_engines, foreign
from k8sdds.images.build import DEFAULT_MIRROR, cache_dir, one_builder, run_tool

SUITE = debian_engines.SUITE
PACKAGES = (*debian_engines.PACKAGES, "iperf3", "qperf", "iputils-ping", "apache2-utils",
            "wireguard-go", "libstdc++6")
LIST = "k8sdds-packages"  # in the root: the packages and versions it was unpacked from


def path(arch: str, cache: Path | None = None) -> Path:
    """Where the root of Debian architecture `arch` is kept (made or not): its name holds
    the suite and a digest of the packages asked for, so a changed list makes a new root."""
    digest = hashlib.sha256(" ".join(PACKAGES).encode()).hexdigest()[:8]
    return Path(cache or cache_dir()) / f"board-root-{SUITE}-{arch}-{digest}"


def root(arch: str, mirror: str = DEFAULT_MIRROR, cache: Path | None = None,
         say: Callable[[str], None] = lambda _: None) -> Path:
    """The unpacked root of Debian architecture `arch` (made once, from the mirror; a root
    half made is never used: it is renamed into place whole)."""
    out = path(arch, cache)
    out.parent.mkdir(parents=True, exist_ok=True)
    with one_builder(out):
        if (out / LIST).exists():
            return out
        say(f"the board's own programs for {arch} ({', '.join(PACKAGES)} and what they "
            f"depend on) from {mirror}, once")
        with tempfile.TemporaryDirectory(prefix=f"board-root-{arch}-", dir=out.parent) as work:
            rootfs = Path(work) / "rootfs"
            rootfs.mkdir()
            debs = foreign.unpack(rootfs, PACKAGES, arch, SUITE, mirror, Path(work) / "apt",
                                  run_tool, say)
            (rootfs / LIST).write_text("".join(f"{d.removesuffix('.deb')}\n" for d in debs))
            os.replace(rootfs, out)
    return out
