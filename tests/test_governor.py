"""The CPU governor: its arithmetic, and on the real emulated cluster: it runs while a
testbed is up, sets the budgeted nodes' quotas from its probes, gives them back when it
stops, records its scale per repeat, and leaves nothing behind."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from k8sdds.records import datapath_usage
from k8sdds.testbed import governor

from .emulated_support import cli, namespaces, requires_namespaces

# ---- arithmetic ------------------------------------------------------------------------


def test_step_starts_at_the_first_rate_and_scales_by_reference_over_average():
    average, scale = governor.step(None, 80.0, 100.0)
    assert average == 80.0 and scale == pytest.approx(1.25)
    average, scale = governor.step(average, 100.0, 100.0)  # moves SMOOTHING of the way
    assert average == pytest.approx(80 + governor.SMOOTHING * 20)
    assert scale == pytest.approx(100 / average)


def test_step_keeps_the_scale_between_its_bounds():
    assert governor.step(None, 10.0, 100.0)[1] == governor.HIGH
    assert governor.step(None, 1000.0, 100.0)[1] == governor.LOW
    assert governor.step(None, 0.0, 100.0)[1] == governor.HIGH  # a probe that did nothing


def test_governed_seconds_holds_each_readings_scale_until_the_next_per_probe():
    lines = ["1.0 0 70 70 1.200", "1.5 1 80 80 0.800", "not a reading", "2.0 0 70 70 1.000"]
    # CPU 0: 1.2 for 1 s, then 1.0 up to now (3.0); CPU 1: 0.8 from 1.5 to 3.0
    assert governor.governed_seconds(lines, now=3.0) == pytest.approx(
        (1.2 * 1 + 1.0 * 1 + 0.8 * 1.5) / 2)
    assert governor.governed_seconds([], now=3.0) == 0


def test_a_repeats_usage_gives_the_governors_mean_scale():
    parsed = datapath_usage(json.dumps({"wall_s": 10.0, "governed_s": 12.5, "softirq_s": 1}))
    values = {v.metric: (v.value, v.unit) for v in parsed.values}
    assert values["governor_scale"] == (1.25, "x")


def test_config_survives_its_file():
    config = governor.Config((governor.Probe("/g/_probe1", 1, "rpi3b", 0.08, 75.0),),
                             (governor.Governed("node1", "/g/node1", 1, 0.08, "rpi3b"),),
                             "/tmp/log")
    assert governor.Config.from_json(config.to_json()) == config


# ---- on the real emulated cluster --------------------------------------------------------

def _calibration(tmp_path: Path, probe_rate: float | None) -> Path:
    from k8sdds.testbed import calibration

    path = tmp_path / "cal.json"
    calibration.save(calibration.Calibration(
        board="rpi3b", cpu=0.08, target_ratio=0.87, ratio=0.87, link_mbps=95.0,
        machine={"cpu": "Test CPU", "cpus": 2}, probe_rate=probe_rate), path)
    return path


def _budget(group: str) -> float:
    """A v1 or v2 cgroup's budget in CPUs."""
    path = Path(group)
    if (path / "cpu.max").exists():
        quota, period = (path / "cpu.max").read_text().split()
    else:
        quota = (path / "cpu.cfs_quota_us").read_text()
        period = (path / "cpu.cfs_period_us").read_text()
    return int(quota) / int(period)


