""".ci/builds and the wait for its artefacts (tests/builds.py): `make test` runs the builds
beside the tests, and a test waits only for what it needs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from . import builds

ROOT = Path(__file__).parent.parent


def test_every_artefact_has_its_make_target_and_a_lane():
    listed = subprocess.run([sys.executable, str(builds.BUILDS), "--list"], capture_output=True,
                            text=True, timeout=30, check=True).stdout
    assert listed.splitlines()[0] == "lane 1:" and "lane 2:" in listed
    assert "k8s-amd64" in listed and "vm-armhf" in listed and "perftest-arm64" in listed
    # make knows how to build each (make -n: nothing runs; one recipe echoed for each)
    done = subprocess.run(["make", "-n", "--no-print-directory",
                           *(f"build-{name}" for name in builds.ARTEFACTS)], cwd=ROOT,
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    for name in builds.ARTEFACTS:
        assert f"build-{name}" not in done.stderr
    for name in (*builds.ENGINES, *builds.ARM_ENGINES):
        assert name in builds.ARTEFACTS


def test_an_unknown_artefact_is_a_clear_error():
    with pytest.raises(ValueError, match="no artefact k8s-sparc"):
        builds.needs("k8s-sparc")
    bad = subprocess.run([sys.executable, str(builds.BUILDS), "k8s-sparc"], capture_output=True,
                         text=True, timeout=30)
    assert bad.returncode == 2 and "no artefact k8s-sparc" in bad.stderr
    assert "Traceback" not in bad.stderr


def test_a_wait_ends_when_the_artefact_is_built(tmp_path, monkeypatch):
    monkeypatch.setenv("K8SDDS_BUILDS", str(tmp_path))
    later = threading.Timer(1.5, (tmp_path / "zenoh-amd64.ok").write_text, args=("0\n",))
    later.start()
    started = time.monotonic()
    waited = builds.wait("zenoh-amd64")
    assert 1.4 <= time.monotonic() - started and waited >= 1.4
    assert builds.wait("zenoh-amd64") < 0.5  # built: no wait


def test_a_failed_build_fails_the_test_with_its_log(tmp_path, monkeypatch):
    monkeypatch.setenv("K8SDDS_BUILDS", str(tmp_path))
    (tmp_path / "k8s-arm64.log").write_text("go: downloading ...\ncannot find module x\n")
    (tmp_path / "k8s-arm64.failed").write_text("2\n")
    with pytest.raises(pytest.fail.Exception, match="(?s)build of k8s-arm64 failed.*"
                       "cannot find module x"):
        builds.wait("k8s-arm64")


def test_an_artefact_the_lanes_never_built_fails_rather_than_waits(tmp_path, monkeypatch):
    monkeypatch.setenv("K8SDDS_BUILDS", str(tmp_path))
    (tmp_path / "all.done").write_text("")
    with pytest.raises(pytest.fail.Exception, match="vm-arm64 was never built"):
        builds.wait("vm-arm64")


class _Item:
    def __init__(self, *names):
        self.marks = [builds.needs(*names).mark] if names else []

    def iter_markers(self, name):
        return iter(self.marks)


def test_only_a_test_needing_a_pending_build_goes_after_the_others(monkeypatch):
    """.ci/builds names what was still to build when the tests started; on a filled cache
    nothing, and every module keeps its place (the longest first)."""
    monkeypatch.setenv("K8SDDS_BUILDS_PENDING", "zenoh-amd64,vm-arm64")
    assert builds.waits(_Item("zenoh-amd64", "k8s-amd64"))
    assert not builds.waits(_Item("k8s-amd64")) and not builds.waits(_Item())
    monkeypatch.setenv("K8SDDS_BUILDS_PENDING", "")
    assert not builds.waits(_Item("zenoh-amd64"))


def test_without_the_lanes_nothing_is_waited_for(monkeypatch):
    monkeypatch.delenv("K8SDDS_BUILDS", raising=False)
    assert builds.wait(*builds.ARTEFACTS) == 0.0  # pytest by hand on a filled cache


def _fake_project(tmp_path: Path) -> Path:
    """A copy of .ci/builds beside a Makefile whose every build writes its name and then
    sleeps long (a compiler, a debootstrap under qemu-user: something a stop must end)."""
    root = tmp_path / "project"
    (root / ".ci").mkdir(parents=True)
    (root / ".ci" / "builds").write_text(builds.BUILDS.read_text())
    (root / "Makefile").write_text("build-%:\n\t@echo $* >> started\n\t@sleep 4321.5\n")
    return root


def _sleeping(root: Path) -> list[str]:
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "sleep 4321.5" in line]


def _stopped(root: Path, argv: list[str], signum: int, group: bool, head_start: str):
    proc = subprocess.Popen([sys.executable, str(root / ".ci" / "builds"), "--", *argv],
                            cwd=root, start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env={**{k: v for k, v in os.environ.items()
                                    if k != "K8SDDS_TIMELINE"},  # not CI's own timeline
                                 "K8SDDS_BUILDS": str(root / "out"),
                                 "K8SDDS_BUILDS_HEAD_START": head_start})
    deadline = time.monotonic() + 20
    while len(_started(root)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert len(_started(root)) == 2, proc.stdout  # each lane's first build under way
    time.sleep(1.0)
    (os.killpg if group else os.kill)(proc.pid, signum)
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out


def _started(root: Path) -> list[str]:
    return (root / "started").read_text().split() if (root / "started").exists() else []


@pytest.mark.parametrize("recipe,kept", [("@echo $* >> started", False),
                                          ("@case $* in zenoh-amd64) exit 3;; esac", True)])
def test_the_builds_folder_is_removed_unless_a_log_is_needed(tmp_path, recipe, kept):
    """Without $K8SDDS_BUILDS the lanes write into a folder of their own under $TMPDIR: gone
    once every build is done, kept (and named) when a failed build's log is in it."""
    root = tmp_path / "project"
    (root / ".ci").mkdir(parents=True)
    (root / ".ci" / "builds").write_text(builds.BUILDS.read_text())
    (root / "Makefile").write_text(f"build-%:\n\t{recipe}\n")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("K8SDDS_BUILDS", "K8SDDS_TIMELINE")}
    done = subprocess.run([sys.executable, str(root / ".ci" / "builds"), "--", "true"],
                          cwd=root, capture_output=True, text=True, timeout=120,
                          env={**env, "TMPDIR": str(scratch)})
    folders = list(scratch.iterdir())
    if not kept:
        assert done.returncode == 0, done.stdout + done.stderr
        assert folders == []
    else:
        assert done.returncode == 1, done.stdout + done.stderr
        assert len(folders) == 1 and str(folders[0]) in done.stdout
        assert (folders[0] / "zenoh-amd64.log").exists()


