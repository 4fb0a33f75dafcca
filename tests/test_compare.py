"""compare (the CI gate), results export and the report tables, on runs built from real
ddsperf output (no root needed)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from k8sdds.analysis import compare, load, tables
from k8sdds.reparse import reparse

from .cli_support import Done, invoke
from .conftest import fake_run, run_with_throughput


def _cli(*args: str) -> Done:
    return invoke(*args, env={"COLUMNS": "200"})


@pytest.fixture
def runs(tmp_path):
    """A baseline and a contender whose throughput is 20 % lower."""
    a = fake_run(tmp_path / "a", "20260101-000000-aaaa", repeats=2)
    b = fake_run(tmp_path / "b", "20260101-000000-bbbb", repeats=2)
    for run in (a, b):
        reparse(run.path)
    df = pd.read_csv(b.results_path)
    hit = df.metric.isin(["throughput_mbps", "samples_per_s"]) & df.role.str.startswith("sub")
    df.loc[hit, "value"] *= 0.8
    df.to_csv(b.results_path, index=False)
    return a.path, b.path


def test_compare_reports_ratio_per_test_and_metric(runs):
    a, b = runs
    rows = compare.compare(a, b, ["throughput_mbps", "latency_us_p50"])
    by_metric = {r["metric"]: r for r in rows}
    thr = by_metric["throughput_mbps"]
    assert thr["ratio"] == pytest.approx(0.8) and thr["change_pct"] == pytest.approx(-20)
    assert "1024 B" in thr["test"]
    lat = by_metric["latency_us_p50"]
    assert lat["ratio"] == pytest.approx(1.0) and lat["significant"] is False


def test_fail_if_gates_with_exit_status(runs):
    a, b = runs
    worse = _cli("compare", str(a), str(b), "--fail-if", "throughput_mbps:-5%")
    assert worse.returncode == 1
    assert "throughput_mbps changed -20.0 % (bound -5 %)" in worse.stderr
    within = _cli("compare", str(a), str(b), "--fail-if", "throughput_mbps:-25%",
                  "--fail-if", "latency_us_p99:+10%")
    assert within.returncode == 0, within.stderr
    same = _cli("compare", str(a), str(a), "--fail-if", "throughput_mbps:-1%", "--json")
    assert same.returncode == 0 and json.loads(same.stdout)["crossed"] == []


def test_one_repeat_a_side_gives_no_verdict_and_fail_if_cannot_judge(tmp_path):
    """-20 % from one repeat a side: the change is shown, with no verdict, and a CI gate on
    it exits 3 (neither 0, a pass, nor 1, a regression)."""
    a = run_with_throughput(tmp_path, "a", [100.0])
    b = run_with_throughput(tmp_path, "b", [80.0])
    [row] = compare.compare(a, b, ["throughput_mbps"])
    assert row["change_pct"] == pytest.approx(-20) and row["significant"] is None
    assert row["verdict"] == "no verdict (one repeat)" and row["p_value"] is None
    assert (row["n_baseline"], row["n_contender"]) == (1, 1)
    shown = _cli("compare", str(a), str(b), "--metric", "throughput_mbps")
    assert shown.returncode == 0 and "no verdict (one repeat)" in shown.stdout
    assert "worse" not in shown.stdout and "better" not in shown.stdout
    for bound in ("throughput_mbps:-5%", "throughput_mbps:-50%"):
        gated = _cli("compare", str(a), str(b), "--fail-if", bound)
        assert gated.returncode == 3, gated.stderr
        assert "cannot judge" in gated.stderr and "Traceback" not in gated.stderr


def test_fail_if_fails_on_a_significant_change_beyond_the_bound_not_on_noise(tmp_path):
    """Baseline 100, 101, 99 Mb/s. A contender of 80, 120, 85 (mean -5 %, spread wide) is
    beyond a -3 % bound within noise: said, exit 0. One of 90, 91, 89 (-10 %, tight) is a
    significant drop: exit 1, and the table says worse with each side's interval and n."""
    a = run_with_throughput(tmp_path, "a", [100.0, 101.0, 99.0])
    noisy = run_with_throughput(tmp_path, "n", [80.0, 120.0, 85.0])
    worse = run_with_throughput(tmp_path, "w", [90.0, 91.0, 89.0])
    passed = _cli("compare", str(a), str(noisy), "--fail-if", "throughput_mbps:-3%")
    assert passed.returncode == 0, passed.stderr
    assert "beyond the bound but not failed" in passed.stderr and "within noise" in passed.stderr
    assert "no significant change" in passed.stdout
    failed = _cli("compare", str(a), str(worse), "--fail-if", "throughput_mbps:-3%")
    assert failed.returncode == 1
    assert "throughput_mbps changed -10.0 % (bound -3 %), significant" in failed.stderr
    [row] = [r for r in compare.compare(a, worse, ["throughput_mbps"])]
    assert row["verdict"] == "worse" and (row["n_baseline"], row["n_contender"]) == (3, 3)
    # 100 ± t(0.975, 2) * 1 / sqrt(3) = ± 2.48, in % of 100
    assert row["baseline_pm_pct"] == pytest.approx(2.484, abs=0.01)
    assert "100 ± 2.5 %" in failed.stdout and "3+3" in failed.stdout


