"""Cyclone DDS `ddsperf` (Debian package cyclonedds-tools).

Throughput: `pub [rate] size S` on the publisher, `sub` on each subscriber.
Latency: `ping size S` on the publisher, `pong` on each subscriber.
Transport, discovery, batching and the send queue go through a generated CYCLONEDDS_URI.
Under load (`load`): beside the ping and pong, a `pub` (role STREAM, on the ping's node) and a
`sub` (role SINK, on the pong's) of `load_len` samples in DDS domain STREAM_DOMAIN, so the
stream never matches the round trip's readers; at the stream rate the run gives it.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from k8sdds.engines import credentials, cyclone
from k8sdds.engines.base import (
    STREAM_DOMAIN,
    Command,
    Problem,
    RoleContext,
    debian_version,
    pubsub_roles,
    told_rate,
)
from k8sdds.engines.cyclone import CycloneConfig, SecurityFiles, render, security_plugins
from k8sdds.model import SINK, STREAM, Test
from k8sdds.parsers.ddsperf import PARSER

MIN_SIZE = 12  # ddsperf: the KS topic's fixed part; smaller sizes are refused
MAX_SIZE = 16 * 1024 * 1024
TCP_BASE_PORT = 7410
# seconds a process waits for its peers before it gives up (-Q initwait): a guard, not a
# figure (ddsperf goes on once they match). On an emulated Cortex-A7 pod with the host's load
# at 11 (a cold CI run, 2026-12-03) the pong side saw its peer's participant but not yet its
# writers after 10 s
DISCOVERY_WAIT = 20
WAIT_PER_SUBSCRIBER = 0.25  # more participants take longer to discover each other
# beside a stream at full rate (`load`), discovery's packets queue behind the stream's and
# its threads wait for the CPU: on a slower 2-core machine (kubelet pods, load=max,
# 2026-12-03) a round trip's two participants had not matched within 10 s
LOAD_WAIT = 30


def discovery_wait(test: Test) -> int:
    """-Q initwait: 20 s (30 s beside a load stream), and a quarter second more per
    subscriber beyond the first four; ddsperf goes on as soon as its peers match."""
    base = LOAD_WAIT if test.load else DISCOVERY_WAIT
    return int(base + WAIT_PER_SUBSCRIBER * max(0, test.num_subscribers - 4))
SAMPLE_OVERHEAD = 64  # bytes a sample takes in a datagram beyond its size (headers)
LARGEST_DATAGRAM = 65000  # under UDP's 65507


def unpacked(test: Test) -> dict[str, int]:
    """Cyclone's datagram sizes for a test without batching (batchSize 0): one sample per
    datagram, as RTI Perftest sends it. Left alone, Cyclone packs queued samples into one
    datagram of up to 14.7 KB, so small samples cost less the further a subscriber falls
    behind, and throughput swings between repeats. A datagram here holds one sample and its
    protocol messages, never two samples; a sample larger than the largest datagram goes in
    DDS fragments."""
    if test.batch_size:
        return {}
    largest = min(2 * test.data_len + SAMPLE_OVERHEAD, LARGEST_DATAGRAM)
    return {"max_message_bytes": largest,
            "fragment_bytes": min(test.data_len + SAMPLE_OVERHEAD, largest - SAMPLE_OVERHEAD)}


class Ddsperf:
    name = "ddsperf"
    arches: tuple[str, ...] = ()  # Debian's package: any
    middleware = True
    hubs: tuple[str, ...] = ()
    programs: tuple[str, ...] = ()
    qos_levels: tuple[int, ...] = ()
    supports = ("DDS throughput, latency, latency under load; udp, tcp, tls; DDS Security; "
                "multicast; batching; discovery by multicast or peers")
    parser = PARSER
    binary = "ddsperf"
    # seconds the subscribers get after the publisher exits; its publisher only exits once its
    # reliable data is acknowledged (Cyclone lingers ~0.4 s), so little is still in flight
    drain = 0.2
    listen_port = None  # discovery waits for the peers itself (-Q initwait)
    topologies = ("peer",)  # DDS needs no broker (the CDS serves discovery only)
    parallel_streams = False
    under_load = True  # STREAM and SINK: a pub and a sub beside the ping and pong
    node_traffic = False  # no node interface counters sampled

    def check(self, test: Test) -> Problem:
        if not MIN_SIZE <= test.data_len <= MAX_SIZE:
            return ("data_len", test.data_len,
                    f"ddsperf sends samples of {MIN_SIZE} to {MAX_SIZE} bytes")
        if test.transport in ("tcp", "tls") and test.multicast:
            return ("multicast", test.multicast, "multicast needs transport=udp")
        refused = cyclone.problem(test)
        if refused:
            return refused
        if test.latency_test and test.duration < 2:
            return ("duration", test.duration,
                    "a ddsperf latency test needs at least 2 s: its first round-trip line "
                    "comes after 1 s")
        if test.load and not MIN_SIZE <= test.load_len <= MAX_SIZE:
            return ("load_len", test.load_len,
                    f"ddsperf sends samples of {MIN_SIZE} to {MAX_SIZE} bytes")
        if test.latency_test and test.pub_rate:
            return ("pub_rate", test.pub_rate,
                    "a latency test sends one ping after each pong; set pubRate=0")
        return None

    def service_ports(self, test: Test) -> Sequence[tuple[int, str]]:
        return ()  # DDS discovers peers and picks ports itself: no Service forwards that

    def roles(self, test: Test) -> Sequence[str]:
        return pubsub_roles(test) + ([STREAM, SINK] if test.load else [])

    def timeout(self, test: Test) -> float:
        return test.duration + discovery_wait(test) + 10

    def secrets(self, test: Test, roles: Sequence[str], directory: str) -> None:
        if test.transport == "tls" or test.secure:
            credentials.ensure(Path(directory), list(roles))

    def command(self, test: Test, ctx: RoleContext) -> Command:
        if ctx.role in (STREAM, SINK):  # a throughput pair of load_len samples, its own domain
            stream = replace(test, data_len=test.load_len, latency_test=False, num_subscribers=1,
                             pub_rate=0, load="", load_len=0)
            return self._command(stream, ctx, ctx.role == STREAM, ctx.stream_rate,
                                 STREAM_DOMAIN)
        return self._command(test, ctx, ctx.role == "pub", test.pub_rate, 0)

    def _command(self, test: Test, ctx: RoleContext, publisher: bool, rate: float,
                 domain: int) -> Command:
        roles = list(ctx.endpoints)
        index = roles.index(ctx.role)
        tcp = test.transport in ("tcp", "tls")  # TLS is Cyclone's TCP transport with SSL
        ident = credentials.paths(Path(ctx.secrets_dir), ctx.role)
        security = None
        if test.secure:
            security = SecurityFiles(
                plugins=security_plugins() or "", identity_ca=str(ident.ca),
                certificate=str(ident.certificate), private_key=str(ident.key),
                governance=str(ident.governance), permissions=str(ident.permissions))
        peers: list[str] = []
        if ctx.discovery == "peers":  # the participants of its own domain only
            own = domain == STREAM_DOMAIN
            peers = [f"{addr}:{TCP_BASE_PORT + i}" if tcp else addr
                     for i, (role, addr) in enumerate(ctx.endpoints.items())
                     if (role in (STREAM, SINK)) == own]
            peers = list(dict.fromkeys(peers))
        if test.multicast:
            allow = "true"
        else:
            allow = "spdp" if ctx.discovery == "multicast" else "false"
        cfg = CycloneConfig(
            interface=ctx.interface,
            allow_multicast=allow,
            transport="tcp" if tcp else "udp",
            tcp_port=TCP_BASE_PORT + index if tcp else None,
            peers=peers,
            max_participant_index=max(9, len(roles) + 1),
            write_batch=test.batch_size > 0,
            whc_high_bytes=test.send_queue_size * test.data_len,
            **unpacked(test),
            ssl_keystore=str(ident.keystore) if test.transport == "tls" else None,
            security=security,
        )
        config_name = f"{ctx.role}.cyclonedds.xml"
        config_path = Path(ctx.config_dir) / config_name
        # the stream outlasts the round trip it runs beside: it is stopped once that ends
        driver = publisher and ctx.role == "pub"
        argv = [self.binary, "-D", _seconds(test.duration if driver
                                             else test.duration + discovery_wait(test) + 10)]
        if domain:
            argv += ["-i", str(domain)]
        argv += ["-Q", f"minmatch:{test.num_subscribers if publisher else 1}",
                 "-Q", f"initwait:{discovery_wait(test)}"]
        if test.best_effort:
            argv.append("-u")
        if test.latency_test:
            argv += ["ping", "size", str(test.data_len)] if publisher else ["pong"]
        elif publisher:
            argv += ["pub", f"{told_rate(rate)}Hz" if rate else "inf", "size",
                     str(test.data_len)]
        else:
            argv += ["sub"]
        return Command(argv=tuple(argv),
                       env={"CYCLONEDDS_URI": config_path.resolve().as_uri()},
                       files={config_name: render(cfg)})

    def unavailable(self) -> str | None:
        if shutil.which(self.binary) is None:
            return ("ddsperf is not installed; install the Debian package cyclonedds-tools "
                    "(apt-get install cyclonedds-tools), or run `make demo`, which does")
        return None

    def version(self) -> str:
        return debian_version("cyclonedds-tools")


def _seconds(value: float) -> str:
    return f"{value:g}"