def test_a_stop_of_named_builds_ends_them_and_leaves_no_folder(tmp_path):
    """`.ci/builds NAME...` in the foreground, told to stop: the build ends with its
    children, 130, and the folder of its cut-short logs is gone."""
    root = _fake_project(tmp_path)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    proc = subprocess.Popen([sys.executable, str(root / ".ci" / "builds"), "k8s-amd64",
                             "mqtt-amd64"], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "TMPDIR": str(scratch)})
    deadline = time.monotonic() + 20
    while not _started(root) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _started(root) == ["k8s-amd64"]
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 130, out
    assert _started(root) == ["k8s-amd64"]  # the second never began
    assert list(scratch.iterdir()) == [] and _sleeping(root) == []


@pytest.mark.parametrize("signum,group", [(signal.SIGINT, True), (signal.SIGTERM, False)])
def test_a_stop_before_the_tests_ends_every_build_and_starts_no_other(tmp_path, signum,
                                                                        group):
    """Ctrl-C (SIGINT to the whole group, as a terminal sends it) or a SIGTERM to .ci/builds
    alone, while the lanes build: the builds under way end with their children, no lane
    starts the next, nothing is left behind."""
    root = _fake_project(tmp_path)
    code, out = _stopped(root, ["true"], signum, group, head_start="600")
    assert code == 130, out
    assert sorted(_started(root)) == ["k8s-amd64", "mqtt-amd64"], out
    assert _sleeping(root) == []
    assert "Traceback" not in out


def test_a_sigterm_while_the_tests_run_reaches_them_and_ends_the_builds(tmp_path):
    root = _fake_project(tmp_path)
    told = tmp_path / "told"
    tests = (f"import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: "
             f"(open({str(told)!r}, 'w').write('teardown'), sys.exit(3))); time.sleep(600)")
    code, out = _stopped(root, [sys.executable, "-c", tests], signal.SIGTERM, False,
                         head_start="0")
    assert code == 130, out
    assert told.read_text() == "teardown"  # the tests got it, and their time to tear down
    assert sorted(_started(root)) == ["k8s-amd64", "mqtt-amd64"], out
    assert _sleeping(root) == []


SLOW_TEARDOWN = '''
import os, pathlib, subprocess, sys, time
import pytest

HERE = pathlib.Path(__file__).parent


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    state = tmp_path_factory.getbasetemp() / "state"
    env = {**os.environ, "K8SDDS_STATE_DIR": str(state)}
    up = [sys.executable, "-m", "k8sdds", "testbed", "up", "--testbed", "kstop", "--nodes", "2"]
    subprocess.run(up, env=env, check=True, capture_output=True)
    yield
    time.sleep(60)  # longer than a worker is given after a stop
    subprocess.run([sys.executable, "-m", "k8sdds", "testbed", "down", "--testbed", "kstop"],
                   env=env, check=True)


def test_long(testbed):
    (HERE / "started").write_text("yes")
    time.sleep(600)


def test_other():
    time.sleep(600)
'''


def _namespaces(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines() if line.startswith(prefix)]


@pytest.mark.emulated  # it brings up a testbed
def test_ctrl_c_on_the_tests_takes_down_what_a_killed_worker_left(tmp_path):
    """Ctrl-C (SIGINT to the whole group) on the suite as `make test` runs it, two xdist
    workers, while a test runs on an emulated testbed its fixture brought up and takes
    longer to take down than a stopped worker is given (execnet ends it): the main process
    takes the testbed down (stop_rule), and the session ends within 45 s of the stop."""
    (tmp_path / "test_slow_teardown.py").write_text(SLOW_TEARDOWN)
    root = Path(__file__).parent.parent
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "tests.stop_rule", "-p", "no:cacheprovider",
         "-n", "2", "-q", "--basetemp", str(tmp_path / "bt"), "test_slow_teardown.py"],
        cwd=tmp_path, start_new_session=True, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONPATH": str(root)})
    try:
        deadline = time.monotonic() + 120
        while not (tmp_path / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (tmp_path / "started").exists(), proc.stdout
        assert len(_namespaces("kstop-")) >= 3  # up: the switch and two nodes
        stopped = time.monotonic()
        os.killpg(proc.pid, signal.SIGINT)
        out, _ = proc.communicate(timeout=120)
        took = time.monotonic() - stopped
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert _namespaces("kstop-") == [], out
    assert "taking down testbed kstop left by a stopped test" in out, out
    assert took < 45, f"{took:.0f} s after the stop\n{out}"
