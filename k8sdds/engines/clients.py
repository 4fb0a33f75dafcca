"""What the engines on k8sdds' own clients share (k8sdds-mqtt, engines/mqtt; k8sdds-zenoh,
engines/zenoh): messages of 16 bytes or more over TCP, the DDS columns they refuse, the
publisher/subscriber and ping/pong modes, the driver's flags, the stream beside a round trip
(`load`: a `pub` at the stream rate, role STREAM, and a `sub`, role SINK, on a topic of their
own, STREAM_TOPIC), and finding the built programs (`make engines` puts them in
engine_bin())."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import replace

from k8sdds.engines.base import Problem, engine_bin, engine_path, told_rate
from k8sdds.model import BESIDE, STREAM, Test

MIN_SIZE = 16  # the sequence number and the send time
MAX_SIZE = 16 * 1024 * 1024
PEER_WAIT = 10  # seconds the publisher waits for its subscribers (and they for their link)
STREAM_TOPIC = "k8sdds-stream"  # the stream's topic (key): never the round trip's "k8sdds"
DRIVERS = ("pub", STREAM)  # the roles that send on their own: the driver, the stream


def built(program: str) -> str | None:
    """Where `program` is: engine_bin() first, then PATH."""
    return shutil.which(program, path=engine_path())


def not_built(program: str, toolchain: str) -> str:
    return (f"{program} is not built; run `make engines` (needs {toolchain}), which puts it "
            f"in {engine_bin()}")


def first_line(program: str, flag: str) -> str:
    """The line `program flag` prints that starts with the program's name (the version line
    among whatever else it logs), else the name."""
    try:
        text = subprocess.run([built(program) or program, flag], capture_output=True,
                              text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        text = ""
    found = [line for line in text.splitlines() if line.startswith(program)]
    return found[0].strip() if found else program


class OwnClient:
    """The shared part of an engine on one of k8sdds' own clients: subclasses name their
    program (`binary`) and what sets them apart."""

    binary: str  # the client program
    programs: tuple[str, ...]  # what engines/build makes for it (the client, a router)
    arches: tuple[str, ...]  # the Debian architectures engines/build makes them for
    middleware = True
    hubs: tuple[str, ...] = ()  # a broker or router role, where it has one
    qos_levels: tuple[int, ...] = ()
    drain = 1.0  # seconds the subscribers get to count the last messages
    parallel_streams = False
    under_load = True  # STREAM and SINK: a pub and a sub on STREAM_TOPIC
    node_traffic = False  # no node interface counters sampled

    transport_why: str  # why only tcp
    # (field, why) of the DDS columns it has no counterpart for: refused when set
    refusals: tuple[tuple[str, str], ...] = ()

    def how_to_build(self, arches: Sequence[str]) -> str:
        """The commands that build its programs for `arches`."""
        return "`make engines`, or " + "; ".join(
            f"ARCH={a} ENGINES={self.name} engines/build" for a in arches)

    def own_problem(self, test: Test) -> Problem:
        """What else of `test` this middleware cannot honour."""
        return None

    def check(self, test: Test) -> Problem:
        if not MIN_SIZE <= test.data_len <= MAX_SIZE:
            return ("data_len", test.data_len,
                    f"{self.binary} sends messages of {MIN_SIZE} to {MAX_SIZE} bytes")
        if test.transport != "tcp":
            return ("transport", test.transport, self.transport_why)
        for field, why in self.refusals:
            if getattr(test, field):
                return (field, getattr(test, field), why)
        problem = self.own_problem(test)
        if problem:
            return problem
        if test.latency_test and test.pub_rate:
            return ("pub_rate", test.pub_rate,
                    "a latency test sends one ping after each pong; set pubRate=0")
        if test.load and not MIN_SIZE <= test.load_len <= MAX_SIZE:
            return ("load_len", test.load_len,
                    f"{self.binary} sends messages of {MIN_SIZE} to {MAX_SIZE} bytes")
        return None

    def service_ports(self, test: Test) -> Sequence[tuple[int, str]]:
        return ()

    def secrets(self, test: Test, roles: Sequence[str], directory: str) -> None:
        return None

    def timeout(self, test: Test) -> float:
        return test.duration + 2 * PEER_WAIT + 10

    def measured(self, test: Test, role: str, rate: float) -> tuple[Test, str]:
        """What `role` runs of `test`, and on which topic: the stream beside a round trip
        (STREAM and SINK) is a throughput pair of `load_len` messages at `rate` (0: as fast
        as it goes) on STREAM_TOPIC, outlasting the round trip (it is stopped once that
        ends); every other role runs `test` on the round trip's topic."""
        if role not in BESIDE:
            return test, "k8sdds"
        return replace(test, data_len=test.load_len, latency_test=False, num_subscribers=1,
                       pub_rate=told_rate(rate), load="", load_len=0,
                       duration=self.timeout(test)), STREAM_TOPIC

    @staticmethod
    def mode(test: Test, role: str) -> str:
        """pub or sub; in a latency test ping or pong (the driver is `pub`, the stream's
        sender STREAM)."""
        driver = role in DRIVERS
        if test.latency_test:
            return "ping" if driver else "pong"
        return "pub" if driver else "sub"

    @staticmethod
    def driver_flags(test: Test) -> list[str]:
        """How long, for how many peers, at what rate: the driver's own flags."""
        flags = ["-duration", f"{test.duration:g}", "-peers", str(test.num_subscribers)]
        return flags + (["-rate", str(test.pub_rate)] if test.pub_rate else [])
