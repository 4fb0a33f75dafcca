"""The mqtt engine: what it refuses, its roles and command lines, and its parser on real
k8sdds-mqtt and mosquitto output (fixtures/mqtt/README.md says how each was made)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from k8sdds.engines import RoleContext, registry
from k8sdds.engines.mqtt import broker_config
from k8sdds.model import Limits, Test
from k8sdds.schedule import check

from .conftest import FIXTURES
from .parsers_support import PARSERS

MQTT = FIXTURES / "mqtt"
BASE = Test(row=0, line=2, data_len=1024, multicast=False, num_subscribers=2,
            best_effort=False, batch_size=0, transport="tcp", duration=5, engine="mqtt",
            datapath="flannel-hostgw")
ENGINES = registry()
ENDPOINTS = {"pub": "10.244.1.10", "broker": "10.244.0.10", "sub0": "10.244.2.10",
             "sub1": "10.244.2.11"}


def _command(test: Test, role: str):
    ctx = RoleContext(role=role, address=ENDPOINTS[role], interface="eth0",
                      endpoints=ENDPOINTS, discovery="peers", config_dir="/run/rep")
    return ENGINES["mqtt"].command(test, ctx)


@pytest.mark.parametrize("change, column", [
    ({"transport": "udp"}, "transport"),
    ({"transport": "tls"}, "transport"),
    ({"multicast": True}, "multicast"),
    ({"batch_size": 8}, "batch_size"),
    ({"secure": True}, "secure"),
    ({"send_queue_size": 100}, "send_queue_size"),
    ({"discovery": "peers"}, "discovery"),
    ({"data_len": 8}, "data_len"),
    ({"latency_test": True, "pub_rate": 10}, "pub_rate"),
    ({"topology": "peer"}, "topology"),
    ({"mqtt_qos": 0}, "mqtt_qos"),  # QoS 0 is best effort, the row says reliable
    ({"mqtt_qos": 2, "best_effort": True}, "mqtt_qos"),
])
def test_a_column_mqtt_cannot_honour_is_refused_with_the_reason(change, column):
    problem = check(replace(BASE, **change), Limits(), ENGINES)
    assert problem and problem[0] == column and problem[2]


def test_a_plain_tcp_row_is_accepted():
    assert check(BASE, Limits(), ENGINES) is None
    assert check(replace(BASE, latency_test=True, best_effort=True), Limits(), ENGINES) is None


def test_roles_put_the_broker_right_after_the_driver():
    # the runner waits for the first follower to listen before it starts the driver
    assert list(ENGINES["mqtt"].roles(BASE)) == ["pub", "broker", "sub0", "sub1"]
    assert ENGINES["mqtt"].listen_port == 1883


def test_command_lines():
    broker = _command(BASE, "broker")
    assert broker.argv == ("mosquitto", "-c", "/run/rep/mosquitto.conf")
    assert broker.files == {"mosquitto.conf": broker_config()}
    assert "listener 1883 0.0.0.0" in broker_config()
    pub = _command(BASE, "pub").argv
    assert pub[0] == "k8sdds-mqtt" and pub[1:] == (
        "-mode", "pub", "-broker", "10.244.0.10:1883", "-topic", "k8sdds", "-size", "1024",
        "-qos", "1", "-wait", "10", "-id", "k8sdds-pub", "-duration", "5", "-peers", "2")
    sub = _command(replace(BASE, best_effort=True), "sub1").argv
    assert sub[1:3] == ("-mode", "sub") and sub[sub.index("-qos") + 1] == "0"
    assert "-duration" not in sub
    lat = replace(BASE, latency_test=True)
    assert _command(lat, "pub").argv[2] == "ping" and _command(lat, "sub0").argv[2] == "pong"
    assert _command(replace(BASE, pub_rate=500), "pub").argv[-2:] == ("-rate", "500")


@pytest.mark.parametrize("change, qos", [
    ({"best_effort": True}, "0"), ({}, "1"), ({"mqtt_qos": 2}, "2"),
    ({"mqtt_qos": 0, "best_effort": True}, "0"), ({"topology": "routed", "mqtt_qos": 1}, "1")])
def test_mqtt_qos_2_is_asked_for_with_its_column(change, qos):
    test = replace(BASE, **change)
    assert check(test, Limits(), ENGINES) is None
    for role in ("pub", "sub0"):
        argv = _command(test, role).argv
        assert argv[argv.index("-qos") + 1] == qos


def test_mqtt_qos_is_read_from_the_schedule_and_refused_for_another_engine(tmp_path):
    from k8sdds.errors import ScheduleError
    from k8sdds.schedule import load

    head = "dataLen,multicast,numSubscribers,bestEffort,batchSize,engine,transport,mqttQos\n"
    good = tmp_path / "good.csv"
    good.write_text(head + "64,false,1,false,0,mqtt,tcp,2\n")
    assert load(good)[0].mqtt_qos == 2
    bad = tmp_path / "bad.csv"
    bad.write_text(head + "64,false,1,false,0,ddsperf,udp,2\n")
    with pytest.raises(ScheduleError, match=r"column 'mqttQos'.*for engine=mqtt only"):
        load(bad, limits=Limits(), engines=ENGINES)
    three = tmp_path / "three.csv"
    three.write_text(head + "64,false,1,false,0,mqtt,tcp,3\n")
    with pytest.raises(ScheduleError, match=r"line 2.*column 'mqttQos'.*from 0 to 2"):
        load(three)


def _summary(parsed) -> dict[str, float]:
    return {v.metric: v.value for v in parsed.values if v.kind == "summary"}


def test_subscriber_throughput_from_real_output():
    text = (MQTT / "sub-qos1-1024.log").read_text()
    parsed = PARSERS["mqtt"](text, "sub0", False)
    assert parsed.failure is None
    s = _summary(parsed)
    samples = [v.value for v in parsed.values
               if v.kind == "sample" and v.metric == "throughput_mbps"]
    assert len(samples) >= 3 and s["intervals"] == len(samples) - 2  # steady intervals
    assert s["throughput_mbps"] == pytest.approx(sum(samples[1:-1]) / len(samples[1:-1]))
    assert s["lost"] == 0  # QoS 1 loses nothing


def test_ping_latency_from_real_output():
    parsed = PARSERS["mqtt"]((MQTT / "ping-qos0-64.log").read_text(), "pub", True)
    s = _summary(parsed)
    assert parsed.failure is None and s["roundtrips"] > 100
    assert s["latency_us_min"] <= s["latency_us_p50"] <= s["latency_us_p99"] <= \
        s["latency_us_max"]


def test_the_broker_measures_nothing_and_fails_only_on_its_errors():
    ok = PARSERS["mqtt"]((MQTT / "broker.log").read_text(), "broker", False)
    assert ok.failure is None and ok.values == ()
    bad = PARSERS["mqtt"]("1764110000: Error: Address already in use\n", "broker", False)
    assert bad.failure == "mosquitto: Address already in use"


def test_a_client_that_cannot_reach_the_broker_fails_with_its_reason():
    parsed = PARSERS["mqtt"]((MQTT / "pub-no-broker.log").read_text(), "pub", False)
    assert parsed.failure and "cannot connect to the broker" in parsed.failure


def test_a_row_whose_engine_is_not_built_for_a_nodes_architecture_is_refused():
    """k8sdds-zenoh is built for amd64 and arm64 (Rust; no armhf cross gcc here): a Pi 3
    (armhf) among the nodes refuses a zenoh row before anything runs; mqtt (Go) has armhf."""
    from dataclasses import replace

    hybrid = Limits(arches={"master": "amd64", "pi1": "armhf", "pi2": "arm64"})
    zenoh = replace(BASE, engine="zenoh")
    assert check(zenoh, hybrid, ENGINES) == (
        "engine", "zenoh", "zenoh is built for amd64, arm64 only, and roles may land on pi1 "
        "(armhf): leave those nodes out (kubernetes: --arch; ssh: the inventory)")
    assert check(zenoh, Limits(arches={"pi2": "arm64"}), ENGINES) is None
    assert check(BASE, hybrid, ENGINES) is None  # mqtt
    assert check(replace(BASE, engine="ddsperf", transport="udp"), hybrid, ENGINES) is None


def test_engines_lists_mqtt_with_what_it_supports():
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "k8sdds", "engines"], capture_output=True,
                         text=True, timeout=60, env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert ("mqtt: MQTT throughput, latency, latency under load through a broker (mosquitto); "
            "tcp; QoS 0") in " ".join(out.stdout.split())
    assert "ddsperf: DDS throughput" in out.stdout