def _wait_for(what, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


@requires_namespaces()
@pytest.mark.emulated
def test_governor_sets_the_budgets_gives_them_back_and_goes_with_the_testbed(
        tmp_path, monkeypatch):
    from k8sdds.testbed.spec import default_nodes
    from k8sdds.testbed.testbed import Testbed

    # a reference no probe reaches: the governor gives the nodes its most, twice the budget
    monkeypatch.setenv("K8SDDS_CALIBRATION", str(_calibration(tmp_path, 1e9)))
    monkeypatch.setenv("K8SDDS_STATE_DIR", str(tmp_path / "state"))
    name = "kdg" + str(os.getpid() % 1000)
    tb = Testbed(default_nodes(3, "rpi3b", name))
    tb.up()
    try:
        gov = tb.status()["governor"]
        assert gov["running"] and governor.is_governor(gov["pid"])
        groups = [tb.cgroup(tb.node(n)) for n in ("node1", "node2")]
        _wait_for(lambda: all(_budget(g) == pytest.approx(0.16, rel=0.02) for g in groups))
        # its probes run in cgroups of their own, under the board's budget
        probes = list(Path(groups[0]).parent.glob("_probe*"))
        assert probes and all((p / "cgroup.procs").read_text().split() for p in probes)
        assert all(_budget(str(p)) == pytest.approx(0.08, rel=0.02) for p in probes)
        assert Path(gov["log"]).read_text().count("\n") >= 2
        # stopped, it gives each node its budget back, and its probes end with it
        governor.stop(gov["pid"])
        assert not governor.is_governor(gov["pid"])
        assert all(_budget(g) == pytest.approx(0.08, rel=0.02) for g in groups)
        _wait_for(lambda: not any((p / "cgroup.procs").read_text().split() for p in probes))
    finally:
        tb.down()
    assert namespaces(name) == []
    assert not list(Path("/sys/fs/cgroup").glob(f"*/k8sdds/{name}"))
    assert not list((tmp_path / "state").glob(f"{name}.governor.*"))


@requires_namespaces()
@pytest.mark.emulated
def test_down_stops_a_running_governor(tmp_path):
    env = {**os.environ, "K8SDDS_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "200",
           "K8SDDS_CALIBRATION": str(_calibration(tmp_path, 75.0))}
    name = "kdh" + str(os.getpid() % 1000)
    up = cli("testbed", "up", "--name", name, "--nodes", "2", "--profile", "rpi3b", env=env)
    try:
        assert up.returncode == 0, up.stderr
        assert "CPU governor: on (pid" in up.stdout
        pid = json.loads((tmp_path / "state" / f"{name}.json").read_text())["governor"]["pid"]
        assert governor.is_governor(pid)
    finally:
        down = cli("testbed", "down", "--name", name, env=env)
    assert down.returncode == 0, down.stderr
    assert not governor.is_governor(pid)
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(tmp_path) not in ps  # neither the governor nor a probe of it is left


@requires_namespaces()
@pytest.mark.emulated
def test_no_governor_and_a_calibration_without_a_reference_say_so(tmp_path):
    state = tmp_path / "state"
    name = "kdo" + str(os.getpid() % 1000)
    (tmp_path / "old").mkdir()
    cases = [("--no-governor", _calibration(tmp_path, 75.0), "CPU governor: off: turned off"),
             (None, _calibration(tmp_path / "old", None),
              "CPU governor: off: the rpi3b calibration has no probe reference")]
    for flag, cal, said in cases:
        env = {**os.environ, "K8SDDS_STATE_DIR": str(state), "COLUMNS": "300",
               "K8SDDS_CALIBRATION": str(cal)}
        up = cli("testbed", "up", "--name", name, "--nodes", "2", "--profile", "rpi3b",
                 *([flag] if flag else []), env=env)
        try:
            assert up.returncode == 0, up.stderr
            assert said in up.stdout
            assert not list(Path("/sys/fs/cgroup").glob(f"*/k8sdds/{name}/_probe*"))
            if flag is None:  # and the profile's lines of what was not applied name the fix
                assert "`k8sdds testbed calibrate --profile rpi3b` records one" in up.stderr
        finally:
            cli("testbed", "down", "--name", name, env=env)


def test_a_spec_with_a_governor_that_is_not_true_or_false_is_refused(tmp_path):
    spec = tmp_path / "tb.yaml"
    spec.write_text("workers: 2\nprofile: rpi3b\ngovernor: maybe\n")
    proc = cli("testbed", "up", "--spec", str(spec), env={**os.environ,
                                                           "K8SDDS_STATE_DIR": str(tmp_path)})
    assert proc.returncode == 2
    assert f"{spec}, field 'governor': value 'maybe': true or false" in proc.stderr
    assert "Traceback" not in proc.stderr


@requires_namespaces()
@pytest.mark.emulated
def test_a_run_records_the_governors_mean_scale_per_repeat(tmp_path):
    env = {**os.environ, "K8SDDS_STATE_DIR": str(tmp_path / "state"),
           "K8SDDS_CALIBRATION": str(_calibration(tmp_path, 1e9))}
    sch = tmp_path / "s.csv"
    sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize\n1024,false,1,false,0\n")
    proc = cli("run", "--sch", str(sch), "--profile", "rpi3b", "--nodes", "3", "--datapath",
               "host", "--duration", "3", "--out", str(tmp_path / "logs"), "--testbed",
               "kdr" + str(os.getpid() % 1000), "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    run = Path(json.loads(proc.stdout)["run_dir"])
    import csv

    with open(run / "results.csv", newline="") as fh:
        scales = [float(r["value"]) for r in csv.DictReader(fh)
                  if r["metric"] == "governor_scale"]
    assert scales and all(s == pytest.approx(governor.HIGH, rel=0.1) for s in scales)
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["cluster"]["governor"]["running"] is True
