"""The answer of a report (each datapath's cost against host) and the payload sweep keeping
the host baseline: pure functions on synthetic tables."""

from __future__ import annotations

import pandas as pd
import pytest

from k8sdds.analysis import answer, load, tables
from k8sdds.analysis.load import PARAMS, Runs
from k8sdds.reparse import reparse

from .conftest import fake_run

COMMON = {"engine": "ddsperf", "transport": "udp", "multicast": False, "num_subscribers": 1,
          "best_effort": False, "batch_size": 0, "latency_test": False,
          "placement": "cross-node", "secure": False, "streams": 1, "topology": "",
          "mqtt_qos": -1, "load": "", "load_len": 0}


def _thr(rows):
    out = []
    for dp, size, mean, half, repeats in rows:
        path = "node-node" if dp == "host" else "pod-pod-cross-node"
        out.append({**COMMON, "datapath": dp, "path": path, "data_len": size, "mean": mean,
                    "ci_low": mean - half, "ci_high": mean + half, "repeats": repeats})
    return pd.DataFrame(out)[PARAMS + ["mean", "ci_low", "ci_high", "repeats"]]


def _lat(rows, half: float = 1.0, repeats: int = 3):
    """Each repeat's percentile over `repeats` repeats: mean ± `half` (NaN: one repeat)."""
    out = []
    for dp, size, p50, p99 in rows:
        path = "node-node" if dp == "host" else "pod-pod-cross-node"
        row = {**COMMON, "latency_test": True, "datapath": dp, "path": path,
               "data_len": size, "roundtrips": 5000 * repeats, "roundtrips_fewest": 5000,
               "repeats": repeats}
        for name, value in (("p50", p50), ("p99", p99)):
            row |= {name: value, f"{name}_enough": True, f"{name}_enough_each": True,
                    f"{name}_mean": value, f"{name}_ci_low": value - half,
                    f"{name}_ci_high": value + half}
        out.append(row)
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
    # 104 ± 1 against 100 ± 1 apart; 151 ± 1 against 150 ± 1 overlap
    assert not by[("p50", 64)].noise and by[("p99", 64)].noise
    [line] = answer.sentences(found)
    assert line == ("flannel-vxlan: throughput -41 % at 1 KiB (worse), within noise at 16 KiB; "
                    "p50 round trip +4 % at 64 B (worse); p99 round trip within noise; "
                    "3 repeats in rounds, 95 % intervals")
    assert by[("p50", 64)].confidence == "±1 %, 3 repeats; ≥ 5000 round trips a repeat"
    assert by[("throughput", 1024)].confidence == "±2 %, 5 repeats"
    assert list(answer.table(found)["verdict"]) == ["worse", "within noise", "worse",
                                                    "within noise"]


def test_the_subscribers_cpu_per_gigabit_joins_the_answer():
    thr = _thr([("host", 1024, 80, 1, 5), ("weave", 1024, 40, 1, 5)])
    cpu = _thr([("host", 1024, 6.25, 0.2, 5), ("weave", 1024, 8.1, 0.2, 5)])
    [line] = answer.sentences(answer.costs(thr, pd.DataFrame(), cpu))
    assert line == ("weave: throughput -50 % at 1 KiB (worse); subscriber CPU per gigabit "
                    "+30 % at 1 KiB (worse); 5 repeats in rounds, 95 % intervals")
    assert set(answer.table(answer.costs(thr, pd.DataFrame(), cpu)).unit) == {
        "Mb/s", "core-seconds per gigabit"}


def test_the_publishers_cpu_per_message_joins_the_answer_and_more_is_worse():
    thr = _thr([("host", 1024, 80, 1, 5), ("weave", 1024, 40, 1, 5)])
    per_message = _thr([("host", 1024, 109, 2, 5), ("weave", 1024, 199, 4, 5)])
    found = answer.costs(thr, pd.DataFrame(), cpu_message=per_message)
    [line] = answer.sentences(found)
    assert line == ("weave: throughput -50 % at 1 KiB (worse); publisher CPU per message "
                    "+83 % at 1 KiB (worse); 5 repeats in rounds, 95 % intervals")
    assert set(answer.table(found).unit) == {"Mb/s", "µs"}