@pytest.mark.parametrize("bound", ["throughput_mbps-5%", "throughput_mbps:5", "x:+5%"])
def test_bad_bounds_are_clear_errors(runs, bound):
    a, b = runs
    proc = _cli("compare", str(a), str(b), "--fail-if", bound)
    assert proc.returncode == 2 and "--fail-if" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_results_export_formats(runs, tmp_path):
    a, _ = runs
    n = len(pd.read_csv(a / "results.csv"))
    csv = _cli("results", str(a))
    assert csv.returncode == 0 and len(csv.stdout.strip().splitlines()) == n + 1
    js = _cli("results", str(a), "--format", "json")
    assert len(json.loads(js.stdout)) == n
    out = tmp_path / "r.parquet"
    pq = _cli("results", str(a), "--format", "parquet", "--out", str(out))
    assert pq.returncode == 0 and len(pd.read_parquet(out)) == n
    assert _cli("results", str(a), "--format", "parquet").returncode == 2


def test_tables_throughput_ci_and_pooled_latency(runs):
    a, _ = runs
    r = load.load([a])
    thr = tables.throughput(r)
    [row] = thr.to_dict("records")
    assert row["repeats"] == 2 and row["datapath"] == "flannel-hostgw"
    assert row["ci_low"] == row["ci_high"] == row["mean"]  # identical repeats: no spread
    lat = tables.latency(r)
    [lrow] = lat.to_dict("records")
    assert lrow["p50"] <= lrow["p90"] <= lrow["p99"]
    assert lrow["roundtrips"] == 2 * r.summaries.query(
        "metric == 'roundtrips' and repeat == 1").value.sum()


def test_warnings_for_single_repeats_and_thin_percentiles(tmp_path):
    run = fake_run(tmp_path, repeats=1)
    reparse(run.path)
    r = load.load([run.path])
    found = tables.warnings(tables.throughput(r), tables.latency(r))
    assert any("single repeat" in w for w in found)
    # ~20,000 round trips: enough for p50, p90 and p99 (which needs 1,000)
    assert not any("too few round trips" in w for w in found)
    thin = tables.latency(r).assign(roundtrips=50, p90_enough=False, p99_enough=False)
    found = tables.warnings(tables.throughput(r), thin)
    assert any("too few round trips for p99" in w for w in found)


def _thr(rows):
    base = {"engine": "ddsperf", "multicast": False, "num_subscribers": 1,
            "best_effort": False, "batch_size": 0, "latency_test": False,
            "placement": "cross-node", "repeats": 3}
    return pd.DataFrame([{**base, **dict(zip(["datapath", "transport", "secure", "data_len",
                                              "mean"], r, strict=True))} for r in rows])


def test_security_table_prices_each_protection_against_plain_udp():
    thr = _thr([("flannel-hostgw", "udp", False, 1024, 1000.0),
                ("flannel-hostgw", "tls", False, 1024, 800.0),
                ("flannel-hostgw", "udp", True, 1024, 400.0),
                ("weave", "udp", False, 1024, 500.0),
                ("weave-encrypted", "udp", False, 1024, 250.0)])
    sec = tables.security(thr, pd.DataFrame()).set_index(["datapath", "protection"])
    assert sec.loc[("flannel-hostgw", "TLS"), "vs_plain_pct"] == pytest.approx(-20)
    assert sec.loc[("flannel-hostgw", "UDP + DDS Security"), "vs_plain_pct"] == \
        pytest.approx(-60)
    # an encrypted datapath is priced against its unencrypted counterpart
    enc = sec.loc[("weave-encrypted", "UDP + encrypted datapath (WireGuard "
                                      "(ChaCha20-Poly1305))")]
    assert enc["vs_plain_pct"] == pytest.approx(-50) and enc["reference"] == "weave / UDP"
    assert pd.isna(sec.loc[("flannel-hostgw", "UDP"), "vs_plain_pct"])  # the reference itself


