"""The answer of a report (each datapath's cost against host) and the payload sweep keeping
the host baseline: pure functions on synthetic tables."""

from __future__ import annotations

import pandas as pd

from k8sdds.analysis import answer, tables
from k8sdds.analysis.load import PARAMS

COMMON = {"engine": "ddsperf", "transport": "udp", "multicast": False, "num_subscribers": 1,
          "best_effort": False, "batch_size": 0, "latency_test": False,
          "placement": "cross-node", "secure": False, "streams": 1, "topology": "",
          "mqtt_qos": -1}


def _thr(rows):
    out = []
    for dp, size, mean, half, repeats in rows:
        path = "node-node" if dp == "host" else "pod-pod-cross-node"
        out.append({**COMMON, "datapath": dp, "path": path, "data_len": size, "mean": mean,
                    "ci_low": mean - half, "ci_high": mean + half, "repeats": repeats})
    return pd.DataFrame(out)[PARAMS + ["mean", "ci_low", "ci_high", "repeats"]]


def _lat(rows):
    out = []
    for dp, size, p50, p99 in rows:
        path = "node-node" if dp == "host" else "pod-pod-cross-node"
        out.append({**COMMON, "latency_test": True, "datapath": dp, "path": path,
                    "data_len": size, "p50": p50, "p99": p99, "p50_enough": True,
                    "p99_enough": True, "roundtrips": 5000, "repeats": 3})
    return pd.DataFrame(out)


def test_the_payload_sweep_keeps_the_host_baseline_on_its_own_path():
    t = _thr([("host", 1024, 80, 1, 5), ("flannel-vxlan", 1024, 47, 1, 5),
              ("flannel-hostgw", 1024, 61, 1, 5)])
    t = pd.concat([t, t.iloc[[1]].assign(path="pod-service")])
    kept = tables.base(t)
    assert set(kept.datapath) == {"host", "flannel-vxlan", "flannel-hostgw"}
    assert set(kept[kept.datapath != "host"].path) == {"pod-pod-cross-node"}


def test_costs_and_sentences_say_the_answer_with_noise_marked():
    thr = _thr([("host", 1024, 80, 1, 5), ("flannel-vxlan", 1024, 47.2, 1, 5),
                ("host", 16384, 93, 2, 5), ("flannel-vxlan", 16384, 92, 2, 5)])
    lat = _lat([("host", 64, 100.0, 150.0), ("flannel-vxlan", 64, 104.0, 151.0)])
    found = answer.costs(thr, lat)
    by = {(c.metric, c.data_len): c for c in found}
    assert round(by[("throughput", 1024)].change_pct) == -41
    assert not by[("throughput", 1024)].noise  # intervals far apart
    assert by[("throughput", 16384)].noise  # 92 ± 2 overlaps 93 ± 2
    assert not by[("p50", 64)].noise and by[("p99", 64)].noise  # +4 % vs +0.7 %
    [line] = answer.sentences(found)
    assert line == ("flannel-vxlan: throughput -41 % at 1 KiB (worse), within noise at 16 KiB; "
                    "p50 round trip +4 % at 64 B (worse); p99 round trip within noise; "
                    "5 repeats, 95 % intervals")
    assert by[("throughput", 1024)].confidence == "±2 %, 5 repeats"
    assert list(answer.table(found)["within noise"]) == ["no", "yes", "no", "yes"]


def test_the_subscribers_cpu_joins_the_answer():
    thr = _thr([("host", 1024, 80, 1, 5), ("weave", 1024, 40, 1, 5)])
    cpu = _thr([("host", 1024, 50, 2, 5), ("weave", 1024, 65, 2, 5)])
    [line] = answer.sentences(answer.costs(thr, pd.DataFrame(), cpu))
    assert line == ("weave: throughput -50 % at 1 KiB (worse); subscriber CPU +30 % at 1 KiB "
                    "(worse); 5 repeats, 95 % intervals")


def test_no_host_no_answer():
    thr = _thr([("flannel-vxlan", 1024, 47, 1, 5)])
    assert answer.costs(thr, pd.DataFrame()) == []
    assert answer.sentences([]) == []


def test_one_repeat_is_not_called_noise():
    thr = _thr([("host", 1024, 80, float("nan"), 1), ("weave", 1024, 40, float("nan"), 1)])
    [c] = answer.costs(thr, pd.DataFrame())
    assert c.noise is None and c.confidence == "1 repeat, no interval"
    assert answer.sentences([c]) == ["weave: throughput -50 % at 1 KiB (worse); one repeat, "
                                     "no interval"]


def test_a_sweep_says_its_largest_and_smallest_change_and_better_in_words():
    thr = _thr([("host", 64, 6, 0.1, 3), ("kube-router", 64, 3, 0.1, 3),
                ("host", 1024, 80, 1, 3), ("kube-router", 1024, 60, 1, 3),
                ("host", 16384, 90, 1, 3), ("kube-router", 16384, 86, 1, 3)])
    lat = _lat([("host", 64, 100.0, 200.0), ("kube-router", 64, 80.0, 150.0),
                ("host", 1024, 120.0, 220.0), ("kube-router", 1024, 108.0, 210.0)])
    [line] = answer.sentences(answer.costs(thr, lat))
    assert line == ("kube-router: throughput -50 % at 64 B (worse), -4 % at 16 KiB; "
                    "p50 round trip -20 % at 64 B (better), -10 % at 1 KiB; "
                    "p99 round trip -25 % at 64 B (better), -5 % at 1 KiB; "
                    "3 repeats, 95 % intervals")

