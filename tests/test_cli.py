"""The command line: bad input gives one clear error, exit status 2, and no run directory."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .cli_support import Done, invoke
from .conftest import user_python

ROOT = Path(__file__).parent.parent


def _run(*args: str, cwd: Path) -> Done:
    """The command in this process (the entry points themselves are tested as real processes
    below: `python -m k8sdds`, perftest.py, a terminal, a pipe)."""
    return invoke(*args, cwd=cwd, env={"COLUMNS": "200", "K8SDDS_STATE_DIR": str(cwd / "state")})


BAD = {
    "unknown-column.csv": ("dataLen,multicast,numSubscribers,bestEffort,batchSize,dataLenght\n"
                           "64,false,1,false,0,3\n", "unknown column 'dataLenght'"),
    "bad-bool.csv": ("dataLen,multicast,numSubscribers,bestEffort,batchSize\n"
                     "64,yes,1,false,0\n", "column 'multicast'"),
    "empty.csv": ("", "empty"),
    "latency-batch.csv": ("dataLen,multicast,numSubscribers,bestEffort,batchSize,latencyTest\n"
                          "64,false,1,false,64,true\n", "latency test"),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_bad_schedule_exit_2_no_traceback_no_run_dir(tmp_path, name):
    text, expected = BAD[name]
    (tmp_path / name).write_text(text)
    proc = _run("run", "--sch", name, "--out", "logs", cwd=tmp_path)
    assert proc.returncode == 2
    assert expected in proc.stderr and name in proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not (tmp_path / "logs").exists()


def test_multicast_on_vxlan_rejected_before_anything_runs(tmp_path):
    proc = _run("run", "--sch", str(ROOT / "schedules" / "k8sdds.csv"), "--datapath",
                "flannel-vxlan", "--out", "logs", cwd=tmp_path)
    assert proc.returncode == 2 and "does not cross nodes" in proc.stderr
    assert not (tmp_path / "logs").exists()


@pytest.mark.parametrize("option,value,expected", [
    ("--transport", "smoke", "'smoke' is not one of udp, tcp, tls"),
    ("--datapath", "cilium", "'cilium' is not one of"),
    ("--backend", "cloud", "'cloud' is not one of emulated"),
    ("--order", "random", "'random' is not one of tests, rounds"),
])
def test_bad_option_values(tmp_path, option, value, expected):
    proc = _run("run", "--sch", str(ROOT / "schedules" / "quick.csv"), option, value,
                "--out", "logs", cwd=tmp_path)
    assert proc.returncode == 2 and expected in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "logs").exists()


def test_option_values_are_case_insensitive_until_the_engine_refuses(tmp_path):
    # DTLS parses (case-insensitive), then ddsperf refuses it with the reason
    proc = _run("run", "--sch", str(ROOT / "schedules" / "quick.csv"), "--transport", "DTLS",
                "--out", "logs", cwd=tmp_path)
    assert proc.returncode == 2
    assert "Cyclone DDS has no DTLS transport" in proc.stderr
    assert "set on the command line" in proc.stderr


def test_legacy_perftest_py_takes_the_k8sdds_options(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "perftest.py"), "--help"],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"})
    assert proc.returncode == 0
    for option in ("--sch", "--fromI", "--toI", "--latencyTest", "--noPrint",
                   "--sendQueueSize", "--transport", "--secure", "--peers"):
        assert option in proc.stdout


def test_legacy_perftest_py_reports_bad_schedule(tmp_path):
    (tmp_path / "bad.csv").write_text("dataLen\n64\n")
    proc = subprocess.run([sys.executable, str(ROOT / "perftest.py"), "--sch", "bad.csv"],
                          capture_output=True, text=True, cwd=tmp_path,
                          env={**os.environ, "K8SDDS_STATE_DIR": str(tmp_path / "s")})
    assert proc.returncode == 2 and "missing required column(s)" in proc.stderr


def test_parse_of_a_missing_run_dir(tmp_path):
    """A user mistake through the real entry point: one line, exit 2, no traceback."""
    proc = subprocess.run([sys.executable, "-m", "k8sdds", "parse", "nowhere"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2 and "not a run directory" in proc.stderr
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_an_option_of_another_backend_is_refused(tmp_path):
    sch = tmp_path / "s.csv"
    sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize\n1024,false,1,false,0\n")
    done = invoke("run", "--sch", str(sch), "--kubeconfig", str(tmp_path / "k"), "--out",
                  str(tmp_path / "o"))
    assert done.returncode == 2
    assert "--kubeconfig is an option of --backend kubernetes, not emulated" in done.stderr
    assert not (tmp_path / "o").exists()


def test_a_swallowed_stop_is_not_lost():
    """websocket-client closes sockets under `except: pass`: a Ctrl-C or SIGTERM landing
    there is swallowed; the flag the handler also sets stops the run at the next step."""
    from k8sdds import stopping

    stopping.reset()
    try:
        stopping.check()  # nothing asked: nothing happens
        try:
            stopping._handler(15, None)
        except KeyboardInterrupt:
            pass  # swallowed, as a library might
        with pytest.raises(KeyboardInterrupt):
            stopping.check()
    finally:
        stopping.reset()


def test_after_a_stop_the_clean_up_waits_are_cut_to_what_is_left():
    """A wait of the clean-up (the kubernetes backend's 30 s for deleted pods) is its own
    before a stop and at most CLEANUP_S after one, shrinking as time passes."""
    import time

    from k8sdds import stopping

    stopping.reset()
    try:
        assert stopping.bound(30.0) == 30.0
        try:
            stopping._handler(2, None)
        except KeyboardInterrupt:
            pass
        first = stopping.bound(30.0)
        assert 0.5 <= first <= stopping.CLEANUP_S
        assert stopping.bound(1.0) == 1.0  # a shorter wait stays as it is
        time.sleep(0.2)
        assert stopping.bound(30.0) < first
        stopping._asked_at = time.monotonic() - 60  # long past: one last short ask
        assert stopping.bound(30.0) == 0.5
    finally:
        stopping.reset()
    assert stopping.bound(30.0) == 30.0


def _bare_venv(where: Path) -> Path:
    subprocess.run([user_python(), "-m", "venv", "--without-pip", str(where)], check=True,
                   capture_output=True, timeout=120)
    return where / "bin" / "python"


def test_perftest_py_without_k8sdds_says_so_and_fails(tmp_path):
    import shutil

    shutil.copy(ROOT / "perftest.py", tmp_path / "perftest.py")
    python = _bare_venv(tmp_path / "elsewhere")  # an interpreter with nothing installed
    proc = subprocess.run([str(python), "perftest.py", "--sch", "x.csv"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONNOUSERSITE": "1"})
    assert proc.returncode == 1
    assert "k8sdds is not installed: run `make install`" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_perftest_py_goes_to_the_virtualenv_once_and_never_loops(tmp_path):
    import shutil

    shutil.copy(ROOT / "perftest.py", tmp_path / "perftest.py")
    _bare_venv(tmp_path / ".venv")  # the project's virtualenv, but k8sdds is not in it
    python = _bare_venv(tmp_path / "elsewhere")
    proc = subprocess.run([str(python), "perftest.py", "--sch", "x.csv"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONNOUSERSITE": "1"})
    assert proc.returncode == 1
    # the message comes from the virtualenv's interpreter: it re-executed there, once
    assert f"k8sdds is not installed (in {tmp_path / '.venv'}" in proc.stderr


def test_perftest_py_with_the_users_python3_reaches_k8sdds(tmp_path):
    # the user's python3 (not this virtualenv's), from the repository root, as the README says
    proc = subprocess.run([user_python(), "perftest.py", "--sch", "nowhere.csv", "--fromI",
                           "0", "--toI", "0", "--out", str(tmp_path / "logs")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"})
    assert proc.returncode == 2, proc.stderr  # k8sdds itself answered: the schedule is absent
    assert "nowhere.csv: no such schedule file" in proc.stderr


@pytest.mark.parametrize("command", [("testbed", "datapaths"), ("testbed", "profiles"),
                                     ("engines",)])
def test_listings_fit_an_80_column_terminal(command):
    returncode, stdout = _in_terminal([sys.executable, "-m", "k8sdds", *command], columns=80)
    assert returncode == 0, stdout
    lines = stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    body = [line for line in lines if line.startswith("│")]
    names = {line.split("│")[1].strip() for line in body} - {""}
    assert len(body) <= 3 * len(names)  # a row folds into at most 3 lines, not 8
    assert sum(line.startswith("┃") for line in lines) <= 2  # column titles unbroken
    if command == ("testbed", "datapaths"):
        assert "flannel-wireguard: " in stdout  # its description under the table


def _in_terminal(argv: list[str], columns: int) -> tuple[int, str]:
    """Run `argv` with its output on a real pseudo-terminal `columns` wide; its exit status
    and what it printed, colours removed."""
    import fcntl
    import pty
    import re
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen(argv, stdout=follower, stderr=follower, stdin=subprocess.DEVNULL,
                            env={**env, "TERM": "xterm"}, close_fds=True)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the child is done
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    text = b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")
    return proc.wait(timeout=60), re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def test_a_listing_to_a_pipe_is_not_wrapped():
    """To a file or a pipe, a listing keeps each row on one line, whatever COLUMNS says."""
    done = subprocess.run([sys.executable, "-m", "k8sdds", "testbed", "datapaths"],
                          capture_output=True, text=True, env={**os.environ, "COLUMNS": "40"},
                          timeout=60)
    assert done.returncode == 0, done.stderr
    rows = [line for line in done.stdout.splitlines() if line.startswith("│")]
    names = [line.split("│")[1].strip() for line in rows]
    assert "" not in names and "flannel-vxlan" in names  # no row folded over two lines


def test_engines_says_what_is_built_for_which_architecture_and_how_to_build_the_rest(tmp_path):
    """A cache holding k8sdds-mqtt for this machine only (a script in its place: what is
    checked is the listing): mqtt is built for this machine's architecture, the Pis' are
    named with the command that builds them; zenoh, with nothing built, says how."""
    import platform

    host = {"x86_64": "amd64", "aarch64": "arm64"}[platform.machine()]
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "k8sdds-mqtt"
    fake.write_text("#!/bin/sh\necho 'k8sdds-mqtt 1 (a stand-in)'\n")
    fake.chmod(0o755)
    env = {**os.environ, "COLUMNS": "250", "K8SDDS_ENGINE_BIN": str(bin_dir)}
    proc = subprocess.run([sys.executable, "-m", "k8sdds", "engines"], capture_output=True,
                          text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:]]
            for line in proc.stdout.splitlines() if line.count("│") >= 5}
    assert rows["mqtt"][2] == host and rows["zenoh"][2] == "nothing yet"
    assert rows["ddsperf"][2] == "-"  # Debian's package, not k8sdds' build
    others = [a for a in ("amd64", "arm64", "armhf") if a != host]
    text = " ".join(proc.stdout.split())
    assert (f"Not built for {', '.join(others)}: `make engines`, or "
            f"ARCH={others[0]} ENGINES=mqtt engines/build") in text
    assert "k8sdds-zenoh is not built; run `make engines`" in text
    assert rows["rtiperftest"][0] == "no" and rows["rtiperftest"][2] == "nothing yet"
    assert ("Not built for amd64, arm64, armhf: make perftest PERFTEST_SRC=DIR "
            f'PERFTEST_ARCHES="{" ".join(others)}"') in text
    assert "RTI Perftest is not available: build it on Cyclone DDS" in text


def test_testbed_up_takes_the_testbed_flags_of_run():
    """`testbed up` and `run` describe the testbed with the same flags, bounds and help (the
    emulated backend's options), so a testbed brought up by hand is the one a run builds."""
    import typer.main

    from k8sdds.cli import app

    def params(*path: str) -> dict:
        command = typer.main.get_command(app)
        for name in path:
            command = command.commands[name]
        return {p.opts[0]: p for p in command.params}

    run, up = params("run"), params("testbed", "up")
    for flag in ("--testbed", "--nodes", "--profile", "--testbed-spec"):
        assert up[flag].opts == run[flag].opts and up[flag].help == run[flag].help, flag
    assert "nodes when the testbed is built" in up["--nodes"].help
    done = invoke("testbed", "up", "--nodes", "1")  # refused before anything is made
    assert done.returncode == 2 and "greater than or equal to 2" in done.stderr, done
