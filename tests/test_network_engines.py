"""ping, iperf3 and qperf: parsers on real captured output (fixtures/network/README.md says
how each was made), command lines, and what each engine refuses."""

from __future__ import annotations

from dataclasses import replace

import pytest

from k8sdds.engines import RoleContext, registry
from k8sdds.model import Limits, Test
from k8sdds.schedule import check

from .conftest import FIXTURES
from .parsers_support import PARSERS

NET = FIXTURES / "network"


def _parse(name: str, fixture: str, role: str = "client"):
    return PARSERS[name]((NET / fixture).read_text(), role, False)


def _summary(parsed) -> dict[str, float]:
    return {v.metric: v.value for v in parsed.values if v.kind == "summary"}


def test_iperf3_tcp_takes_the_receiver_rate_retransmits_and_cpu():
    s = _summary(_parse("iperf3", "iperf3-tcp-client.json"))
    assert s["throughput_mbps"] == pytest.approx(14091.4175, rel=1e-6)
    assert s["throughput_sent_mbps"] == pytest.approx(14097.5052, rel=1e-6)
    assert s["retransmits"] == 12 and s["cpu_pct"] == pytest.approx(65.943, rel=1e-4)
    assert "jitter_ms" not in s
    samples = [v for v in _parse("iperf3", "iperf3-tcp-client.json").all_values()
               if v.kind == "sample"]
    assert len(samples) == 2 and all(v.metric == "throughput_mbps" for v in samples)


def test_iperf3_parallel_streams_use_the_sum():
    s = _summary(_parse("iperf3", "iperf3-tcp-p4-client.json"))
    assert s["throughput_mbps"] == pytest.approx(13125.59, rel=1e-5)


def test_iperf3_udp_reports_loss_and_jitter():
    s = _summary(_parse("iperf3", "iperf3-udp-client.json"))
    assert s["throughput_mbps"] == pytest.approx(1072.951, rel=1e-5)  # received, not sent
    assert s["lost"] == 112191 and s["received"] == 303810 - 112191
    assert s["jitter_ms"] == pytest.approx(0.11164, rel=1e-3)


@pytest.mark.parametrize("fixture, reason", [
    ("iperf3-refused-client.json", "iperf3: unable to connect to server: Connection refused"),
    ("iperf3-timeout-client.json", "iperf3: unable to connect to server: Connection timed out"),
])
def test_iperf3_failures_carry_iperf3s_reason(fixture, reason):
    parsed = _parse("iperf3", fixture)
    assert parsed.failure == reason and not parsed.values


def test_iperf3_cut_short_is_a_failure_not_a_number():
    text = (NET / "iperf3-tcp-client.json").read_text()[:500]
    assert "not complete JSON" in PARSERS["iperf3"](text, "client", False).failure


def test_servers_measure_nothing():
    for name, fixture in (("iperf3", "iperf3-tcp-server.json"), ("qperf", "qperf-tcp_bw.log")):
        parsed = _parse(name, fixture, role="server")
        assert parsed.failure is None and not parsed.values


@pytest.mark.parametrize("fixture, metric, value", [
    ("qperf-tcp_bw.log", "throughput_mbps", 409 * 8),
    ("qperf-udp_bw.log", "throughput_mbps", 91.9 * 8),  # received, not sent
    ("qperf-tcp_lat.log", "latency_us_mean", 2 * 9.42),  # one way -> round trip
    ("qperf-udp_lat.log", "latency_us_mean", 2 * 7.15),
    ("qperf-v-tcp_bw.log", "cpu_pct", 197),
    ("qperf-v-udp_lat.log", "samples_per_s", 141_000),
])
def test_qperf_values(fixture, metric, value):
    assert _summary(_parse("qperf", fixture))[metric] == pytest.approx(value)


@pytest.mark.parametrize("fixture", ["qperf-refused.log", "qperf-timeout.log"])
def test_qperf_failure(fixture):
    assert _parse("qperf", fixture).failure == "qperf: failed to connect"


def test_ping_percentiles_from_every_reply():
    parsed = _parse("ping", "ping-ok.log")
    s = _summary(parsed)
    assert s["roundtrips"] == 5 and s["lost"] == 0
    assert s["latency_us_min"] == pytest.approx(25) and s["latency_us_max"] == pytest.approx(43)
    assert s["latency_us_p50"] == pytest.approx(31)  # median of 25, 28, 31, 33, 43
    assert s["latency_us_mean"] == pytest.approx(32)
    assert len([v for v in parsed.all_values() if v.kind == "sample"]) == 5


@pytest.mark.parametrize("fixture, reason", [
    ("ping-loss.log", "no reply: 3 packets transmitted, 0 received"),
    ("ping-nonet.log", "ping: connect: Network is unreachable"),
])
def test_ping_failures(fixture, reason):
    assert _parse("ping", fixture).failure == reason


def test_ping_partial_loss_counts_the_lost():
    text = (NET / "ping-ok.log").read_text().replace(
        "1032 bytes from 127.0.0.1: icmp_seq=2 ttl=64 time=0.043 ms\n", "").replace(
        "5 received, 0%", "4 received, 20%")
    s = _summary(PARSERS["ping"](text, "client", False))
    assert s["lost"] == 1 and s["roundtrips"] == 4


BASE = Test(row=0, line=2, data_len=1024, multicast=False, num_subscribers=1,
            best_effort=False, batch_size=0, transport="tcp", duration=5,
            datapath="flannel-hostgw")
ENGINES = registry()  # a fresh registry, as a run builds one
ENDPOINTS = {"client": "10.244.1.10", "server": "10.244.2.10"}


