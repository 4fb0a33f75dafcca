"""Other work on the machine (k8sdds.testbed.other_work) and a calibration's bounds
(calibrate.bounded), on literal figures."""

from __future__ import annotations

import subprocess
import sys

import pytest

from k8sdds.errors import TestbedError
from k8sdds.testbed.calibrate import bounded
from k8sdds.testbed.other_work import LIMIT_CORES, Snapshot, busy, cores, snapshot


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


def test_the_cpu_of_threads_doing_this_trees_work_counts_as_its_own():
    """A task that is not this process's reaped child (here a running child, as a testbed's
    NAPI kernel thread is nobody's) counts as own work only when named."""
    spin = subprocess.Popen([sys.executable, "-c",
                             "import time\nend = time.process_time() + 0.6\n"
                             "while time.process_time() < end: pass\n"
                             "print(time.process_time(), flush=True)\ntime.sleep(30)"],
                            stdout=subprocess.PIPE, text=True)
    try:
        spent = float(spin.stdout.readline())  # its own CPU, read by itself
        alone, named = snapshot(), snapshot([spin.pid])
    finally:
        spin.kill()
        spin.wait()
    assert spent >= 0.6
    assert named.own_s - alone.own_s == pytest.approx(spent, abs=0.1)
    # reaped, it is among the children: its pid, gone, counts nothing (not twice, no error)
    assert snapshot([spin.pid]).own_s == pytest.approx(named.own_s, abs=0.1)
