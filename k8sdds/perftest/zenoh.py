"""Zenoh, peer to peer or through a router: `k8sdds-zenoh` (engines/zenoh: a small Rust
program on the `zenoh` crate, built by `make engines`) and, routed, `zenohd`.

Roles: `pub` (the driver: a publisher at full speed or at pubRate, or the ping side of a
latency test) and `sub0..` (subscribers counting, or the pong side); `topology=routed` adds
`router` (zenohd, on a node of its own where the cluster has one: placement.place), to which
every other role connects as a Zenoh client. Peer to peer, each subscriber listens on a port
of its own (7447 + its index, so several share a node's address) and the publisher dials
them all. `bestEffort` picks the congestion control: true drops what the link cannot take
(CongestionControl::Drop), false blocks the publisher (Block); Zenoh over TCP loses nothing
else. The DDS columns it has no counterpart for are refused with the reason, never ignored.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence

from k8sdds.model import Test
from k8sdds.perftest.base import (
    Command,
    Problem,
    RoleContext,
    engine_bin,
    engine_path,
    pubsub_roles,
)

ROUTER = "router"
PORT = 7447  # Zenoh's own port: the router's, and the first subscriber's peer to peer
BINARY = "k8sdds-zenoh"
ZENOHD = "zenohd"
MIN_SIZE = 16  # the sequence number and the send time
MAX_SIZE = 16 * 1024 * 1024
PEER_WAIT = 10  # seconds the publisher waits for its subscribers (and every role for its link)


def routed(test: Test) -> bool:
    return test.topology == "routed"


def router_argv() -> tuple[str, ...]:
    """zenohd listening on PORT, with no multicast scouting (the roles are told where it
    is)."""
    return (ZENOHD, "--listen", f"tcp/0.0.0.0:{PORT}", "--no-multicast-scouting")


class Zenoh:
    name = "zenoh"
    supports = ("Zenoh throughput, latency; peer to peer (topology=peer) or through zenohd "
                "(topology=routed); tcp; bestEffort drops under congestion")
    parser = "zenoh"  # k8sdds-zenoh prints ddsperf's lines; zenohd's errors
    drain = 1.0  # seconds the subscribers get to count the last messages
    listen_port = PORT  # the router, or the first subscriber, listens before the driver
    parallel_streams = False
    topologies = ("peer", "routed")

    def check(self, test: Test) -> Problem:
        if not MIN_SIZE <= test.data_len <= MAX_SIZE:
            return ("data_len", test.data_len,
                    f"k8sdds-zenoh sends messages of {MIN_SIZE} to {MAX_SIZE} bytes")
        if test.transport != "tcp":
            return ("transport", test.transport,
                    "k8sdds runs Zenoh over TCP (its reliable link); set transport=tcp")
        for field, value, why in (
                ("multicast", test.multicast,
                 "k8sdds-zenoh sends over unicast links; set multicast=false"),
                ("batch_size", test.batch_size,
                 "Zenoh batches by itself (express off); set batchSize=0"),
                ("secure", test.secure, "Zenoh has no DDS Security; set secure=false"),
                ("send_queue_size", test.send_queue_size,
                 "Zenoh has no send queue setting here; leave sendQueueSize empty or 0"),
                ("discovery", test.discovery,
                 "Zenoh roles are told their peers or router; leave discovery empty")):
            if value:
                return (field, value, why)
        if test.latency_test and test.pub_rate:
            return ("pub_rate", test.pub_rate,
                    "a latency test sends one ping after each pong; set pubRate=0")
        return None

    def roles(self, test: Test) -> Sequence[str]:
        roles = pubsub_roles(test)
        return [roles[0], ROUTER, *roles[1:]] if routed(test) else roles

    def service_ports(self, test: Test) -> Sequence[tuple[int, str]]:
        return ()

    def secrets(self, test: Test, roles: Sequence[str], directory: str) -> None:
        return None

    def timeout(self, test: Test) -> float:
        return test.duration + 2 * PEER_WAIT + 10

    def command(self, test: Test, ctx: RoleContext) -> Command:
        if ctx.role == ROUTER:
            return Command(router_argv())
        driver = ctx.role == "pub"
        mode = ("ping" if driver else "pong") if test.latency_test else \
            ("pub" if driver else "sub")
        argv = [BINARY, "-mode", mode, "-key", "k8sdds", "-size", str(test.data_len),
                "-wait", str(PEER_WAIT), "-id", f"k8sdds-{ctx.role}"]
        if routed(test):
            argv += ["-zmode", "client", "-connect", f"tcp/{ctx.endpoints[ROUTER]}:{PORT}"]
        elif driver:
            subs = [r for r in ctx.endpoints if r.startswith("sub")]
            argv += ["-zmode", "peer", "-connect",
                     ",".join(f"tcp/{ctx.endpoints[r]}:{PORT + int(r[3:])}" for r in subs)]
        else:
            argv += ["-zmode", "peer", "-listen", f"tcp/0.0.0.0:{PORT + int(ctx.role[3:])}"]
        if test.best_effort:
            argv.append("-besteffort")
        if driver:
            argv += ["-duration", f"{test.duration:g}", "-peers", str(test.num_subscribers)]
            if test.pub_rate:
                argv += ["-rate", str(test.pub_rate)]
        return Command(tuple(argv))

    def unavailable(self) -> str | None:
        for program in (BINARY, ZENOHD):
            if shutil.which(program, path=engine_path()) is None:
                return (f"{program} is not built; run `make engines` (needs Rust's cargo), "
                        f"which puts it in {engine_bin()}")
        return None

    def version(self) -> str:
        out = []
        for program in (BINARY, ZENOHD):
            try:
                text = subprocess.run([shutil.which(program, path=engine_path()) or program,
                                       "--version" if program == ZENOHD else "-version"],
                                      capture_output=True, text=True, timeout=10).stdout
            except (OSError, subprocess.TimeoutExpired):
                text = ""
            # zenohd logs a line before its version: the line that starts with its name
            found = [line for line in text.splitlines() if line.startswith(program)]
            out.append(found[0].strip() if found else program)
        return ", ".join(out)