def _argv(engine: str, test: Test, role: str = "client") -> tuple[str, ...]:
    ctx = RoleContext(role=role, address=ENDPOINTS[role], interface="eth0",
                      endpoints=ENDPOINTS, discovery="peers", config_dir="/tmp/x")
    return ENGINES[engine].command(test, ctx).argv


def test_command_lines():
    assert _argv("iperf3", BASE) == (
        "iperf3", "-c", "10.244.2.10", "-p", "5201", "-J", "-t", "5", "-l", "1024", "-P",
        "1", "--connect-timeout", "5000")
    assert _argv("iperf3", BASE, "server") == ("iperf3", "-s", "-1", "-J", "-p", "5201")
    udp = replace(BASE, transport="udp", pub_rate=1000, streams=4)
    assert _argv("iperf3", udp)[10:] == ("-P", "4", "--connect-timeout", "5000", "-u", "-b",
                                         str(1000 * 1024 * 8))
    assert _argv("qperf", BASE) == ("qperf", "10.244.2.10", "--listen_port", "19765", "-t",
                                    "5", "-m", "1024", "-v", "tcp_bw")
    assert _argv("qperf", replace(BASE, transport="udp", latency_test=True))[-1] == "udp_lat"
    assert _argv("qperf", BASE, "server") == ("qperf", "--listen_port", "19765")
    lat = replace(BASE, latency_test=True, data_len=56)
    assert _argv("ping", lat) == ("ping", "-n", "-c", "25", "-i", "0.2", "-W", "1", "-s", "56",
                                  "10.244.2.10")
    assert _argv("ping", replace(lat, pub_rate=100))[3:6] == ("500", "-i", "0.01")
    assert _argv("ping", lat, "server")[0] == "sleep"


@pytest.mark.parametrize("engine, change, column", [
    ("iperf3", {"num_subscribers": 2}, "num_subscribers"),
    ("iperf3", {"latency_test": True}, "latency_test"),
    ("iperf3", {"multicast": True}, "multicast"),
    ("iperf3", {"transport": "tls"}, "transport"),
    ("iperf3", {"transport": "udp", "data_len": 70000}, "data_len"),
    ("qperf", {"streams": 2}, "streams"),
    ("qperf", {"secure": True}, "secure"),
    ("ping", {"latency_test": False}, "latency_test"),
    ("ping", {"latency_test": True, "batch_size": 10}, "batch_size"),
])
def test_what_each_engine_refuses(engine, change, column):
    # through the schedule's check: the rules all engines share live there
    problem = check(replace(BASE, engine=engine, **change), Limits(), ENGINES)
    assert problem and problem[0] == column and problem[2]


def test_roles_are_client_then_server():
    for name in ("iperf3", "qperf", "ping", "ab"):
        assert list(ENGINES[name].roles(BASE)) == ["client", "server"]


def test_iperf3_warnings_before_the_json_are_skipped():
    text = ("warning: UDP block size 1400 exceeds TCP MSS 1398, may result in fragmentation "
            "/ drops\n" + (NET / "iperf3-udp-client.json").read_text())
    s = _summary(PARSERS["iperf3"](text, "client", False))
    assert s["throughput_mbps"] == pytest.approx(1072.951, rel=1e-5)


def test_ab_requests_latency_and_transfer_rate():
    s = _summary(_parse("ab", "ab-ok.log"))
    assert s["requests_per_s"] == pytest.approx(19387.70)
    assert s["latency_us_mean"] == pytest.approx(206)  # "Time per request: 0.206 [ms] (mean)"
    assert s["throughput_mbps"] == pytest.approx(23931.69 * 1024 * 8 / 1e6)
    assert s["received"] == 38776 and s["failed"] == 0
    assert s["latency_us_p50"] == 0 and s["latency_us_p99"] == 0  # whole milliseconds


@pytest.mark.parametrize("fixture, reason", [
    ("ab-refused.log", "ab: apr_socket_recv: Connection refused (111)"),
    ("ab-404.log", "ab: 22571 of 22571 responses were not 2xx"),
])
def test_ab_failures(fixture, reason):
    assert _parse("ab", fixture).failure == reason


def test_ab_command_lines_and_nginx_config():
    test = replace(BASE, streams=8)
    assert _argv("ab", test) == ("ab", "-k", "-c", "8", "-t", "5", "-n", "500000", "-s",
                                 "10", "http://10.244.2.10:8080/payload")
    ctx = RoleContext(role="server", address=ENDPOINTS["server"], interface="eth0",
                      endpoints=ENDPOINTS, discovery="peers", config_dir="/tmp/x")
    cmd = ENGINES["ab"].command(test, ctx)
    assert cmd.argv == ("nginx", "-c", "/tmp/x/server.nginx.conf", "-p", "/tmp/x", "-e",
                        "stderr")
    assert cmd.files["payload"] == "x" * 1024
    conf = cmd.files["server.nginx.conf"]
    assert "listen 8080;" in conf and "daemon off;" in conf and "root /tmp/x;" in conf
    assert conf.startswith("user ")
    assert ENGINES["ab"].check(replace(BASE, transport="udp"))[0] == "transport"


@pytest.mark.parametrize("engine, transport, refused", [
    ("iperf3", "udp", True), ("iperf3", "tcp", False), ("qperf", "udp", True),
    ("qperf", "tcp", False), ("ping", "tcp", True),
])
def test_datagram_size_bound(engine, transport, refused):
    test = replace(BASE, engine=engine, transport=transport, data_len=70_000,
                   latency_test=engine == "ping")
    problem = ENGINES[engine].check(test)
    assert (problem is not None and problem[0] == "data_len") == refused
