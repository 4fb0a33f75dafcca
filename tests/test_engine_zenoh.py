"""The zenoh engine: what it refuses, its roles and command lines peer to peer and routed,
and the parser on real k8sdds-zenoh output (fixtures/zenoh/README.md says how each was
made)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from k8sdds.deployment.placement import place
from k8sdds.engines import RoleContext, registry
from k8sdds.model import Limits, Test
from k8sdds.schedule import check

from .conftest import FIXTURES
from .parsers_support import PARSERS

ZENOH = FIXTURES / "zenoh"
BASE = Test(row=0, line=2, data_len=1024, multicast=False, num_subscribers=2,
            best_effort=False, batch_size=0, transport="tcp", duration=5, engine="zenoh",
            datapath="flannel-vxlan")
ROUTED = replace(BASE, topology="routed")
ENGINES = registry()
ENDPOINTS = {"pub": "10.244.1.10", "router": "10.244.0.10", "sub0": "10.244.2.10",
             "sub1": "10.244.2.11"}


def _argv(test: Test, role: str) -> tuple[str, ...]:
    ctx = RoleContext(role=role, address=ENDPOINTS[role], interface="eth0",
                      endpoints={r: ENDPOINTS[r] for r in ENGINES["zenoh"].roles(test)},
                      discovery="peers", config_dir="/run/rep")
    return ENGINES["zenoh"].command(test, ctx).argv


def _flag(argv: tuple[str, ...], name: str) -> str:
    return argv[argv.index(name) + 1]


@pytest.mark.parametrize("change, column", [
    ({"transport": "udp"}, "transport"),
    ({"multicast": True}, "multicast"),
    ({"batch_size": 8}, "batch_size"),
    ({"secure": True}, "secure"),
    ({"send_queue_size": 100}, "send_queue_size"),
    ({"discovery": "peers"}, "discovery"),
    ({"data_len": 8}, "data_len"),
    ({"latency_test": True, "pub_rate": 10}, "pub_rate"),
    ({"mqtt_qos": 1}, "mqtt_qos"),
])
def test_a_column_zenoh_cannot_honour_is_refused_with_the_reason(change, column):
    problem = check(replace(BASE, **change), Limits(), ENGINES)
    assert problem and problem[0] == column and problem[2]


def test_peer_and_routed_rows_are_accepted_and_dds_refuses_routed():
    for test in (BASE, ROUTED, replace(ROUTED, latency_test=True, best_effort=True)):
        assert check(test, Limits(), ENGINES) is None
    problem = check(replace(BASE, engine="ddsperf", transport="udp", topology="routed"),
                    Limits(), ENGINES)
    assert problem and problem[0] == "topology" and "ddsperf runs peer" in problem[2]
    problem = check(replace(BASE, engine="iperf3", topology="peer"), Limits(), ENGINES)
    assert problem and problem[0] == "topology" and "client to server" in problem[2]


def test_a_default_the_row_left_out_is_named_as_such(tmp_path):
    from k8sdds.errors import ScheduleError
    from k8sdds.schedule import load

    sch = tmp_path / "z.csv"
    sch.write_text("engine,dataLen,multicast,numSubscribers,bestEffort,batchSize\n"
                   "zenoh,64,false,1,false,0\n")
    with pytest.raises(ScheduleError, match=r"line 2 \(test row 0\), column 'transport': value "
                       r"'udp' \(the column's default: the row leaves it out\): .*set "
                       r"transport=tcp"):
        load(sch, engines=ENGINES)


def test_roles_peer_to_peer_and_routed():
    zenoh = ENGINES["zenoh"]
    assert list(zenoh.roles(BASE)) == ["pub", "sub0", "sub1"]
    # routed, the router follows the driver: the runner waits for it to listen first
    assert list(zenoh.roles(ROUTED)) == ["pub", "router", "sub0", "sub1"]
    assert zenoh.listen_port == 7447


def test_the_router_takes_a_node_of_its_own():
    roles = ENGINES["zenoh"].roles(ROUTED)
    on = place(roles, ["w1", "w2"], "cross-node", spare=["cp"])
    assert on == {"pub": "w1", "router": "cp", "sub0": "w2", "sub1": "w2"}


def test_peer_to_peer_the_subscribers_listen_and_the_publisher_dials_them_all():
    pub = _argv(BASE, "pub")
    assert pub[0] == "k8sdds-zenoh" and _flag(pub, "-mode") == "pub"
    assert _flag(pub, "-zmode") == "peer"
    assert _flag(pub, "-connect") == "tcp/10.244.2.10:7447,tcp/10.244.2.11:7448"
    assert (_flag(pub, "-duration"), _flag(pub, "-peers"), _flag(pub, "-size")) == \
        ("5", "2", "1024")
    assert "-besteffort" not in pub and "-listen" not in pub
    sub1 = _argv(BASE, "sub1")
    assert _flag(sub1, "-mode") == "sub" and _flag(sub1, "-listen") == "tcp/0.0.0.0:7448"
    assert "-connect" not in sub1 and "-duration" not in sub1


def test_routed_every_role_is_a_client_of_k8sdds_zenohs_router():
    assert _argv(ROUTED, "router") == ("k8sdds-zenoh", "-mode", "router", "-listen",
                                       "tcp/0.0.0.0:7447")
    for role in ("pub", "sub0", "sub1"):
        argv = _argv(ROUTED, role)
        assert _flag(argv, "-zmode") == "client"
        assert _flag(argv, "-connect") == "tcp/10.244.0.10:7447" and "-listen" not in argv


def test_best_effort_latency_and_rate():
    lat = replace(BASE, latency_test=True, best_effort=True, num_subscribers=1)
    assert _flag(_argv(lat, "pub"), "-mode") == "ping"
    assert _flag(_argv(lat, "sub0"), "-mode") == "pong"
    assert "-besteffort" in _argv(lat, "pub") and "-besteffort" in _argv(lat, "sub0")
    assert _argv(replace(BASE, pub_rate=500), "pub")[-2:] == ("-rate", "500")


def _summary(parsed) -> dict[str, float]:
    return {v.metric: v.value for v in parsed.values if v.kind == "summary"}


@pytest.mark.parametrize("log", ["sub-peer-1024.log", "sub-routed-1024.log"])
def test_subscriber_throughput_from_real_output(log):
    parsed = PARSERS["zenoh"]((ZENOH / log).read_text(), "sub0", False)
    assert parsed.failure is None
    s = _summary(parsed)
    active = [v.value for v in parsed.values
              if v.kind == "sample" and v.metric == "throughput_mbps" and v.value > 0]
    # the steady intervals: those that carried data, but the first and the last
    assert len(active) >= 4 and s["intervals"] == len(active) - 2
    assert s["throughput_mbps"] == pytest.approx(sum(active[1:-1]) / len(active[1:-1]))
    assert s["throughput_mbps"] > 1000  # Zenoh batches 1 KiB messages: Gb/s on a veth
    assert s["lost"] == 0  # reliable: nothing lost


@pytest.mark.parametrize("log", ["ping-peer-64.log", "ping-routed-64.log"])
def test_ping_latency_from_real_output(log):
    parsed = PARSERS["zenoh"]((ZENOH / log).read_text(), "pub", True)
    s = _summary(parsed)
    assert parsed.failure is None and s["roundtrips"] > 100
    assert s["latency_us_min"] <= s["latency_us_p50"] <= s["latency_us_p99"] <= \
        s["latency_us_max"]


def test_a_publisher_that_cannot_reach_its_peer_fails_with_its_reason():
    parsed = PARSERS["zenoh"]((ZENOH / "pub-no-peer.log").read_text(), "pub", False)
    assert parsed.failure and "cannot open a Zenoh" in parsed.failure


@pytest.mark.parametrize("log", ["router.log", "router-own.log"])
def test_the_router_measures_nothing(log):
    """zenohd's log (runs before k8sdds-zenoh was the router) and k8sdds-zenoh's."""
    ok = PARSERS["zenoh"]((ZENOH / log).read_text(), "router", False)
    assert ok.failure is None and ok.values == ()


def test_the_router_fails_on_its_errors():
    line = ("\x1b[2m2026-11-26T01:56:40.588665Z\x1b[0m \x1b[31mERROR\x1b[0m main ThreadId(01) "
            "\x1b[2mzenohd\x1b[0m\x1b[2m:\x1b[0m Unable to open listener tcp/0.0.0.0:7447: "
            "Address in use\n")
    bad = PARSERS["zenoh"](line, "router", False)
    assert bad.failure == "router: Unable to open listener tcp/0.0.0.0:7447: Address in use"
    # k8sdds-zenoh -mode router on a port already taken (real output)
    taken = PARSERS["zenoh"]((ZENOH / "router-own-port-taken.log").read_text(), "router", False)
    assert taken.failure and taken.failure.startswith("router: ")
    assert "Address already in use" in taken.failure


def test_engines_lists_zenoh_with_what_it_supports():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "k8sdds", "engines"], capture_output=True,
                         text=True, timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert ("zenoh: Zenoh throughput, latency, latency under load; peer to peer "
            "(topology=peer) or through a Zenoh "
            "router (topology=routed)") in " ".join(out.stdout.split())
