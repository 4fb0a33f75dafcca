"""A local process reaped with what the kernel accounted to it (k8sdds.deployment.reaping),
against a known amount of work: a child that spins for 0.3 s of CPU."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from k8sdds.deployment.reaping import reap

SPIN = ("import time\nend = time.process_time() + 0.3\n"
        "while time.process_time() < end:\n    pass\n")


def test_a_reaped_process_says_the_cpu_it_spent_and_its_exit_status():
    proc = subprocess.Popen([sys.executable, "-c", SPIN + "raise SystemExit(3)"])
    code, cpu = reap(proc, timeout=30)
    assert code == 3 and proc.returncode == 3
    assert cpu.user_s + cpu.system_s == pytest.approx(0.3, abs=0.15)
    assert reap(proc, timeout=0) == (3, None)  # once reaped, no usage left to read


def test_a_running_process_is_not_reaped_before_its_time():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        started = time.monotonic()
        assert reap(proc, timeout=0.2) == (None, None)
        assert 0.15 < time.monotonic() - started < 5
        assert proc.poll() is None
    finally:
        proc.kill()
        code, cpu = reap(proc)
    assert code == -9 and cpu is not None
