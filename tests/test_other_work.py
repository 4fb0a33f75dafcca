"""Other work on the machine (k8sdds.testbed.other_work) and a calibration's bounds
(calibrate.bounded), on literal figures."""

from __future__ import annotations

import pytest

from k8sdds.errors import TestbedError
from k8sdds.testbed.calibrate import bounded
from k8sdds.testbed.other_work import LIMIT_CORES, Snapshot, busy, cores


def test_other_work_is_the_machines_busy_time_less_this_process_trees():
    # 10 s: the cores were busy 14 s in all, 4 of them this process and what it started
    before, after = Snapshot(100.0, 20.0, 50.0), Snapshot(114.0, 24.0, 60.0)
    assert cores(before, after) == pytest.approx(1.0)
    said = busy(before, after, "while the calibration measured 1024 B on host")
    assert said.startswith("this machine was busy while the calibration measured 1024 B on "
                           "host: other work kept 1.00 of its ")
    assert "busy on average over 10 s" in said


def test_a_machine_doing_only_this_is_not_busy():
    before, after = Snapshot(100.0, 20.0, 50.0), Snapshot(105.0, 24.0, 60.0)
    assert cores(before, after) == pytest.approx(0.1) and 0.1 < LIMIT_CORES
    assert busy(before, after, "as the run began") is None
    # ticks are coarser than getrusage: this tree may read more than the machine's busy time
    assert cores(Snapshot(100.0, 20.0, 50.0), Snapshot(100.5, 20.6, 51.0)) == 0.0


@pytest.mark.parametrize(("cpu", "bound"), [(1.0, "ceiling"), (0.01, "floor")])
def test_a_budget_at_the_searchs_bound_is_refused(cpu, bound):
    with pytest.raises(TestbedError, match=f"is the search's {bound} .*not kept"):
        bounded(cpu, 0.01, 1.0)
    bounded(0.0881, 0.01, 1.0)  # inside: kept
