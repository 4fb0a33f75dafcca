"""The Debian engines a bare-host run uses (ddsperf from cyclonedds-tools, mosquitto), with
every library they load, as one tar a host without a package repository unpacks into its
engine_bin: an air-gapped Pi gets them from k8sdds (`k8sdds cluster engines`) as it gets the
engines k8sdds builds.

The packages and their dependencies are downloaded for the host's architecture and unpacked
here, never run (`foreign.unpack`, the way an image for another architecture is built). The
tar holds, for Debian architecture ARCH:

    ddsperf, mosquitto       shell wrappers: the real program with its libraries first
    debian-ARCH/bin/         the real programs
    debian-ARCH/lib/         the shared objects of every package but glibc's (libc6)
    debian-ARCH/packages     the packages and versions it came from

glibc is the host's own (its loader and libc go together; Debian 12 and Raspberry Pi OS 12
have the same), so the wrappers exec the program itself: it is `ddsperf` in `ps` and
`pkill`, not a loader."""

from __future__ import annotations

import io
import os
import re
import tarfile
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from k8sdds.images import foreign
from k8sdds.images.build import DEFAULT_MIRROR, cache_dir, one_builder, run_tool

SUITE = "bookworm"  # the engine image's (docker/Dockerfile)


@dataclass(frozen=True)
class Program:
    """One Debian engine: its name on PATH, its package and where the package puts it."""

    name: str
    package: str
    path: str  # in the package's file system


PROGRAMS = (Program("ddsperf", "cyclonedds-tools", "usr/bin/ddsperf"),
            Program("mosquitto", "mosquitto", "usr/sbin/mosquitto"))
# libddsc0debian: Cyclone's TLS and DDS Security plugins, which ddsperf loads by name
PACKAGES = (*(p.package for p in PROGRAMS), "libddsc0debian")
HOST_OWN = ("libc6",)  # glibc: the host's loader and libc, never a second copy
# a shared object's file name: libddsc.so.0.10.2, libddsc.so.0debian, libdds_security_ac.so
_LIBRARY = re.compile(r"^lib[^/]*\.so(\.[0-9A-Za-z]+)*$")
PLUGINS = "libddsc0debian"  # the multiarch folder's subfolder of Cyclone's plugins


def folder(arch: str) -> str:
    """The bundle's folder in engine_bin for Debian architecture `arch`."""
    return f"debian-{arch}"


def wrapper(program: Program, arch: str) -> str:
    """The script on PATH for `program`: the real one, with the bundle's libraries first.
    `${0%/*}` is the folder the script was found in (the shell is given its full path).
    Pure."""
    here = folder(arch)
    return ("#!/bin/sh\n"
            f"# {program.name} of Debian {SUITE} ({program.package}, {arch}) with its "
            "libraries; from `k8sdds cluster engines`\n"
            f'd="${{0%/*}}/{here}"\n'
            'LD_LIBRARY_PATH="$d/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" '
            f'exec "$d/bin/{program.name}" "$@"\n')


def libraries(rootfs: Path) -> list[Path]:
    """The shared objects (files and their soname links) in the library folders of an
    unpacked root file system, Debian's multiarch ones and Cyclone's plugin folder
    included."""
    found = []
    for top in ("lib", "usr/lib"):
        base = rootfs / top
        if not base.is_dir() or base.is_symlink():
            continue
        multiarch = [d for d in base.iterdir() if d.is_dir() and "-linux-" in d.name]
        for folder_ in [base, *multiarch, *(d / PLUGINS for d in multiarch
                                            if (d / PLUGINS).is_dir())]:
            found += [p for p in sorted(folder_.iterdir())
                      if _LIBRARY.match(p.name) and (p.is_file() or p.is_symlink())]
    return found


def bundle(arch: str, mirror: str = DEFAULT_MIRROR, cache: Path | None = None,
           say: Callable[[str], None] = lambda _: None) -> Path:
    """The tar of the Debian engines for Debian architecture `arch` (cached: made once, from
    the mirror)."""
    cache = Path(cache or cache_dir())
    cache.mkdir(parents=True, exist_ok=True)
    out = cache / f"debian-engines-{SUITE}-{arch}.tar"
    with one_builder(out):
        if out.exists():
            return out
        say(f"the Debian engines for {arch} ({', '.join(PACKAGES)} and their libraries) "
            f"from {mirror}, once")
        with tempfile.TemporaryDirectory(prefix="debian-engines-", dir=cache) as work:
            rootfs = Path(work) / "rootfs"
            rootfs.mkdir()
            debs = foreign.unpack(rootfs, PACKAGES, arch, SUITE, mirror, Path(work) / "apt",
                                  run_tool, say, leave_out=HOST_OWN)
            partial = out.with_name(out.name + ".part")
            _write(partial, rootfs, arch, debs)
            os.replace(partial, out)
    return out


def _write(tar_path: Path, rootfs: Path, arch: str, debs: list[str]) -> None:
    here = folder(arch)
    with tarfile.open(tar_path, "w") as tf:
        for program in PROGRAMS:
            tf.add(rootfs / program.path, f"{here}/bin/{program.name}")
            _text(tf, program.name, wrapper(program, arch), 0o755)
        names = set()
        for lib in libraries(rootfs):
            if lib.name not in names:  # /lib and /usr/lib: the first found
                names.add(lib.name)
                tf.add(lib, f"{here}/lib/{lib.name}", recursive=False)
        _text(tf, f"{here}/packages", "".join(f"{d.removesuffix('.deb')}\n" for d in debs),
              0o644)


def _text(tf: tarfile.TarFile, name: str, text: str, mode: int) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    tf.addfile(info, io.BytesIO(data))
