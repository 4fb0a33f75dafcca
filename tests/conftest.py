from __future__ import annotations

from pathlib import Path

import pytest

FIXTURES = Path(__file__).parent / "fixtures"

pytest_plugins = ["tests.skip_rule",  # in CI a skip is a failure
                  "tests.stop_rule",  # a stop ends every test and takes down what it made
                  "tests.builds",  # a test waits for what it needs built (make test)
                  "pytester"]  # a pytest session inside a test (test_layout)

# The order the modules run in. `make test` runs the suite in two processes (pytest-xdist,
# --dist loadfile, in collection order: the first module to one, the second to the other,
# then one more each, then whichever is free takes the next) beside the builds (.ci/builds).
# The longest first (FIRST), so that the short ones fill the gaps at the end; on a filled
# cache that is the whole order. While builds are pending (an empty cache), the modules that
# wait for one go after those that need nothing built, in FIRST's order, except the Pi
# tutorial, still first: its process waits for its builds while the other runs the rest.
FIRST = ["test_pi_tutorial", "test_kube_testbed", "test_kubeadm_real",
         "test_baseline_emulated",
         "test_kube_router_testbed", "test_weave_testbed", "test_kubernetes_backend",
         "test_emulated", "test_serve_tasks", "test_arm_image", "test_analysis_emulated",
         "test_storage_emulated", "test_secure_emulated"]


def pytest_collection_modifyitems(items) -> None:
    from .builds import waits

    waiting = {item.module.__name__ for item in items if item.module and waits(item)}
    rank = {name: i for i, name in enumerate(FIRST)}

    def order(item) -> tuple[int, int]:
        if not item.module:
            return (2, len(FIRST))
        name = item.module.__name__
        at = rank.get(name.rsplit(".", 1)[-1], len(FIRST))
        return (0 if at == 0 else 1 + (name in waiting), at)

    items.sort(key=order)


@pytest.fixture
def env(tmp_path, monkeypatch):
    """The environment of a `k8sdds` a test starts on the emulated testbed: its state (the
    testbeds it makes) in the test's own folder, wide lines."""
    import os

    state = tmp_path / "state"
    monkeypatch.setenv("K8SDDS_STATE_DIR", str(state))
    return {**os.environ, "K8SDDS_STATE_DIR": str(state), "COLUMNS": "200"}


def user_python() -> str:
    """The interpreter a user's `python3` resolves to: never this virtualenv's."""
    import os
    import shutil
    import sys

    venv_bin = (Path(sys.prefix) / "bin").resolve()
    path = os.pathsep.join(p for p in os.environ.get("PATH", "").split(os.pathsep)
                           if p and Path(p).resolve() != venv_bin)
    return shutil.which("python3", path=path) or sys._base_executable


@pytest.fixture
def write_schedule(tmp_path):
    """Write a schedule file from text and return its path."""
    def write(text: str, name: str = "schedule.csv") -> Path:
        path = tmp_path / name
        path.write_text(text)
        return path
    return write


def fake_run(tmp_path: Path, run_id: str = "20260101-000000-abcd", repeats: int = 1):
    """A run directory holding real ddsperf logs (tests/fixtures/ddsperf), laid out as the
    runner lays it out, with its manifest; results.csv is not written (see `k8sdds parse`)."""
    import shutil
    from dataclasses import replace

    from k8sdds import schedule
    from k8sdds.results import RepeatEntry, RepeatKey, RunDir, RunManifest

    run = RunDir.create(tmp_path, run_id)
    [base] = schedule.load(FIXTURES / "schedule-k8sdds.csv")[2:3]  # 1024 B, 1 subscriber
    thr = replace(base, datapath="flannel-hostgw", number=1, repeats=repeats)
    lat = replace(base, data_len=256, latency_test=True, datapath="flannel-vxlan", number=2,
                  repeats=repeats)
    logs = {(1, "pub"): "throughput-pub-hostgw-1k.log",
            (1, "sub0"): "throughput-sub-hostgw-1k.log",
            (2, "pub"): "latency-ping-vxlan-256.log", (2, "sub0"): "latency-pong-vxlan-256.log"}
    placement = {"pub": "node1", "sub0": "node2"}
    entries = {}
    for rep in range(1, repeats + 1):
        for (number, role), name in logs.items():
            key = RepeatKey(number, rep)
            d = run.repeat_dir(key)
            d.mkdir(parents=True, exist_ok=True)
            shutil.copy(FIXTURES / "ddsperf" / name, d / f"{role}.log")
            entries[key] = RepeatEntry(status="done", placement=placement)
    run.write_manifest(RunManifest(run_id=run.run_id, backend="emulated", tests=[thr, lat],
                                repeats=entries, status="complete"))
    return run


def run_with_throughput(tmp_path, name: str, values: list[float]):
    """A run of real ddsperf logs, one repeat per value, whose subscriber throughput of each
    repeat is set to that value (the repeat's summary row)."""
    import pandas as pd

    from k8sdds.reparse import reparse

    run = fake_run(tmp_path / name, f"20260101-000000-{name}", repeats=len(values))
    reparse(run.path)
    df = pd.read_csv(run.results_path)
    for repeat, value in enumerate(values, 1):
        hit = ((df.metric == "throughput_mbps") & df.role.str.startswith("sub")
               & (df.kind == "summary") & (df.repeat == repeat))
        df.loc[hit, "value"] = value
    df.to_csv(run.results_path, index=False)
    return run.path