def test_security_table_is_empty_without_any_protection():
    thr = _thr([("flannel-hostgw", "udp", False, 1024, 1000.0),
                ("host", "udp", False, 1024, 1200.0)])
    assert tables.security(thr, pd.DataFrame()).empty


def test_a_run_whose_repeats_all_failed_still_plots_and_reports(tmp_path):
    # every repeat failed: results.csv holds only the datapath's own cost rows
    run = fake_run(tmp_path, repeats=1)
    reparse(run.path)
    df = pd.read_csv(run.results_path)
    only = df.iloc[:2].assign(role="datapath", kind="summary", metric=["datapath_cpu_pct",
                                                                      "softirq_pct"])
    only.to_csv(run.results_path, index=False)
    plot = _cli("plot", str(run.path))
    assert plot.returncode != 0 and "no throughput figures" in plot.stderr
    assert "Traceback" not in plot.stderr
    report = _cli("report", str(run.path), "--out", str(tmp_path / "r"))
    assert report.returncode == 0, report.stderr


def _node(kernel: str, cni_version: str) -> dict:
    return {"kernel": kernel, "cpu_model": "Cortex-A53", "cpu_count": 4,
            "cni": {"name": "flannel", "version": cni_version, "mode": "vxlan"}}


def test_compare_judges_the_measured_nodes_and_shows_the_controller_as_context(runs):
    """Two runs from one controller whose Pi nodes differ in kernel and flannel's version
    are refused, naming the nodes; two runs of the same nodes from controllers on
    different kernels are compared, the controller's difference said as context."""
    a, b = runs
    from k8sdds.results import RunDir

    def write(run, controller: str, kernels: tuple[str, str], cni: str) -> None:
        manifest = RunDir(run).read_manifest()
        manifest.environment = {"kernel": controller, "cpu_model": "AMD EPYC", "cpu_count": 2}
        manifest.fingerprints = {"flannel-vxlan": {"pi3-a": _node(kernels[0], cni),
                                                   "pi3-b": _node(kernels[1], cni)}}
        RunDir(run).write_manifest(manifest)

    write(a, "6.1.0", ("6.1.21-v8+", "6.1.21-v8+"), "v0.28.9")
    write(b, "6.1.0", ("6.6.31-v8+", "6.6.31-v8+"), "v0.26.0")
    done = _cli("compare", str(a), str(b))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    said = " ".join(done.stderr.split())
    assert "kernel: 6.1.21-v8+ against 6.6.31-v8+ (pi3-a, pi3-b)" in said
    assert "CNI on flannel-vxlan: flannel v0.28.9 against flannel v0.26.0 (pi3-a, pi3-b)" \
        in said
    write(a, "6.1.0", ("6.1.21-v8+", "6.1.21-v8+"), "v0.28.9")
    write(b, "6.12.0", ("6.1.21-v8+", "6.1.21-v8+"), "v0.28.9")
    done = _cli("compare", str(a), str(b))
    assert done.returncode == 0, done.stderr
    said = " ".join(done.stderr.split())
    assert "the computer k8sdds ran on differs (context: the nodes are alike): kernel: " \
        "6.1.0 against 6.12.0" in said
    assert "warning" not in said


def test_compare_refuses_runs_not_made_alike_unless_forced(runs):
    a, b = runs
    from k8sdds.results import RunDir

    for run, kernel, ddsperf in ((a, "6.1.0", "0.10.2"), (b, "6.12.0", "0.11.0")):
        manifest = RunDir(run).read_manifest()
        manifest.environment = {"kernel": kernel, "cpu_model": "AMD EPYC", "cpu_count": 2}
        manifest.tools = {"ddsperf": ddsperf}
        RunDir(run).write_manifest(manifest)
    done = _cli("compare", str(a), str(b))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "the controller's kernel: 6.1.0 against 6.12.0" in done.stderr
    assert "engine versions: ddsperf 0.10.2 against ddsperf 0.11.0" in done.stderr
    forced = _cli("compare", str(a), str(b), "--force")
    assert forced.returncode == 0, forced.stderr
    assert "warning: the runs differ in the controller's kernel" in forced.stderr
    assert "comparing the same tests" in forced.stderr
