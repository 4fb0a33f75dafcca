"""`k8sdds cluster engines`: the engines k8sdds builds (k8sdds-mqtt, k8sdds-zenoh, zenohd),
built here for each host's architecture, copied over SSH into the host's `engine_bin`, so a
host with no package repository and no toolchain (an air-gapped Pi) runs them; and what a
`--backend ssh` run needs that a host lacks (`missing`, for `cluster check`)."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path

from k8sdds.cluster.remote import HostError, Remote, remote_copy
from k8sdds.model import DEBIAN_ARCH
from k8sdds.results import sha256

# the Debian engines a bare-host run uses: the host's own packages
DEBIAN_ENGINES = {"ddsperf": "cyclonedds-tools", "mosquitto": "mosquitto"}


def deliver(remote: Remote, built: Callable[[str], dict[str, Path]]) -> list[str]:
    """Copy each engine built for the host's architecture (`built(debian_arch)`: name ->
    file) into its engine_bin (checked by SHA-256 on the host, mode 0755); what was done."""
    host = remote.host
    if not host.engine_bin:
        raise HostError(f"{host.name}: no engine_bin in the inventory: give the host one (an "
                        "absolute directory, such as /opt/k8sdds/bin) to put the engines in")
    arch = DEBIAN_ARCH[host.arch]
    files = built(arch)
    if not files:
        raise HostError(f"{host.name}: no engine is built here for {arch} (ARCH={arch} "
                        "engines/build)")
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
    return [f"{', '.join(done)} ({arch}) in {host.engine_bin}"]


def missing(remote: Remote, own: tuple[str, ...]) -> list[str]:
    """What a `--backend ssh` run may need that the host lacks: a Debian engine not on its
    PATH, one of k8sdds' own (`own`) not in its engine_bin; each with how to get it."""
    host = remote.host
    out = []
    for program, package in DEBIAN_ENGINES.items():
        found = remote.run(["sh", "-c", f"command -v {shlex.quote(program)}"])
        if found.code != 0:
            out.append(f"{program}: apt-get install {package} (offline: apt-get download "
                       f"{package}:{DEBIAN_ARCH[host.arch]} and its dependencies on a "
                       "machine with a mirror, then dpkg -i them here)")
    for program in own:
        where = f"{host.engine_bin}/{program}" if host.engine_bin else ""
        if not where or remote.run(["test", "-x", where]).code != 0:
            out.append(f"{program}: k8sdds cluster engines -i INVENTORY"
                       + ("" if host.engine_bin else " (after giving the host an engine_bin)"))
    return out
