"""Network baseline engines: ping, iperf3, qperf and ab (against nginx), measuring the path
the pub/sub traffic takes without any middleware.

Every one has two roles: `client` (the driver, placed where the publisher would be) and
`server` (where the first subscriber would be). The client's output is the measurement.
ping needs no server program; its server role only holds the pod (`sleep`).
"""

from __future__ import annotations

import os
import pwd
import shutil
from collections.abc import Sequence

from k8sdds.engines.base import Command, Problem, RoleContext, debian_version
from k8sdds.model import Test
from k8sdds.parsers import ab, iperf3, ping, qperf
from k8sdds.parsers.reader import Parser

MAX_DATAGRAM = 65507  # UDP and ICMP payload in one IPv4 datagram
AB_PORT = 8080
AB_MAX_RATE = 100_000  # requests/s ab is sized for
IPERF3_PORT = 5201
QPERF_PORT = 19765
ROLES = ("client", "server")


class _Network:
    """What the three share: two roles, one path, no DDS options."""

    name: str
    parser: Parser
    package: str  # the Debian package that provides the binary
    binary: str
    drain = 1.0  # the server gets this long after the client ends
    arches: tuple[str, ...] = ()  # Debian's packages: every architecture
    middleware = False  # the network itself
    hubs: tuple[str, ...] = ()
    programs: tuple[str, ...] = ()
    qos_levels: tuple[int, ...] = ()
    listen_port: int | None = None  # the server's TCP port: the client starts once it listens
    topologies: tuple[str, ...] = ()  # client to server: no topology to choose
    transports: tuple[str, ...] = ("tcp", "udp")
    parallel_streams = False
    under_load = False  # no stream beside its round trip (the load column)
    node_traffic = False  # no node interface counters sampled

    def check(self, test: Test) -> Problem:
        if test.num_subscribers != 1:
            return ("num_subscribers", test.num_subscribers,
                    f"{self.name} measures one client and one server; set numSubscribers=1")
        if test.multicast:
            return ("multicast", test.multicast, f"{self.name} measures unicast; set "
                    "multicast=false")
        if test.secure:
            return ("secure", test.secure, f"{self.name} has no DDS Security; set secure=false")
        if test.batch_size:
            return ("batch_size", test.batch_size, f"{self.name} has no batching; set "
                    "batchSize=0")
        if test.transport not in self.transports:
            return ("transport", test.transport,
                    f"{self.name} measures {', '.join(self.transports)}")
        if test.data_len > MAX_DATAGRAM and self.datagrams(test):
            return ("data_len", test.data_len,
                    f"an IP datagram holds at most {MAX_DATAGRAM} bytes of payload")
        return self._check(test)

    def _check(self, test: Test) -> Problem:
        return None

    def datagrams(self, test: Test) -> bool:
        """Whether each message is one IP datagram (so its size is bounded)."""
        return test.transport == "udp"

    def roles(self, test: Test) -> Sequence[str]:
        return list(ROLES)

    def service_ports(self, test: Test) -> Sequence[tuple[int, str]]:
        """The server's port, by the test's transport (a Service forwards ports only)."""
        return ()

    @staticmethod
    def server_port(ctx: RoleContext, port: int) -> int:
        """The port to dial for the server's `port` (a NodePort, on that path)."""
        return ctx.ports.get(port, port)

    def timeout(self, test: Test) -> float:
        return test.duration + 20

    def secrets(self, test: Test, roles: Sequence[str], directory: str) -> None:
        """Nothing to make."""

    def unavailable(self) -> str | None:
        if shutil.which(self.binary) is None:
            return (f"{self.binary} is not installed; install the Debian package "
                    f"{self.package} (apt-get install {self.package}), or run `make install`")
        return None

    def version(self) -> str:
        return debian_version(self.package)

    @staticmethod
    def server_address(ctx: RoleContext) -> str:
        return ctx.endpoints["server"]


class Iperf3(_Network):
    """iperf3 -J: TCP or UDP throughput (`-u`, rate from pubRate x dataLen, else unlimited),
    `-l dataLen` per write, `-P streams`."""

    name = binary = package = "iperf3"
    parser = iperf3.PARSER
    supports = "throughput; tcp, udp; parallel streams; through a Service"
    parallel_streams = True  # -P
    listen_port = IPERF3_PORT

    def _check(self, test: Test) -> Problem:
        if test.latency_test:
            return ("latency_test", test.latency_test,
                    "iperf3 measures throughput; use engine=ping or qperf for latency")
        if test.data_len > 128 * 1024 * 1024:
            return ("data_len", test.data_len, "iperf3 writes at most 128 MiB at a time")
        return None

    def service_ports(self, test: Test) -> Sequence[tuple[int, str]]:
        # iperf3 -u: the control connection is TCP, the datagrams UDP, on one port number
        return [(IPERF3_PORT, "TCP")] + ([(IPERF3_PORT, "UDP")] if test.transport == "udp"
                                          else [])

    def command(self, test: Test, ctx: RoleContext) -> Command:
        if ctx.role == "server":
            return Command(("iperf3", "-s", "-1", "-J", "-p", str(IPERF3_PORT)))
        argv = ["iperf3", "-c", self.server_address(ctx), "-p",
                str(self.server_port(ctx, IPERF3_PORT)), "-J",
                "-t", f"{test.duration:g}", "-l", str(test.data_len), "-P", str(test.streams),
                "--connect-timeout", "5000"]
        if test.transport == "udp":
            argv += ["-u", "-b", str(test.pub_rate * test.data_len * 8)]  # 0: unlimited
        return Command(tuple(argv))


