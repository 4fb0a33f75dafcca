"""A full disk: refused before the run, a clean stop mid-run, nothing lost, then resume.
Uses a real small tmpfs as the output directory."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time

import pandas as pd
import pytest

from .emulated_support import cli, namespaces, requires_namespaces

pytestmark = [pytest.mark.emulated, requires_namespaces()]

HEADER = "dataLen,multicast,numSubscribers,bestEffort,batchSize\n"


@pytest.fixture
def small_disk(tmp_path):
    """A 16 MiB file system, unmounted afterwards."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m", "tmpfs", str(mnt)], check=True)
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=True)


@pytest.fixture
def env(tmp_path):
    return {**os.environ, "K8SDDS_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "200"}


def _fill(disk, leave_mib: float) -> None:
    """Write zeros until only `leave_mib` MiB are free (0: until the disk is full)."""
    with open(disk / "filler", "wb") as fh:
        try:
            while os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize > leave_mib * 2**20:
                fh.write(b"\0" * 65536)
                fh.flush()
        except OSError:
            pass


def _fill_after_first_repeat(disk, leave_mib: float) -> threading.Thread:
    def watch():
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for m in disk.glob("*/manifest.json"):
                try:
                    if json.loads(m.read_text())["repeats"]:
                        _fill(disk, leave_mib)
                        return
                except (ValueError, OSError):
                    pass
            time.sleep(0.05)
    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    return thread


def _run(tmp_path, env, out, *extra) -> subprocess.CompletedProcess:
    sch = tmp_path / "s.csv"
    sch.write_text(HEADER + "1024,false,1,false,0\n")
    return cli("run", "--sch", str(sch), "--datapath", "flannel-hostgw", "--duration", "3",
               "--repeats", "4", "--out", str(out), "--testbed",
               "kdf" + str(os.getpid() % 1000), "--quiet", "--no-plot", *extra, env=env)


def test_too_little_space_is_refused_before_anything_runs(tmp_path, env, small_disk):
    proc = _run(tmp_path, env, small_disk, "--min-free", "64")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "MiB free" in proc.stderr and "--min-free 64 MiB" in proc.stderr
    assert list(small_disk.iterdir()) == []  # no run directory


def _check_kept(run, done_before_stop: int) -> None:
    """The manifest and results on disk are whole and agree on what finished."""
    manifest = json.loads((run / "manifest.json").read_text())
    assert len(manifest["repeats"]) == done_before_stop >= 1
    assert {e["status"] for e in manifest["repeats"].values()} == {"done"}
    df = pd.read_csv(run / "results.csv")
    summary = df[(df.kind == "summary") & (df.metric == "throughput_mbps")]
    recorded = {f"test-{t}/rep-{r}" for t, r in zip(summary.test, summary.repeat, strict=True)}
    assert set(manifest["repeats"]) <= recorded
    assert not list(run.glob(".*.tmp"))


def _resume_completes(run, env, disk) -> None:
    (disk / "filler").unlink()
    proc = cli("run", "--resume", str(run), "--quiet", "--no-plot", "--min-free", "4", "--testbed",
               "kdf" + str(os.getpid() % 1000), env=env)
    assert proc.returncode == 0, proc.stderr
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "complete" and len(manifest["repeats"]) == 4
    assert {e["status"] for e in manifest["repeats"].values()} == {"done"}
    df = pd.read_csv(run / "results.csv")
    s = df[(df.kind == "summary") & (df.metric == "throughput_mbps") & (df.role == "sub0")]
    assert sorted(s.repeat) == [1, 2, 3, 4]  # every repeat once, none twice


def test_disk_full_mid_run_stops_cleanly_and_resumes(tmp_path, env, small_disk):
    filler = _fill_after_first_repeat(small_disk, leave_mib=0)
    proc = _run(tmp_path, env, small_disk, "--min-free", "0")
    filler.join(5)
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "No space left on device" in proc.stderr and "--resume" in proc.stderr
    [run] = [p for p in small_disk.iterdir() if p.is_dir()]
    _check_kept(run, len(json.loads((run / "manifest.json").read_text())["repeats"]))
    assert namespaces("kdf" + str(os.getpid() % 1000)) == []
    _resume_completes(run, env, small_disk)


def test_low_space_mid_run_stops_before_the_next_repeat(tmp_path, env, small_disk):
    filler = _fill_after_first_repeat(small_disk, leave_mib=3)
    proc = _run(tmp_path, env, small_disk, "--min-free", "6")
    filler.join(5)
    assert proc.returncode == 1, proc.stderr
    assert "less than --min-free 6 MiB: the run stopped before test-1/rep-" in proc.stderr
    [run] = [p for p in small_disk.iterdir() if p.is_dir()]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["status"] == "stopped"
    _check_kept(run, len(manifest["repeats"]))
    assert len(manifest["repeats"]) < 4
    _resume_completes(run, env, small_disk)
