"""`.ci/phase`: each phase of `make test` timed, wall and CPU, and the timeline `.ci/run`
prints at its end."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

PHASE = Path(__file__).parent.parent / ".ci" / "phase"
BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass"


def phase(*args: str, timeline: Path | None = None,
          cwd: Path | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "K8SDDS_TIMELINE"}
    if timeline:
        env["K8SDDS_TIMELINE"] = str(timeline)
    return subprocess.run([sys.executable, str(PHASE), *args], capture_output=True,
                          text=True, env=env, timeout=60, cwd=cwd)


def test_a_phase_records_its_wall_and_cpu_time_and_keeps_the_command_s_exit_status(tmp_path):
    timeline = tmp_path / "timeline"
    assert phase("burn", "--", sys.executable, "-c", BURN, timeline=timeline).returncode == 0
    failed = phase("fails", "--", sys.executable, "-c", "raise SystemExit(3)",
                   timeline=timeline)
    assert failed.returncode == 3  # make stops where the phase failed, as before
    (burn, fails) = [line.split("\t") for line in timeline.read_text().splitlines()]
    assert burn[0] == "burn" and float(burn[2]) + float(burn[3]) >= 0.4  # the child's CPU
    assert float(burn[1]) >= 0.4 and burn[4] == "0"
    assert fails[0] == "fails" and fails[4] == "3"
    shown = phase("--print", str(timeline))
    assert shown.returncode == 0
    lines = shown.stdout.strip().splitlines()
    assert lines[0].startswith("timeline of make test")
    assert [line.split()[0] for line in lines[1:]] == ["burn", "fails", "total"]
    assert "exit 3" in lines[2] and "exit" not in lines[1]


def test_without_a_timeline_a_phase_only_runs_its_command(tmp_path):
    done = phase("true", "--", "true", timeline=None, cwd=tmp_path)
    assert done.returncode == 0 and done.stdout == "" and done.stderr == ""
    assert not list(tmp_path.iterdir())  # no timeline where none was asked for


def test_a_missing_command_and_bad_usage_are_clear_errors(tmp_path):
    missing = phase("x", "--", str(tmp_path / "absent"), timeline=tmp_path / "t")
    assert missing.returncode == 127 and "cannot run" in missing.stderr
    assert "Traceback" not in missing.stderr
    usage = phase("only-a-name")
    assert usage.returncode == 2 and "usage: .ci/phase" in usage.stderr


def test_a_build_beside_a_phase_is_shown_under_it_and_not_counted_twice(tmp_path):
    """.ci/builds adds a line per artefact, two spaces first, before the phase it ran beside
    ends; the total is the phases' (their CPU already holds the builds they waited for)."""
    timeline = tmp_path / "timeline"
    timeline.write_text("  build k8s-amd64\t600.0\t900.0\t100.0\t0\n"
                        "tests\t1200.0\t1500.0\t300.0\t0\n")
    lines = phase("--print", str(timeline)).stdout.strip().splitlines()
    assert lines[1].split()[:2] == ["build", "k8s-amd64"] and lines[1].startswith("    build")
    total = lines[-1].split()
    assert total[:5] == ["total", "20", "min", "00.0", "s"]  # 1,200 s: the phase's alone
    assert total[6:10] == ["30", "min", "00.0", "s"]  # 1,800 s of CPU, not 2,800


def test_the_critical_path_is_the_tests_that_waited_longest_for_a_build(tmp_path, monkeypatch):
    """tests/builds.py adds a line for each test that waited for builds; the timeline
    prints the longest waits, longest first, after the table (which they do not change)."""
    from . import builds

    timeline = tmp_path / "timeline"
    timeline.write_text("tests\t1200.0\t1500.0\t300.0\t0\n")
    monkeypatch.setenv("K8SDDS_TIMELINE", str(timeline))
    for i, waited in enumerate((5.0, 725.5, 1.2, 60.0, 300.0, 2.0, 30.0)):
        builds.record_wait(f"tests/test_{i}.py::test_it", "k8s-amd64, vm-armhf", waited)
    lines = [line for line in phase("--print", str(timeline)).stdout.splitlines() if line]
    assert lines[2].split()[:5] == ["total", "20", "min", "00.0", "s"]
    assert lines[3] == ("the critical path: the tests that waited longest for a build "
                        "(7 waited; the longest 5):")
    assert [line.split()[-1] for line in lines[4:]] == [
        f"tests/test_{i}.py::test_it" for i in (1, 4, 3, 6, 0)]
    assert lines[4].split()[:6] == ["12", "min", "05.5", "s", "for", "k8s-amd64,"]