def _results(rows) -> pd.DataFrame:
    """A results table: (datapath, repeat, metric, value) of one subscriber at 16 KiB."""
    out = []
    for dp, repeat, metric, value in rows:
        path = "node-node" if dp == "host" else "pod-pod-cross-node"
        out.append({**COMMON, "datapath": dp, "path": path, "data_len": 16384,
                    "run_id": "r", "test": 1 if dp == "host" else 2, "repeat": repeat,
                    "role": "sub0", "kind": "summary", "metric": metric, "value": value})
    return pd.DataFrame(out)


def test_less_cpu_for_much_less_work_reads_worse_per_gigabit():
    """flannel-vxlan's subscriber spends 43 % less CPU a second while receiving 53 % less
    data: per gigabit it spends more, and the answer says worse."""
    rows = []
    for rep, jitter in ((1, 0.98), (2, 1.0), (3, 1.02)):
        rows += [("host", rep, "throughput_mbps", 900 * jitter), ("host", rep, "cpu_pct", 70),
                 ("flannel-vxlan", rep, "throughput_mbps", 423 * jitter),
                 ("flannel-vxlan", rep, "cpu_pct", 40)]
    runs = Runs(_results(rows), {})
    thr = tables.throughput(runs)
    cpu = tables.cpu_per_gigabit(runs)
    by_dp = cpu.set_index("datapath")
    # 70 % of a core at 0.9 Gb/s: 0.778 core-seconds per gigabit, about; 40 % at 0.423: 0.946
    assert by_dp.loc["host", "mean"] == pytest.approx(0.7 / 0.9, rel=0.01)
    assert by_dp.loc["flannel-vxlan", "mean"] == pytest.approx(0.4 / 0.423, rel=0.01)
    found = {c.metric: c for c in answer.costs(thr, pd.DataFrame(), cpu)}
    assert found["cpu"].change_pct > 0 and found["cpu"].noise is False
    [line] = answer.sentences(list(found.values()))
    assert "subscriber CPU per gigabit +2" in line and "(worse)" in line.split(";")[1]


def test_no_host_no_answer():
    thr = _thr([("flannel-vxlan", 1024, 47, 1, 5)])
    assert answer.costs(thr, pd.DataFrame()) == []
    assert answer.sentences([]) == []


def test_one_repeat_gives_the_change_and_no_verdict():
    """-50 % from one repeat a side: the figure is said, never 'worse' nor 'better'."""
    thr = _thr([("host", 1024, 80, float("nan"), 1), ("weave", 1024, 40, float("nan"), 1),
                ("host", 16384, 90, float("nan"), 1), ("weave", 16384, 95, float("nan"), 1)])
    found = answer.costs(thr, pd.DataFrame())
    assert [c.noise for c in found] == [None, None]
    assert found[0].confidence == "1 repeat, no interval"
    assert answer.sentences(found) == ["weave: throughput -50 % at 1 KiB, +6 % at 16 KiB; "
                                       "one repeat: no verdict"]
    assert list(answer.table(found)["verdict"]) == ["no verdict", "no verdict"]


def test_one_repeat_gives_latency_no_interval():
    lat = _lat([("host", 256, 40.0, 60.0), ("flannel-hostgw", 256, 35.6, 54.6)],
               half=float("nan"), repeats=1)
    found = answer.costs(pd.DataFrame(), lat)
    assert [c.noise for c in found] == [None, None]
    assert found[0].confidence.startswith("1 repeat, no interval")
    [line] = answer.sentences(found)
    assert line == ("flannel-hostgw: p50 round trip -11 % at 256 B; p99 round trip -9 % at "
                    "256 B; one repeat: no verdict")


def test_latency_intervals_that_overlap_are_within_noise():
    """-11 % at p50 sounds like a gain, but each side's repeats spread ±6 µs: not shown."""
    lat = _lat([("host", 256, 40.0, 60.0), ("flannel-hostgw", 256, 35.6, 54.6)], half=6.0,
               repeats=2)
    found = answer.costs(pd.DataFrame(), lat)
    assert [c.noise for c in found] == [True, True]
    [line] = answer.sentences(found)
    assert line == ("flannel-hostgw: p50 round trip within noise; p99 round trip within "
                    "noise; 2 repeats in rounds, 95 % intervals")


