"""What a node's programs run as: this machine's own builds, or the board's own builds of
another architecture under qemu-user (a profile's `program_arch`).

Why: a node under a CPU budget alone slows the whole node, user space and kernel alike, so
the kernel's share of a message stays an x86's (docs/explanation/fidelity.md). Under
qemu-user the board's own program runs as ARM code, many times slower than native, while
every system call and every packet it sends goes through this machine's kernel natively,
inside the node's namespaces and cgroup: the board's split of a message's cost between its
program and its kernel, not this machine's.

What qemu-user cannot give, said where it binds: it answers `setsockopt(IP_MULTICAST_IF)`
with "Unsupported", and Cyclone DDS then cannot create a participant that uses multicast, so
discovery on such a node goes by peers and multicast=true cannot run (NO_MULTICAST)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from k8sdds.errors import UserError

# Debian architecture -> the qemu-user program (Debian's qemu-user-static) that runs it
QEMU = {"armhf": "qemu-arm-static", "arm64": "qemu-aarch64-static"}
# Debian architecture -> what `uname -m` says on such a board (what OpenSSL's masks go by)
MACHINE = {"armhf": "armv7l", "arm64": "aarch64"}
# where a root's programs are, in the order a shell's PATH finds them
PROGRAM_DIRS = ("usr/local/bin", "usr/bin", "usr/sbin", "bin", "sbin")
LAUNCHERS = "k8sdds-launchers"  # in a board's root: qemu-user linked under each program's name
NO_SECURE = ("its nodes run their own programs under qemu-user, and Cyclone DDS's security "
             "plugins are named at this machine's path, which the board's program cannot "
             "load: use a profile that runs this machine's programs (rpi3b)")
NO_MULTICAST = ("its nodes run their own programs under qemu-user, which refuses the "
                "multicast socket option (IP_MULTICAST_IF): discovery goes by peers, and "
                "multicast=true cannot run there")


def unavailable(arch: str) -> str | None:
    """Why this machine cannot run programs of Debian architecture `arch` (None: it can)."""
    if arch not in QEMU:
        return f"k8sdds runs another board's programs for {', '.join(QEMU)} only, not {arch}"
    if shutil.which(QEMU[arch]) is None:
        return (f"{QEMU[arch]} is not installed: apt-get install qemu-user-static (it runs "
                f"the board's own {arch} programs)")
    return None


def unbuilt(arches: set[str]) -> dict[str, str]:
    """engine -> why it cannot run on nodes of `arches`: a program k8sdds builds for it
    (images.build.built_engine) that is not built for one of them. The Debian engines come
    with the board's user space."""
    from k8sdds import engines
    from k8sdds.images.build import built_engine

    out = {}
    for name, engine in engines.registry().items():
        for arch in sorted(arches):
            if engine.arches and arch not in engine.arches:
                continue  # refused by the engine's own architectures (schedule.check)
            missing = [p for p in engine.programs if not built_engine(p, arch).is_file()]
            if missing:
                out[name] = (f"{', '.join(missing)} is not built for {arch} (the nodes run "
                             f"the board's own programs): {engine.how_to_build([arch])}")
    return out


def program(name: str, arch: str, root: Path) -> Path | None:
    """The board's own build of program `name` (a name or a path: its last part counts):
    k8sdds' build for `arch` (images.build.built_engine), else the root's, found as a
    shell's PATH would; None where neither has it."""
    from k8sdds.images.build import built_engine

    base = Path(name).name
    own = built_engine(base, arch)
    if own.is_file():
        return own
    for folder in PROGRAM_DIRS:
        found = root / folder / base
        if found.is_file():
            return found
    return None


def launcher(name: str, arch: str, root: Path) -> Path:
    """qemu-user for `arch` under the program's own name (a link in `root`, made once): the
    kernel names a process after the file it executes, so the process is `name` to `ps`,
    `pkill` and the testbed's own bookkeeping (netns.command), not `qemu-arm-static`."""
    link = root / LAUNCHERS / name
    if not link.is_symlink():
        link.parent.mkdir(exist_ok=True)
        try:
            link.symlink_to(shutil.which(QEMU[arch]) or f"/usr/bin/{QEMU[arch]}")
        except FileExistsError:
            pass  # another process made it meanwhile
    return link


def wrap(argv: Sequence[str], arch: str, root: Path) -> list[str]:
    """`argv` as the board's own program under qemu-user, its libraries found in `root`; a
    UserError naming the program where the board has no build of it."""
    from k8sdds.images.build import built_engine

    name = Path(argv[0]).name
    found = program(name, arch, root)
    if found is None:
        raise UserError(f"{name} has no {arch} build here (neither "
                        f"{built_engine(name, arch)} nor in the board's Debian packages): "
                        f"build it for {arch}, or use a profile that runs this machine's "
                        "programs")
    return [str(launcher(name, arch, root)), "-L", str(root), str(found), *argv[1:]]
