"""Zenoh, peer to peer or through a router: `k8sdds-zenoh` (engines/zenoh: a small Rust
program on the `zenoh` crate, built by `make engines`), which is also the router of the routed
topology (`-mode router`: a Zenoh session in router mode, what zenohd runs).

Roles: `pub` (the driver: a publisher at full speed or at pubRate, or the ping side of a
latency test) and `sub0..` (subscribers counting, or the pong side); `topology=routed` adds
`router` (k8sdds-zenoh -mode router, on a node of its own where the cluster has one:
placement.place), to which
every other role connects as a Zenoh client. Peer to peer, each subscriber listens on a port
of its own (7447 + its index, so several share a node's address) and the publisher dials
them all. `bestEffort` picks the congestion control: true drops what the link cannot take
(CongestionControl::Drop), false blocks the publisher (Block); Zenoh over TCP loses nothing
else. The DDS columns it has no counterpart for are refused with the reason, never ignored.
Under load, `stream` and `sink` on a key of their own (clients.OwnClient.measured): through
the router where there is one, else the stream dials the sink (SINK_PORT).
"""

from __future__ import annotations

from collections.abc import Sequence

from k8sdds.engines.base import Command, RoleContext, pubsub_roles
from k8sdds.engines.clients import DRIVERS, PEER_WAIT, OwnClient, built, first_line, not_built
from k8sdds.model import SINK, STREAM, Test
from k8sdds.parsers.zenoh import (
    PARSER,
    ROUTER,  # the role name its log is parsed by
)

PORT = 7447  # Zenoh's own port: the router's, and the first subscriber's peer to peer
SINK_PORT = 7999  # where the stream's receiver listens peer to peer (past any subscriber's)
BINARY = "k8sdds-zenoh"


def routed(test: Test) -> bool:
    return test.topology == "routed"


def router_argv() -> tuple[str, ...]:
    """The router listening on PORT (k8sdds-zenoh never scouts by multicast: the roles are
    told where it is)."""
    return (BINARY, "-mode", "router", "-listen", f"tcp/0.0.0.0:{PORT}")


class Zenoh(OwnClient):
    name = "zenoh"
    binary = BINARY
    programs = (BINARY,)
    hubs = (ROUTER,)  # k8sdds-zenoh -mode router, in the routed topology
    arches = ("amd64", "arm64")  # Rust: this machine's and a Pi 4/5's (Debian's cross gcc)
    supports = ("Zenoh throughput, latency, latency under load; peer to peer "
                "(topology=peer) or through a Zenoh router (topology=routed); tcp; bestEffort "
                "drops under congestion")
    parser = PARSER  # k8sdds-zenoh prints ddsperf's lines; the router, Zenoh's errors
    listen_port = PORT  # the router, or the first subscriber, listens before the driver
    topologies = ("peer", "routed")

    transport_why = "k8sdds runs Zenoh over TCP (its reliable link); set transport=tcp"
    refusals = (
        ("multicast", "k8sdds-zenoh sends over unicast links; set multicast=false"),
        ("batch_size", "Zenoh batches by itself (express off); set batchSize=0"),
        ("secure", "Zenoh has no DDS Security; set secure=false"),
        ("send_queue_size",
         "Zenoh has no send queue setting here; leave sendQueueSize empty or 0"),
        ("discovery", "Zenoh roles are told their peers or router; leave discovery empty"))

    def roles(self, test: Test) -> Sequence[str]:
        roles = pubsub_roles(test)
        roles = [roles[0], ROUTER, *roles[1:]] if routed(test) else roles
        return roles + ([STREAM, SINK] if test.load else [])

    def command(self, test: Test, ctx: RoleContext) -> Command:
        if ctx.role == ROUTER:
            return Command(router_argv())
        routing = routed(test)
        test, key = self.measured(test, ctx.role, ctx.stream_rate)
        driver = ctx.role in DRIVERS
        argv = [BINARY, "-mode", self.mode(test, ctx.role), "-key", key,
                "-size", str(test.data_len), "-wait", str(PEER_WAIT), "-id", f"k8sdds-{ctx.role}"]
        if routing:
            argv += ["-zmode", "client", "-connect", f"tcp/{ctx.endpoints[ROUTER]}:{PORT}"]
        elif ctx.role == STREAM:  # peer to peer, to the stream's receiver only
            argv += ["-zmode", "peer", "-connect", f"tcp/{ctx.endpoints[SINK]}:{SINK_PORT}"]
        elif ctx.role == SINK:
            argv += ["-zmode", "peer", "-listen", f"tcp/0.0.0.0:{SINK_PORT}"]
        elif driver:
            subs = [r for r in ctx.endpoints if r.startswith("sub")]
            argv += ["-zmode", "peer", "-connect",
                     ",".join(f"tcp/{ctx.endpoints[r]}:{PORT + int(r[3:])}" for r in subs)]
        else:
            argv += ["-zmode", "peer", "-listen", f"tcp/0.0.0.0:{PORT + int(ctx.role[3:])}"]
        if test.best_effort:
            argv.append("-besteffort")
        if driver:
            argv += self.driver_flags(test)
        return Command(tuple(argv))

    def unavailable(self) -> str | None:
        return None if built(BINARY) else not_built(BINARY, "Rust's cargo")

    def version(self) -> str:
        return first_line(BINARY, "-version")
