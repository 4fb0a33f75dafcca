"""`k8sdds testbed steadiness`: the probe's figures (pure), bad input, and the probe on this
machine's real cgroups: under the budget it gets a budget's share of work, not a whole
CPU's, and its cgroup is gone afterwards."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from k8sdds.errors import TestbedError
from k8sdds.testbed import cgroups
from k8sdds.testbed.profiles import resolve
from k8sdds.testbed.steadiness import NAME, summarise

from .emulated_support import requires_namespaces


def _k8sdds(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "k8sdds", "testbed", "steadiness", *args],
                          capture_output=True, text=True, timeout=180)


def test_summarise_gives_the_spread_and_the_work_per_cpu_second():
    r = summarise([1000, 1000, 1000, 1000], [60, 100, 80, 80], 0.08)
    assert r.free_cv_pct == 0
    assert r.budget_cv_pct == pytest.approx(17.68, abs=0.01)  # pstdev 14.14 of mean 80
    assert (r.low, r.high) == (0.75, 1.25)
    assert r.efficiency == 1.0  # 80 a half-second at 0.08 CPU: all of 1000 per CPU


def test_summarise_refuses_too_few_rates():
    with pytest.raises(TestbedError, match="too little"):
        summarise([1000], [80], 0.08)


@pytest.mark.parametrize(("args", "message"), [
    (["--profile", "cloud"], "profile cloud has no CPU budget"),
    (["--profile", "rpi3"], "--profile: unknown profile 'rpi3'; allowed: cloud, rpi3b"),
    (["--cpu", "4096"], "--cpu 4096: this machine has CPUs 0 to"),
    (["--seconds", "1"], "--seconds 1: at least 2"),
])
def test_bad_input_is_named_and_exits_2(args, message):
    proc = _k8sdds(*args)
    assert proc.returncode == 2
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.emulated
@pytest.mark.exclusive
@requires_namespaces()
def test_the_probe_runs_under_the_budget_and_leaves_no_cgroup():
    if cgroups.hierarchy()[0] is None:
        pytest.skip("no cgroup cpu controller")
    proc = _k8sdds("--rounds", "1", "--seconds", "3", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["profile"] == "rpi3b" and result["cpu"] == resolve("rpi3b").cpu
    (r,) = result["rounds"]
    # under the budget the probe gets about its share's work; had the budget not held, it
    # would get a whole CPU's: 1 / 0.081, an efficiency of about 12
    assert 0.05 < r["efficiency"] < 2, r
    assert r["free_cv_pct"] > 0 and r["budget_cv_pct"] > 0  # half-seconds never all alike
    assert "round 1/1" in proc.stderr  # progress
    for top in [*cgroups.v1_hierarchies(), *cgroups.hybrid_unified()]:
        assert not (top / "k8sdds" / NAME).exists()


@pytest.mark.emulated
@requires_namespaces()
def test_a_second_probe_is_told_that_one_runs():
    from k8sdds.testbed.lock import TestbedLock

    held = TestbedLock(NAME)
    held.acquire()
    try:
        proc = _k8sdds("--rounds", "1", "--seconds", "2")
    finally:
        held.release()
    assert proc.returncode == 1
    assert "another `k8sdds testbed steadiness` is running (pid " in proc.stderr
    assert "--testbed" not in proc.stderr  # steadiness has no such option
    for top in [*cgroups.v1_hierarchies(), *cgroups.hybrid_unified()]:
        assert not (top / "k8sdds" / NAME).exists()