class Qperf(_Network):
    """qperf: `tcp_bw`/`udp_bw`, or `tcp_lat`/`udp_lat` in a latency test, `-m dataLen`."""

    name = binary = package = "qperf"
    parser = qperf.PARSER
    supports = "throughput, latency; tcp, udp"
    listen_port = QPERF_PORT

    def command(self, test: Test, ctx: RoleContext) -> Command:
        if ctx.role == "server":
            return Command(("qperf", "--listen_port", str(QPERF_PORT)))
        kind = "lat" if test.latency_test else "bw"
        return Command(("qperf", self.server_address(ctx), "--listen_port", str(QPERF_PORT),
                        "-t", f"{test.duration:g}", "-m", str(test.data_len), "-v",
                        f"{test.transport}_{kind}"))


class Ping(_Network):
    """ping: ICMP echo round trips of dataLen bytes, every 0.2 s (or at pubRate)."""

    name = binary = "ping"
    parser = ping.PARSER
    supports = "latency (ICMP echo)"
    package = "iputils-ping"
    drain = 0.0
    transports = ("udp", "tcp")  # ICMP either way: the transport column does not apply

    def _check(self, test: Test) -> Problem:
        if not test.latency_test:
            return ("latency_test", test.latency_test,
                    "ping measures latency; set latencyTest=true (or use iperf3)")
        if test.pub_rate > 1000:
            return ("pub_rate", test.pub_rate, "ping sends at most 1000 echoes a second")
        return None

    def datagrams(self, test: Test) -> bool:
        return True  # ICMP, whatever the transport column says

    def timeout(self, test: Test) -> float:
        return test.duration + 5

    def command(self, test: Test, ctx: RoleContext) -> Command:
        if ctx.role == "server":  # the kernel answers; this only keeps the pod
            return Command(("sleep", f"{self.timeout(test) + 5:g}"))
        interval = 1 / test.pub_rate if test.pub_rate else 0.2
        count = max(1, int(test.duration / interval))
        return Command(("ping", "-n", "-c", str(count), "-i", f"{interval:g}", "-W", "1",
                        "-s", str(test.data_len), self.server_address(ctx)))


# the worker runs as the master's user: the repeat directory may sit under a private parent
# (nobody could not read the payload); it serves one file in a test namespace
NGINX_CONF = """user {user};
worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log stderr crit;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  sendfile on;
  keepalive_requests 1000000;
  server {{
    listen {port};
    root {dir};
    location = /payload {{ }}
    location / {{ return 404; }}
  }}
}}
"""


class Ab(_Network):
    """ab against nginx: HTTP GETs of a dataLen-byte file over keep-alive connections,
    `streams` of them at once (ab -c), for the duration."""

    name = "ab"
    parser = ab.PARSER
    supports = "HTTP requests and latency; tcp; concurrent connections; through a Service"
    binary = "ab"
    package = "apache2-utils"
    parallel_streams = True  # -c: concurrent connections
    listen_port = AB_PORT
    transports = ("tcp",)

    def _check(self, test: Test) -> Problem:
        if test.latency_test:
            return ("latency_test", test.latency_test,
                    "ab measures requests per second (and their latency) in one test; set "
                    "latencyTest=false")
        if test.data_len > 64 * 1024 * 1024:
            return ("data_len", test.data_len, "the served file is at most 64 MiB")
        return None

    def unavailable(self) -> str | None:
        for binary, package in (("ab", "apache2-utils"), ("nginx", "nginx-light")):
            if shutil.which(binary) is None:
                return (f"{binary} is not installed; install the Debian package {package} "
                        f"(apt-get install {package}), or run `make install`")
        return None

    def service_ports(self, test: Test) -> Sequence[tuple[int, str]]:
        return [(AB_PORT, "TCP")]

    def command(self, test: Test, ctx: RoleContext) -> Command:
        if ctx.role == "server":
            conf = f"{ctx.role}.nginx.conf"
            return Command(("nginx", "-c", f"{ctx.config_dir}/{conf}", "-p", ctx.config_dir,
                            "-e", "stderr"),
                           files={conf: NGINX_CONF.format(dir=ctx.config_dir, port=AB_PORT,
                                                          user=_user()),
                                  "payload": "x" * test.data_len})
        # ab keeps every request's times (-n of them): enough for the duration at a rate no
        # single nginx worker reaches, without ab allocating gigabytes up front
        requests = int(min(AB_MAX_RATE * test.duration, 10_000_000))
        return Command(("ab", "-k", "-c", str(test.streams), "-t", f"{test.duration:g}", "-n",
                        str(requests), "-s", "10",
                        f"http://{self.server_address(ctx)}:{self.server_port(ctx, AB_PORT)}"
                        "/payload"))


def _user() -> str:
    return pwd.getpwuid(os.geteuid()).pw_name