def test_a_latency_from_too_few_round_trips_a_repeat_is_not_claimed():
    lat = _lat([("host", 256, 40.0, 60.0), ("weave", 256, 80.0, 120.0)])
    lat.loc[lat.datapath == "weave", "p99_enough_each"] = False
    by = {c.metric: c for c in answer.costs(pd.DataFrame(), lat)}
    assert by["p50"].noise is False and by["p99"].noise is True


def test_latency_percentiles_per_repeat_from_real_ddsperf_output(tmp_path):
    """Two repeats of one real ddsperf log: each repeat's p50 is the pooled p50, so the
    interval has no width, and the mean is that p50."""
    run = fake_run(tmp_path, repeats=2)
    reparse(run.path)
    lat = tables.latency(load.load([run.path]))
    [row] = lat.to_dict("records")
    assert row["repeats"] == 2 and row["roundtrips"] == 2 * row["roundtrips_fewest"]
    assert row["p50_mean"] == pytest.approx(row["p50"])
    assert row["p50_ci_low"] == pytest.approx(row["p50_ci_high"])


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
                    "3 repeats in rounds, 95 % intervals")



def _tls(rows):
    return _thr(rows).assign(transport="tls")


def test_an_rpi3b_tls_16k_cell_carries_its_known_error():
    """The last fidelity sitting read TLS through flannel-hostgw at 16 KiB as 0.78 of UDP
    host on the emulated rpi3b; the published Pis read 0.59 (docs/explanation/fidelity.md)."""
    thr = _tls([("host", 16384, 95, 1, 3), ("flannel-hostgw", 16384, 93, 1, 3)])
    [c] = answer.costs(thr, pd.DataFrame(), profile="rpi3b")
    assert c.known == ("TLS 16 KiB: emulated 0.78 of UDP host, the published Pi 0.59 "
                       "(measured 2026-11-28 at 0.0959 CPU): trust the order, not the size")
    [line] = answer.sentences([c])
    assert line.endswith("; the emulator here: " + c.known)
    assert answer.table([c])["the emulator's known error"].tolist() == [c.known]


def test_a_cell_that_follows_the_pi_says_so_and_one_without_a_cell_says_it_is_not_known():
    # weave at 1 KiB: 0.53 emulated, 0.54 published (docs/explanation/fidelity.md)
    thr = _thr([("host", 1024, 80, 1, 3), ("weave", 1024, 43, 1, 3)])
    [c] = answer.costs(thr, pd.DataFrame(), profile="rpi3b")
    assert c.known == ("UDP 1 KiB: emulated 0.53 of UDP host, the published Pi 0.54 "
                       "(measured 2026-11-28 at 0.0959 CPU)")
    # a run at a budget more than 20 % from the cell's sitting is told the cell may not hold
    [c] = answer.costs(thr, pd.DataFrame(), profile="rpi3b", cpus=[0.0735])
    assert c.known.endswith("; this run's budget 0.0735 CPU is 23 % below that sitting's: "
                            "the cell may not hold")
    [c] = answer.costs(thr, pd.DataFrame(), profile="rpi3b", cpus=[0.11])
    assert "may not hold" not in c.known  # 15 % above
    enc = _tls([("host", 1024, 80, 1, 3), ("weave-encrypted", 1024, 20, 1, 3)])
    [c] = answer.costs(enc, pd.DataFrame(), profile="rpi3b")
    assert c.known == "TLS 1 KiB: no published Pi cell, the emulator's error here is not known"
    [c] = answer.costs(thr, pd.DataFrame(), profile="rpi4")
    assert c.known == "UDP 1 KiB: rpi4 has no cell measured against a published board"
    [c] = answer.costs(thr, pd.DataFrame())  # not a calibrated profile: nothing said
    assert c.known == "" and "emulator" not in answer.sentences([c])[0]


