"""MQTT on the real emulated cluster: mosquitto on a node of its own, k8sdds-mqtt publishers,
subscribers, ping and pong in pods, results like any engine's."""

from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from k8sdds.perftest.mqtt import Mqtt

from .emulated_support import cli, namespaces, requires_namespaces

pytestmark = [pytest.mark.emulated, requires_namespaces()]

HEADER = "engine,transport,dataLen,multicast,numSubscribers,bestEffort,batchSize,latencyTest\n"


@pytest.fixture
def env(tmp_path, monkeypatch):
    state = tmp_path / "state"
    monkeypatch.setenv("K8SDDS_STATE_DIR", str(state))
    return {**os.environ, "K8SDDS_STATE_DIR": str(state), "COLUMNS": "200"}


def test_mqtt_throughput_and_latency_through_a_broker_on_its_own_node(tmp_path, env):
    reason = Mqtt().unavailable()
    assert reason is None, reason  # make test installs mosquitto and builds k8sdds-mqtt
    sch = tmp_path / "mqtt.csv"
    sch.write_text(HEADER + "mqtt,tcp,1024,false,2,false,0,false\n"
                            "mqtt,tcp,64,false,1,true,0,true\n")
    name = "kdm" + str(os.getpid() % 1000)
    proc = cli("run", "--sch", str(sch), "--datapath", "flannel-hostgw", "--duration", "3",
               "--nodes", "4", "--out", str(tmp_path / "logs"), "--testbed", name, "--json",
               "--no-plot", env=env)
    assert proc.returncode == 0, proc.stderr
    outcome = json.loads(proc.stdout)
    assert outcome["failed"] == [], outcome
    run = outcome["run_dir"]
    manifest = json.loads(open(f"{run}/manifest.json").read())
    # three workers: the publisher and each subscriber on one, the broker on the control plane
    assert manifest["repeats"]["test-1/rep-1"]["placement"] == {
        "pub": "node1", "broker": "node0", "sub0": "node2", "sub1": "node3"}
    assert "mosquitto" in manifest["tools"]["mqtt"]
    df = pd.read_csv(f"{run}/results.csv")
    s = df[(df.kind == "summary") & (df.test == 1)].set_index(["role", "metric"]).value
    for sub in ("sub0", "sub1"):  # QoS 1: every message to every subscriber
        assert s[(sub, "throughput_mbps")] > 1.0 and s[(sub, "lost")] == 0
    assert s[("sub0", "received")] == s[("sub1", "received")]
    lat = df[(df.kind == "summary") & (df.test == 2) & (df.role == "pub")] \
        .set_index("metric").value
    assert lat["roundtrips"] > 100
    assert 0 < lat["latency_us_min"] <= lat["latency_us_p50"] <= lat["latency_us_p99"]
    assert set(df.engine) == {"mqtt"} and set(df.transport) == {"tcp"}
    assert namespaces(name) == []
