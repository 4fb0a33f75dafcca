"""A stop of `make test` as CI runs it (`.ci/run`, make, each `.ci/phase`, `.ci/builds`, the
tests) ends every process of the chain: the real scripts and the real Makefile's recipe of
`test`, its commands replaced by ones that sleep (a compiler, a debootstrap under qemu-user)
and a suite that takes 3 s to tear down, so that what is left running is what a stop failed
to reach."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
MARK = "4322.5"  # the stand-ins' sleep: what still runs after a stop
GIVEN = 30.0  # seconds a stop may take, the builds' and the tests' included


def _recipe() -> list[str]:
    """The real Makefile's recipe of `test`, one command a line (continuations joined)."""
    text = (ROOT / "Makefile").read_text()
    body = re.search(r"^test:[^\n]*\n((?:\t[^\n]*\n)+)", text, re.M).group(1)
    return [line.strip() for line in body.replace("\\\n", " ").splitlines()]


def test_every_phase_of_make_test_is_exec_d_so_a_sigterm_to_make_reaches_it():
    """make passes a SIGTERM to the processes of its recipe (GNU make's fatal_error_signal),
    and Debian's sh does not pass it further: each recipe's shell replaces itself with its
    phase."""
    lines = _recipe()
    assert len(lines) == 5
    assert all(line.startswith("@exec $(PHASE) ") for line in lines), lines


# the tests' stand-in, under the suite's own stop rule (tests/stop_rule.py): on a stop it
# tears down for 3 s ("teardown", then "done" in its file); a second Ctrl-C cuts that short
# ("cut"), as it would pytest's
SUITE = """import sys, time
sys.path.insert(0, sys.argv[1])
from tests import stop_rule
stop_rule.sigterm_as_ctrl_c()
open("ready", "w").close()
try:
    while True:
        time.sleep(600)
except KeyboardInterrupt:
    open("suite", "a").write("teardown")
    try:
        time.sleep(3)
    except KeyboardInterrupt:
        open("suite", "a").write(" cut")
        sys.exit(2)
    open("suite", "a").write(" done")
    sys.exit(1)
"""


def _project(tmp_path: Path) -> Path:
    """A copy of the project's .ci beside a Makefile whose `test` is the real recipe, each
    phase's command replaced: `true` for the installs and ruff, the suite's stand-in behind
    `.ci/builds --`, a sleep for the exclusive phase; its builds each write their name and
    sleep."""
    root = tmp_path / "project"
    shutil.copytree(ROOT / ".ci", root / ".ci")
    lines = []
    for line in _recipe():
        head, _, _ = line.partition(" -- ")
        builds = " .ci/builds -- " in line
        command = (f"$(PYTHON) .ci/builds -- $(PYTHON) suite.py {ROOT} {MARK}" if builds
                   else f"sleep {MARK}" if "exclusive" in head else "true")
        lines.append(f"\t{head} -- {command}")
    (root / "Makefile").write_text(
        "PYTHON ?= python3\nPHASE := $(PYTHON) .ci/phase\ntest:\n" + "\n".join(lines)
        + f"\nbuild-%:\n\t@echo $* >> started\n\t@sleep {MARK}\n")
    (root / "suite.py").write_text(SUITE)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def _processes(root: Path) -> list[tuple[int, str]]:
    """(pid, command line) of every process working in `root`: the chain and its stand-ins
    (each runs there), and nothing of another test's."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            if Path(os.readlink(proc / "cwd")) != root:
                continue
            args = (proc / "cmdline").read_bytes().rstrip(b"\0").replace(b"\0", b" ")
        except OSError:
            continue  # ended meanwhile
        if args:  # a zombie has none
            found.append((int(proc.name), args.decode(errors="replace")))
    return found


def _chain(root: Path) -> dict[str, int]:
    """The pids of make and of the builds' phase, and how many stand-ins sleep."""
    found = {"sleeps": 0}
    for pid, args in _processes(root):
        if args.startswith("make test"):
            found["make"] = pid
        elif ".ci/phase tests, two processes" in args:
            found["phase"] = pid
        elif args == f"sleep {MARK}" or args.split()[1:2] == ["suite.py"]:
            found["sleeps"] += 1  # a build's sleep, or the tests' stand-in
    return found


@pytest.mark.parametrize("whom,signum", [("run", signal.SIGTERM), ("make", signal.SIGTERM),
                                         ("phase", signal.SIGTERM), ("group", signal.SIGINT),
                                         ("group", signal.SIGTERM)])
def test_a_stop_anywhere_in_the_chain_ends_every_build_and_test_within_30_s(tmp_path, whom,
                                                                               signum):
    """While two builds and the tests run: SIGTERM to `.ci/run`, to make or to the phase
    alone, SIGINT (a terminal's Ctrl-C) or SIGTERM to `.ci/run`'s whole group; within 30 s
    nothing of the chain runs, no build started after the stop, and the timeline is printed
    with the stop's exit status."""
    root = _project(tmp_path)
    env = {k: v for k, v in os.environ.items() if k not in ("K8SDDS_TIMELINE", "MAKEFLAGS",
                                                             "MAKELEVEL", "K8SDDS_BUILDS")}
    proc = subprocess.Popen(["bash", str(root / ".ci" / "run")], cwd=root,
                            start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            env={**env, "K8SDDS_BUILDS_HEAD_START": "0",
                                 "K8SDDS_BUILDS": str(root / "out"),
                                 "PERFTEST_SRC": "none"})
    try:
        deadline = time.monotonic() + 30
        while (_chain(root)["sleeps"] < 3 or not (root / "ready").exists()) \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        chain = _chain(root)
        assert chain["sleeps"] == 3, chain  # two builds and the tests' stand-in
        started = sorted((root / "started").read_text().split())
        target = {"run": proc.pid, "make": chain["make"], "phase": chain["phase"]}
        stopped = time.monotonic()
        if whom == "group":
            os.killpg(proc.pid, signum)
        else:
            os.kill(target[whom], signum)
        out, _ = proc.communicate(timeout=GIVEN + 30)
        took = time.monotonic() - stopped
        left = _processes(root)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid, _ in _processes(root):
            os.kill(pid, signal.SIGKILL)
    assert left == [], out
    assert took < GIVEN, f"{took:.0f} s\n{out}"
    assert sorted((root / "started").read_text().split()) == started, out
    assert proc.returncode != 0, out
    assert "timeline of make test" in out and "exit" in out, out
    assert "[build] stopped:" in out and "FAILED" not in out, out
    assert "Traceback" not in out, out
    # the tests were told once and had their teardown, whatever reached them how often
    assert (root / "suite").read_text() == "teardown done", out