def test_the_cell_a_calibration_was_fitted_on_is_said_to_be_no_evidence():
    """rpi3b-armhf's calibration is fitted on flannel-vxlan at 1 KiB (calibration.BOARDS):
    its match there is by construction, and the answer says so instead of a verdict."""
    thr = _thr([("host", 1024, 80, 1, 3), ("flannel-vxlan", 1024, 62, 1, 3)])
    [c] = answer.costs(thr, pd.DataFrame(), profile="rpi3b-armhf")
    assert c.known.endswith(": the calibration was fitted on this cell, so its match is by "
                            "construction, no evidence of fidelity"), c.known


def test_the_calibrated_profile_is_read_from_the_manifests():
    def manifest(profile, board):
        return {"cluster": {"nodes": [{"name": "node1", "profile": profile}],
                            "profiles": {profile: {"name": profile, "board": board}}}}
    assert answer.calibrated_profile({"a": manifest("rpi3b", "rpi3b")}) == "rpi3b"
    assert answer.calibrated_profile({"a": manifest("cloud", None)}) is None
    assert answer.calibrated_profile({"a": manifest("rpi3b", "rpi3b"),
                                      "b": manifest("rpi4", "rpi3b")}) is None  # two
    assert answer.calibrated_profile({"a": {}}) is None  # another backend's manifest


def test_the_known_errors_published_ratios_are_the_trees():
    """Every published ratio of the known error is the one the package's tree file holds
    (computed from the K8sDDS tree; host UDP is 1 by definition), and every cell names the
    sitting it was measured in."""
    from k8sdds.analysis import known_error, published

    tree = pd.read_csv(published.DATA)
    cells = known_error.cells()
    for r in tree.itertuples():
        for profile in ("rpi3b", "rpi3b-armhf"):
            cell = cells.get((profile, r.transport, r.datapath, r.data_len))
            if cell is not None:
                assert cell.published == pytest.approx(r.ratio, abs=1e-4), cell
    native = [c for c in cells.values() if c.profile == "rpi3b"]
    own = [c for c in cells.values() if c.profile == "rpi3b-armhf"]
    assert len(native) == 66 and all(0 < c.emulated <= 1.01 for c in native)
    # the Pi's own program: the 25 UDP cells and host's 5; its host path is unsteady, so a
    # round whose host read low reads its pods a little above it (docs: fidelity)
    assert len(own) == 30 and all(0 < c.emulated <= 1.1 for c in own)
    assert len(cells) == len(native) + len(own)
    import datetime

    for c in cells.values():  # each with its sitting: a budget of this machine, a date
        assert 0 < c.cpu <= 2 and datetime.date.fromisoformat(c.measured), c


def test_the_first_line_says_which_changes_have_no_verdict_and_how_to_get_one():
    assert answer.first_line(4, 0) == (
        "one repeat: no change below is called better or worse (no interval); run with "
        "--repeats 3 (or more) for an interval and a verdict")
    assert answer.first_line(1, 3).startswith("some tests have one repeat: their changes "
                                              "below are not called better or worse")


def test_the_answer_names_what_rti_perftest_ran_on():
    """Perftest's banner (the manifest's tools) names its middleware: the answer says it
    where rtiperftest measured, and says it is not RTI Connext where it is Cyclone DDS."""
    from k8sdds.analysis.answer import middleware_notes

    cyclone = {"tools": {"rtiperftest": "RTI Perftest 4.3.0 (Eclipse Cyclone DDS 0.10.2)",
                         "ddsperf": "0.10.2-2"},
               "tests": [{"engine": "rtiperftest"}, {"engine": "ddsperf"}]}
    rti = {"tools": {"rtiperftest": "RTI Perftest 3.0.1 (RTI Connext DDS 6.0.0)"},
           "tests": [{"engine": "rtiperftest"}]}
    unused = {"tools": {"rtiperftest": "RTI Perftest 4.3.0 (Eclipse Cyclone DDS 0.10.2)"},
              "tests": [{"engine": "ddsperf"}]}
    assert middleware_notes({"a": cyclone, "b": cyclone}) == [
        "rtiperftest: RTI Perftest 4.3.0 (Eclipse Cyclone DDS 0.10.2): RTI Perftest's program "
        "on Eclipse Cyclone DDS, not on RTI Connext"]
    assert middleware_notes({"a": rti}) == ["rtiperftest: RTI Perftest 3.0.1 (RTI Connext "
                                            "DDS 6.0.0)"]
    assert middleware_notes({"a": unused}) == []
