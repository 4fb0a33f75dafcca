"""Zenoh discovery itself, timed: `k8sdds-zenoh -mode discover` (engines/zenoh/src/
discover.rs), one Zenoh session a participant, in k8sdds-discovery's lines.

As a `dds-discovery` test, numSubscribers + 1 participants (`p0`, `p1`, ...) start together
and each records the time from its own start until it knows every peer, and what its
network interface carried meanwhile and over a steady window after (`duration` seconds).
Zenoh has no readers and writers to match: a participant knows a peer once it has that
peer's liveliness token (what rmw_zenoh builds a ROS 2 graph from). How the sessions find
each other:
- `topology=peer`, `discovery=multicast`: Zenoh's multicast scouting (224.0.0.224:7446,
  TTL 1: one link, never routed), each peer listening on a port of its own;
- `topology=peer`, `discovery=peers`: no scouting, each peer dialing those started before
  it (`dialed`: each pair once);
- `topology=routed`: each participant a client of a Zenoh router (`router`, on a node of
  its own where there is one), which it is told the address of.
Without a `discovery` value a peer-to-peer row goes by peers (repeat.discovery_of: a tcp
row), or by peers where the run's own probe found multicast did not cross.
"""

from __future__ import annotations

from collections.abc import Sequence

from k8sdds.engines.base import Command, Problem, RoleContext
from k8sdds.engines.clients import built, first_line, not_built
from k8sdds.engines.discovery import ROLE, SETTLE, WAIT, DiscoveryTest, data_problem, participants
from k8sdds.engines.zenoh import BINARY, PORT, router_argv
from k8sdds.model import Test
from k8sdds.parsers.zenoh import ROUTER

NAME = "zenoh-discovery"


def dialed(own: Sequence[str], role: str) -> list[str]:
    """The participants `role` dials in the peers mode: those started before it (the
    followers `p1`, `p2`, ... in order, then the driver `p0`: repeat.one_repeat), so that
    each pair connects once and only to a peer that exists (on kubernetes its DNS name
    resolves once its pod does, which the later pod's start waits for)."""
    index = own.index(role)
    return list(own[1:]) if index == 0 else list(own[1:index])


class ZenohDiscovery(DiscoveryTest):
    name = NAME
    binary = BINARY
    programs = (BINARY,)
    arches = ("amd64", "arm64")  # as the zenoh engine: Rust, this machine's and a Pi 4/5's
    hubs = (ROUTER,)  # k8sdds-zenoh -mode router, in the routed topology
    supports = ("Zenoh discovery time and traffic of numSubscribers + 1 sessions (liveliness "
                "tokens); multicast scouting or peers (topology=peer), or a router "
                "(topology=routed); tcp")
    topologies = ("peer", "routed")

    def check(self, test: Test) -> Problem:
        if test.transport != "tcp":
            return ("transport", test.transport,
                    "k8sdds runs Zenoh over TCP (its reliable link); set transport=tcp")
        if test.topology == "routed" and test.discovery:
            return ("discovery", test.discovery,
                    "through a router, each participant is told the router's address; leave "
                    "discovery empty (or set topology=peer for multicast or peers)")
        return data_problem(test, "Zenoh has no DDS Security; set secure=false")

    def roles(self, test: Test) -> Sequence[str]:
        own = [f"{ROLE}{i}" for i in range(participants(test))]
        # the router first of the followers (repeat.one_repeat starts roles[1:] in order)
        return [own[0], ROUTER, *own[1:]] if test.topology == "routed" else own

    def mode(self, topology: str, discovery: str) -> str:
        """The mode a repeat ran with, as the answer names it."""
        if topology == "routed":
            return "zenoh router"
        return "zenoh scouting" if discovery == "multicast" else "zenoh peers"

    def command(self, test: Test, ctx: RoleContext) -> Command:
        if ctx.role == ROUTER:
            return Command(router_argv())
        own = [r for r in ctx.endpoints if r != ROUTER]
        index = own.index(ctx.role)
        argv = [BINARY, "-mode", "discover", "-peers", str(len(own) - 1), "-wait", str(WAIT),
                "-settle", str(SETTLE), "-steady", f"{test.duration:g}", "-id", ctx.role]
        if test.topology == "routed":
            argv += ["-zmode", "client", "-connect", f"tcp/{ctx.endpoints[ROUTER]}:{PORT}"]
        else:
            # a port each: participants on one node's network share its address
            argv += ["-zmode", "peer", "-listen", f"tcp/0.0.0.0:{PORT + index}"]
            if ctx.discovery == "multicast":
                argv.append("-scout")
            else:  # each pair once: the later started dials the earlier (see `dialed`)
                dials = dialed(own, ctx.role)
                if dials:
                    argv += ["-connect", ",".join(f"tcp/{ctx.endpoints[r]}:{PORT + own.index(r)}"
                                                  for r in dials)]
        if ctx.interface:
            argv += ["-iface", ctx.interface]
        if ctx.start_at:
            argv += ["-at", f"{ctx.start_at:.3f}"]
        return Command(tuple(argv))

    def unavailable(self) -> str | None:
        return None if built(BINARY) else not_built(BINARY, "Rust's cargo")

    def version(self) -> str:
        return first_line(BINARY, "-version")

    def how_to_build(self, arches: Sequence[str]) -> str:
        return "`make engines`, or " + "; ".join(
            f"ARCH={a} ENGINES=zenoh engines/build" for a in arches)
