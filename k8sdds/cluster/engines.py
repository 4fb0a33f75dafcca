"""`k8sdds cluster engines`: the engines a `--backend ssh` run starts, copied over SSH into
each host's `engine_bin` for its architecture, so a host with no package repository and no
toolchain (an air-gapped Pi) runs them: the engines k8sdds builds (k8sdds-mqtt,
k8sdds-zenoh, perftest_cpp, k8sdds-discovery) and the Debian ones (ddsperf, mosquitto,
with their libraries: `images.debian_engines`); and what a host lacks (`missing`, for
`cluster check`)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from k8sdds.cluster.remote import HostError, Remote, remote_copy
from k8sdds.images.debian_engines import PROGRAMS, SUITE, folder
from k8sdds.model import DEBIAN_ARCH
from k8sdds.results import sha256

# the Debian engines a bare-host run uses: the host's own packages, or k8sdds' copy of them
DEBIAN_ENGINES = {p.name: p.package for p in PROGRAMS}
# when `cluster engines` copies the Debian engines: to a host that lacks them (or has
# k8sdds' copy, refreshed), to every host, or never
DEBIAN_WHEN = ("missing", "always", "never")


def deliver(remote: Remote, built: Callable[[str], dict[str, Path]],
            debian: Callable[[str], Path], when: str = "missing",
            skipped: Callable[[str], list[str]] = lambda _: []) -> list[str]:
    """Copy each engine built for the host's architecture (`built(debian_arch)`: name ->
    file) into its engine_bin (checked by SHA-256 on the host, mode 0755), and the Debian
    engines (`debian(debian_arch)`: their tar) as `when` says; what was done, and what was
    skipped (`skipped(debian_arch)`: each engine not built, with how to build it)."""
    host = remote.host
    if not host.engine_bin:
        raise HostError(f"{host.name}: no engine_bin in the inventory: give the host one (an "
                        "absolute directory, such as /opt/k8sdds/bin) to put the engines in")
    arch = DEBIAN_ARCH[host.arch]
    files = built(arch)
    made = remote.run(["mkdir", "-p", host.engine_bin], root=True)
    if made.code != 0:
        raise HostError(f"{host.name}: mkdir {host.engine_bin}: {made.err.strip()}")
    done = []
    for name, path in sorted(files.items()):
        with remote_copy(remote, path, "engine", sha256(path)) as staged:
            placed = remote.run(["install", "-m", "0755", staged,
                                 f"{host.engine_bin}/{name}"], root=True)
        if placed.code != 0:
            raise HostError(f"{host.name}: install {name}: {placed.err.strip()}")
        done.append(name)
    said = [f"{', '.join(done)} ({arch}) in {host.engine_bin}" if done else
            f"none of k8sdds' own engines is built here for {arch}",
            _debian(remote, arch, debian, when)]
    left = skipped(arch)
    return said + ([f"skipped: {'; '.join(left)}"] if left else [])


def _debian(remote: Remote, arch: str, debian: Callable[[str], Path], when: str) -> str:
    """The Debian engines into engine_bin (the old copy replaced) when `when` says so."""
    host = remote.host
    names = ", ".join(DEBIAN_ENGINES)
    if when == "never":
        return f"{names}: left as they are (--debian never)"
    found = {name: _found(remote, name) for name in DEBIAN_ENGINES}
    ours = [n for n, where in found.items() if where.startswith(f"{host.engine_bin}/")]
    if when == "missing" and not remote.dry_run and all(found.values()) and not ours:
        return f"{names}: the host's own ({', '.join(found.values())})"
    tar = Path(f"debian-engines-{SUITE}-{arch}.tar") if remote.dry_run else debian(arch)
    with remote_copy(remote, tar, "debian-engines", None if remote.dry_run else sha256(tar)
                     ) as staged:
        for argv in (["rm", "-rf", f"{host.engine_bin}/{folder(arch)}"],
                     ["tar", "-x", "--no-same-owner", "-f", staged, "-C", host.engine_bin]):
            done = remote.run(argv, root=True)
            if done.code != 0:
                raise HostError(f"{host.name}: {argv[0]}: {done.err.strip()}")
    return f"{names} of Debian {SUITE} ({arch}, with their libraries) in {host.engine_bin}"


def _found(remote: Remote, program: str) -> str:
    """Where the host finds `program`, its engine_bin first as a run's roles do; ''."""
    bin_ = remote.host.engine_bin
    script = (f"PATH={shlex.quote(bin_)}:$PATH; " if bin_ else "") + \
        f"command -v {shlex.quote(program)}"
    found = remote.run(["sh", "-c", script])
    return found.out.strip() if found.code == 0 else ""


def missing(remote: Remote, own: tuple[str, ...]) -> list[str]:
    """What a `--backend ssh` run may need that the host lacks: a Debian engine not on its
    PATH, one of k8sdds' own (`own`) not in its engine_bin; each with how to get it."""
    host = remote.host
    out = []
    for program, package in DEBIAN_ENGINES.items():
        if not _found(remote, program):
            out.append(f"{program}: apt-get install {package}, or (no package repository) "
                       "k8sdds cluster engines -i INVENTORY"
                       + ("" if host.engine_bin else " after giving the host an engine_bin"))
    for program in own:
        where = f"{host.engine_bin}/{program}" if host.engine_bin else ""
        if not where or remote.run(["test", "-x", where]).code != 0:
            out.append(f"{program}: k8sdds cluster engines -i INVENTORY"
                       + ("" if host.engine_bin else " (after giving the host an engine_bin)"))
    return out
