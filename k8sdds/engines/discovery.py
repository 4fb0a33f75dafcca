"""DDS discovery itself, timed: `k8sdds-discovery` (engines/discovery: a small C program on
Debian's Cyclone DDS, built by `make engines`), one process a participant.

A discovery test runs numSubscribers + 1 participants (`p0` where the publisher would be,
the others where the subscribers would), started together, each with one writer and one
reader on one topic. Each records the time from its own start until its writer has matched
every peer's reader and its reader every peer's writer (Cyclone's SPDP, then SEDP), and the
bytes and packets its network interface carried during that time and over a steady window
after it (`duration` seconds). Discovery goes as the `discovery` column says, through the
same Cyclone configuration ddsperf gets: multicast SPDP, or a unicast list of every
participant's address (`peers`, announced every second: cyclone.SPDP_INTERVAL). The DDS
columns that are about data (sizes, batching, rates, latency) mean nothing to it and are
refused when set, never ignored.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from k8sdds.engines import cyclone
from k8sdds.engines.base import Command, Problem, RoleContext, debian_version
from k8sdds.engines.clients import built, not_built
from k8sdds.engines.cyclone import CycloneConfig, render
from k8sdds.model import Test
from k8sdds.parsers.discovery import PARSER

BINARY = "k8sdds-discovery"
WAIT = 30  # seconds a participant waits for every peer before it gives up
SETTLE = 2  # seconds after its own discovery before its steady window (the others finish)
ROLE = "p"  # the participants' roles: p0, p1, ...


def participants(test: Test) -> int:
    """How many participants a discovery test runs: the publisher's place and each
    subscriber's."""
    return test.num_subscribers + 1


def data_problem(test: Test, secure_why: str) -> Problem:
    """The first column of `test` about data, which a discovery test has none of (refused
    when set, never ignored); `secure_why`: why `secure` is refused."""
    for field, why in (("multicast", "data goes nowhere in a discovery test; set "
                        "multicast=false and choose the discovery mode with discovery="),
                       ("batch_size", "a discovery test sends no data; set batchSize=0"),
                       ("latency_test", "a discovery test times discovery, not round "
                        "trips; set latencyTest=false"),
                       ("pub_rate", "a discovery test sends no data; set pubRate=0"),
                       ("send_queue_size", "a discovery test sends no data; leave "
                        "sendQueueSize empty or 0"),
                       ("secure", secure_why)):
        if getattr(test, field):
            return (field, getattr(test, field), why)
    return None


class DiscoveryTest:
    """What every discovery engine shares (`dds-discovery`, `zenoh-discovery`): participants
    that start together, each node's uplink sampled, no data, no secrets, no Service; the
    lines parsers.discovery reads. A subclass names its program and builds its commands."""

    middleware = False  # it measures discovery, not a middleware's data path
    qos_levels: tuple[int, ...] = ()
    parser = PARSER
    drain = 2 * SETTLE + 3.0  # the others matched a little after the first: their last lines
    listen_port = None  # each participant waits for its peers itself (WAIT)
    parallel_streams = False
    under_load = False  # no stream beside its round trip (the load column)
    node_traffic = True  # each node's interface counters, sampled (Backend.count_traffic)

    def service_ports(self, test: Test) -> Sequence[tuple[int, str]]:
        return ()

    def secrets(self, test: Test, roles: Sequence[str], directory: str) -> None:
        return None

    def timeout(self, test: Test) -> float:
        # from the driver's start, which waits for the instant all start at (start_at)
        return WAIT + 2 * SETTLE + test.duration + 30


class DdsDiscovery(DiscoveryTest):
    name = "dds-discovery"
    binary = BINARY
    programs = (BINARY,)
    arches = ("amd64", "arm64", "armhf")  # engines/discovery/build.py: cross gcc for a Pi
    hubs: tuple[str, ...] = ()
    supports = ("DDS discovery time and traffic of numSubscribers + 1 participants (Cyclone "
                "DDS); discovery by multicast or peers; udp")
    topologies = ("peer",)

    def check(self, test: Test) -> Problem:
        if test.transport != "udp":
            return ("transport", test.transport,
                    "k8sdds-discovery times discovery over UDP; set transport=udp")
        return data_problem(test, "k8sdds-discovery runs without DDS Security; set "
                            "secure=false") or cyclone.problem(test)

    def roles(self, test: Test) -> Sequence[str]:
        return [f"{ROLE}{i}" for i in range(participants(test))]

    def mode(self, topology: str, discovery: str) -> str:
        """The mode a repeat ran with, as the answer names it: SPDP's (multicast, peers)."""
        return discovery

    def command(self, test: Test, ctx: RoleContext) -> Command:
        roles = list(ctx.endpoints)
        peers = (list(dict.fromkeys(ctx.endpoints.values())) if ctx.discovery == "peers"
                 else [])
        cfg = CycloneConfig(
            interface=ctx.interface,
            allow_multicast="spdp" if ctx.discovery == "multicast" else "false",
            peers=peers, max_participant_index=max(9, len(roles) + 1))
        config_name = f"{ctx.role}.cyclonedds.xml"
        argv = [BINARY, "-peers", str(len(roles) - 1), "-wait", str(WAIT),
                "-settle", str(SETTLE), "-steady", f"{test.duration:g}"]
        if ctx.interface:
            argv += ["-iface", ctx.interface]
        if ctx.start_at:
            argv += ["-at", f"{ctx.start_at:.3f}"]
        config_path = Path(ctx.config_dir) / config_name
        return Command(argv=tuple(argv),
                       env={"CYCLONEDDS_URI": config_path.resolve().as_uri()},
                       files={config_name: render(cfg)})

    def unavailable(self) -> str | None:
        if built(BINARY) is None:
            return not_built(BINARY, "gcc and Debian's cyclonedds-dev")
        return None

    def version(self) -> str:
        return f"{BINARY} on Cyclone DDS {debian_version('libddsc0debian')}"

    def how_to_build(self, arches: Sequence[str]) -> str:
        return "`make engines`, or " + "; ".join(
            f"engines/discovery/build.py --arch {a}" for a in arches)
