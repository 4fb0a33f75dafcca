"""The engine interface: what to run (argv, environment, files) for each role of a test."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from k8sdds.caches import engine_bin  # where `make engines` puts its engines
from k8sdds.model import SINK, STREAM, Test  # noqa: F401 - the engines' roles
from k8sdds.parsers.reader import Parser

STREAM_DOMAIN = 1  # the DDS domain of the stream beside a round trip (the round trip's: 0)


def told_rate(rate: float) -> int:
    """The whole samples a second a stream's sender is told for `rate`: at least 1 (a rate
    rounded to 0 would read as no rate, as fast as it goes), 0 for none (`max`)."""
    return max(1, round(rate)) if rate else 0

# (field of Test, offending value, reason), as schedule.check reports it
Problem = tuple[str, Any, str] | None


@dataclass(frozen=True)
class RoleContext:
    """Where one role runs and who its peers are, as the backend placed them."""

    role: str
    address: str  # this role's IP address
    interface: str  # the network interface DDS must use
    endpoints: Mapping[str, str]  # role -> IP address, for every role of the test
    discovery: str  # "multicast" or "peers"
    config_dir: str  # absolute path where the engine's files are written
    secrets_dir: str = ""  # the run's private directory (0700) for keys and certificates
    # listening port -> the port a client must dial instead (a NodePort); empty: the same
    ports: Mapping[int, int] = field(default_factory=dict)
    # the wall-clock instant (seconds since the epoch) by which every role of the repeat has
    # been started (Backend.start_lead): an engine whose roles must start together (a
    # discovery test) has them wait for it; 0: not known
    start_at: float = 0.0
    # samples a second the stream beside a round-trip test sends (a `load` share of the
    # path's measured capacity); 0: as fast as it goes
    stream_rate: float = 0.0


@dataclass(frozen=True)
class Command:
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    files: Mapping[str, str] = field(default_factory=dict)  # file name -> content
    image: str | None = None  # the image the role needs where not the backend's own (Perftest)


class Engine(Protocol):
    name: str
    supports: str  # what it measures and which columns it honours, for `k8sdds engines`
    parser: Parser  # what reads its program's logs (k8sdds/parsers/<name>.py's PARSER)
    parallel_streams: bool  # whether the `streams` column means anything to it
    under_load: bool  # it runs a stream beside a round-trip test (the `load` column): the
    # roles STREAM and SINK, beside the driver and the first other role
    node_traffic: bool  # the backend samples each placed node's interface counters for it
    drain: float  # seconds the other roles get to finish once the driver has exited
    listen_port: int | None  # TCP port the other role must listen on before the driver starts
    topologies: tuple[str, ...]  # the `topology` values it runs (the first: its own); ()
    # for a client-server network engine
    arches: tuple[str, ...]  # the Debian architectures it is built for; (): every one
    # (Debian's own package in each image)
    middleware: bool  # pub/sub middleware (the answer sets them side by side), or the network
    hubs: tuple[str, ...]  # roles every message goes through (a broker, a router): each takes
    # a node of its own
    programs: tuple[str, ...]  # what k8sdds builds for it (engines/build, make perftest): the
    # engine image carries them
    qos_levels: tuple[int, ...]  # the values of the mqttQos column it takes; (): none

    def check(self, test: Test) -> Problem:
        """Why this engine cannot run `test`, or None."""

    def roles(self, test: Test) -> Sequence[str]:
        """All roles of the test; the first is the driver, whose exit ends the repeat."""

    def service_ports(self, test: Test) -> Sequence[tuple[int, str]]:
        """The (port, protocol) pairs a Service must forward to the server for `test`; empty
        when the engine cannot go through one."""

    def secrets(self, test: Test, roles: Sequence[str], directory: str) -> None:
        """Make the keys and certificates `test` needs in the run's private `directory`
        (TLS, DDS Security); nothing when it needs none."""

    def command(self, test: Test, ctx: RoleContext) -> Command:
        """The argv, environment and files of one role."""

    def timeout(self, test: Test) -> float:
        """Seconds after which a driver that has not exited is killed."""

    def unavailable(self) -> str | None:
        """Why the engine cannot run on this machine (with how to fix it), or None."""

    def version(self) -> str:
        """The engine's version, for the manifest."""

    def how_to_build(self, arches: Sequence[str]) -> str:
        """For an engine with `programs`: the commands that build them for `arches`."""


def pubsub_roles(test: Test) -> list[str]:
    """`pub`, then `sub0..subN-1`: the roles of a pub/sub engine."""
    return ["pub"] + [f"sub{i}" for i in range(test.num_subscribers)]


def debian_version(package: str) -> str:
    """The installed version of a Debian package, or "unknown"."""
    try:
        out = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", package],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


def engine_path() -> str:
    """PATH with engine_bin() first: where a role on this machine finds its program."""
    return f"{engine_bin()}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
