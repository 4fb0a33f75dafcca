"""`k8sdds testbed calibrate` on the real emulated cluster: it measures, writes the file
every later testbed takes its budget from, and leaves nothing behind."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .emulated_support import cli, namespaces, requires_namespaces

pytestmark = [pytest.mark.emulated, requires_namespaces()]


@pytest.mark.exclusive  # its link-bound figure wants a quiet machine
def test_calibrate_measures_writes_the_budget_and_cleans_up(tmp_path):
    name = "kdc" + str(os.getpid() % 1000)
    cal = tmp_path / "cal.json"
    env = {**os.environ, "K8SDDS_STATE_DIR": str(tmp_path / "state"),
           "K8SDDS_CALIBRATION": str(cal), "COLUMNS": "300"}
    proc = cli("testbed", "calibrate", "--profile", "rpi3b", "--rounds", "1", "--repeats",
               "1", "--duration", "2", "--testbed", name, "--json", env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["file"] == str(cal) and out["board"] == "rpi3b"
    # the link-bound rate of a 100 Mbit/s uplink, measured with no CPU limit
    assert 80 <= out["link_mbps"] <= 100
    kinds = [k for _, _, k in out["steps"]]
    # the scout from 0.01 CPU, the ladder's other budget, the check (a correction: two)
    assert out["steps"][0][:1] == [0.01] and kinds[0] == "scout"
    assert kinds.count("ladder") == 1 and kinds[-1] == "check"
    scouts = [v for _, v, k in out["steps"] if k == "scout"]
    assert scouts == sorted(scouts) or out["notes"]  # rising, or said
    assert all(v > 0 for _, v, _ in out["steps"])  # every step measured traffic
    assert 0.01 <= out["cpu"] <= 1.0
    assert out["machine"]["cpu_count"] == os.cpu_count()
    assert "link-bound: 16384 B" in proc.stderr and "0.0100 CPU: 1024 B" in proc.stderr
    saved = json.loads(cal.read_text())["boards"]["rpi3b"]
    assert saved["cpu"] == out["cpu"]
    # the ratio stored is what runs at the chosen budget measured, never the target
    said = [float(v) for v in re.findall(rf"{out['cpu']:.4f} CPU: 1024 B at ([0-9.]+) "
                                         "Mbit/s", proc.stderr)]
    checks = [v for c, v, k in out["steps"] if k == "check" and c == out["cpu"]]
    assert checks and said[-len(checks):] == pytest.approx(checks, abs=0.06)
    assert out["ratio"] == pytest.approx(sum(checks) / len(checks) / out["link_mbps"],
                                         abs=2e-3)
    # nothing of its testbed is left: namespaces, cgroups, state
    assert namespaces(name) == []
    assert not list(Path("/sys/fs/cgroup").glob(f"*/k8sdds/{name}"))
    assert not list((tmp_path / "state").glob(f"{name}.json"))
    # and what comes after takes the budget from the file
    shown = cli("testbed", "profiles", env=env)
    assert f"{out['cpu']:g}" in shown.stdout and "calibrated on this machine" in shown.stdout


@pytest.mark.exclusive  # beside another test's work its calibration would be refused as busy
def test_a_run_calibrates_a_budget_made_on_another_machine_first(tmp_path, monkeypatch):
    """The backend of `k8sdds run --profile rpi3b`, its calibration file made on another
    machine: it calibrates here (the real search, shortened), keeps the result as this
    machine's, and the testbed it brings up takes that budget."""
    from dataclasses import replace

    from k8sdds.deployment.emulated import EmulatedBackend
    from k8sdds.deployment.options import EmulatedOptions
    from k8sdds.testbed import calibrate, calibration

    cal = tmp_path / "cal.json"
    calibration.save(calibration.Calibration(
        board="rpi3b", cpu=0.5, target_ratio=0.87, ratio=0.8, link_mbps=95.0,
        machine={**calibration.this_machine(), "cpu_model": "Other CPU"},
        when="2026-01-01T00:00:00"), cal)
    monkeypatch.setenv("K8SDDS_CALIBRATION", str(cal))
    monkeypatch.setenv("K8SDDS_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(calibrate, "AUTO", replace(calibrate.AUTO, rounds=1, repeats=1,
                                                   duration=2, testbed="kdq" + str(
                                                       os.getpid() % 1000)))
    name = "kdr" + str(os.getpid() % 1000)
    backend = EmulatedBackend(EmulatedOptions(testbed=name, nodes=3, profile="rpi3b"))
    backend.up()
    try:
        saved = json.loads(cal.read_text())["boards"]["rpi3b"]
        assert saved["machine"]["cpu_model"] == calibration.this_machine()["cpu_model"]  # here
        assert saved["cpu"] != 0.5 and len(saved["steps"]) >= 2
        profile = backend.testbed.profiles()["rpi3b"]
        assert profile["cpu"] == saved["cpu"] and profile["cpu_origin"] == "this machine"
    finally:
        backend.down()
    assert namespaces(name) == [] and namespaces("kdq" + str(os.getpid() % 1000)) == []


@pytest.mark.exclusive  # it keeps the machine busy itself
def test_a_calibration_beside_other_work_is_refused_and_nothing_kept(tmp_path):
    """Two busy loops, one a core: the calibration's first step (the link-bound rate) sees
    the machine busy, ends, keeps nothing and leaves nothing; a run on a budgeted node
    begun beside them says so with its figures."""
    name = "kdk" + str(os.getpid() % 1000)
    cal = tmp_path / "cal.json"
    env = {**os.environ, "K8SDDS_STATE_DIR": str(tmp_path / "state"),
           "K8SDDS_CALIBRATION": str(cal), "COLUMNS": "300"}
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
             for _ in range(os.cpu_count() or 2)]
    try:
        proc = cli("testbed", "calibrate", "--profile", "rpi3b", "--rounds", "1",
                   "--repeats", "1", "--duration", "2", "--testbed", name, env=env,
                   timeout=300)
        sch = tmp_path / "s.csv"
        sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize\n"
                       "1024,false,1,false,0\n")
        run = cli("run", "--sch", str(sch), "--profile", "rpi3b", "--datapath", "host",
                  "--duration", "1", "--out", str(tmp_path / "logs"), "--testbed", name,
                  "--no-calibrate", "--no-plot", "--json", env=env)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    assert proc.returncode != 0
    assert ("this machine was busy while the calibration measured 16384 B on host: other "
            "work kept") in proc.stderr
    assert "a calibration made so is not kept" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not cal.exists()  # never stored
    assert namespaces(name) == []
    assert not list(Path("/sys/fs/cgroup").glob(f"*/k8sdds/{name}"))
    assert run.returncode == 0, run.stderr
    notes = json.loads(run.stdout)["budget_notes"]
    assert any(n.startswith("this machine was busy as the run began: other work kept")
               and "may read low" in n for n in notes), notes
