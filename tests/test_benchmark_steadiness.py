"""benchmarks/steadiness.py on this machine's real cgroups: the probe runs under the
profile's budget (it gets a budget's share of work, not a whole CPU's) and its cgroup is
gone afterwards."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from k8sdds.testbed import cgroups

from .emulated_support import requires_namespaces

pytestmark = [pytest.mark.emulated, requires_namespaces()]

SCRIPT = Path(__file__).resolve().parent.parent / "benchmarks" / "steadiness.py"


def test_the_probe_runs_under_the_budget_and_leaves_no_cgroup():
    kind, _ = cgroups.hierarchy()
    if kind is None:
        pytest.skip("no cgroup cpu controller")
    proc = subprocess.run([sys.executable, str(SCRIPT), "--rounds", "1", "--seconds", "3"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "budget 0.0" in proc.stdout  # rpi3b's calibrated budget, a few % of a CPU
    line = next(x for x in proc.stdout.splitlines() if x.startswith("round 1"))
    efficiency = float(re.search(r"efficiency ([\d.]+)", line).group(1))
    # under the budget the probe gets about its share's work; unlimited it would get a
    # whole CPU's: 1 / 0.081, an efficiency of about 12
    assert 0.05 < efficiency < 2, line
    for top in [*cgroups.v1_hierarchies(), *cgroups.hybrid_unified()]:
        assert not (top / "k8sdds" / "kdsteady").exists()
