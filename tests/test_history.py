"""`k8sdds history`: each test's mean per run in time order and its change points (Apache
Otava's e-divisive means), on runs of real ddsperf logs whose throughput is set per repeat;
from run directories and from the service's database (a real SQLite file `k8sdds serve
--add-runs` wrote); and the report's history section."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from k8sdds.reparse import reparse
from k8sdds.results import RunDir

from .cli_support import invoke
from .conftest import fake_run

TEST = "flannel-hostgw ddsperf udp 1024 B (pod-pod-cross-node)"


def _runs(tmp_path, levels: list[float], kernel_from: int | None = None) -> list:
    """One run a level, a day apart, the level times 0.99, 1.00 and 1.01 over three
    repeats; from run `kernel_from` on (0-based) the manifests name another kernel."""
    folder = tmp_path / "logs"
    dirs = []
    for i, level in enumerate(levels):
        run = fake_run(folder, f"202601{i + 1:02d}-000000-h{i:03d}", repeats=3)
        manifest = run.read_manifest()
        manifest.created = f"2026-01-{i + 1:02d}T00:00:00+00:00"
        manifest.environment = {"kernel": "6.1.0" if kernel_from is None or i < kernel_from
                                else "6.12.0"}
        RunDir(run.path).write_manifest(manifest)
        reparse(run.path)
        df = pd.read_csv(run.results_path)
        for repeat, factor in ((1, 0.99), (2, 1.0), (3, 1.01)):
            hit = ((df.metric == "throughput_mbps") & df.role.str.startswith("sub")
                   & (df.kind == "summary") & (df.repeat == repeat))
            df.loc[hit, "value"] = level * factor
        df.to_csv(run.results_path, index=False)
        dirs.append(run.path)
    return dirs


STEADY_THEN_DROP = [100, 101, 99, 100, 80, 81, 79, 80]


def test_a_drop_is_one_change_point_with_what_changed_with_it(tmp_path):
    dirs = _runs(tmp_path, STEADY_THEN_DROP, kernel_from=4)
    done = invoke("history", *map(str, reversed(dirs)), "--json")  # any order: by time
    assert done.returncode == 0, done.stderr
    said = json.loads(done.stdout)
    series = [r for r in said["series"] if r["test"] == TEST]
    assert [r["run_id"] for r in series] == [d.name for d in dirs]
    assert [r["mean"] for r in series] == pytest.approx(STEADY_THEN_DROP)
    [change] = said["changes"]
    assert change["test"] == TEST and change["run_id"] == dirs[4].name
    assert change["before"] == pytest.approx(100) and change["after"] == pytest.approx(80)
    assert change["change_pct"] == pytest.approx(-20) and change["regression"] is True
    assert change["p_value"] < 0.001
    assert change["changed_with"] == ["the controller's kernel: 6.1.0 against 6.12.0"]


# three runs without a profile, then three on the Pi 3B's, measured on a loaded 2-core
# machine (1 KiB, host network, 1 s each): the noise is a share of the level
NOISY_THEN_PI = [489.62, 697.48, 815.23, 59.7, 70.12, 58.8]


def test_a_drop_from_a_noisy_level_is_found_on_the_logarithms(tmp_path):
    dirs = _runs(tmp_path, NOISY_THEN_PI)
    done = invoke("history", str(tmp_path / "logs"), "--json")
    assert done.returncode == 0, done.stderr
    [change] = json.loads(done.stdout)["changes"]
    assert change["run_id"] == dirs[3].name and change["regression"] is True
    assert change["before"] == pytest.approx(sum(NOISY_THEN_PI[:3]) / 3)
    assert change["after"] == pytest.approx(sum(NOISY_THEN_PI[3:]) / 3)


def test_fail_on_regression_exits_1_beyond_its_bound_only(tmp_path):
    dirs = _runs(tmp_path, STEADY_THEN_DROP)
    failed = invoke("history", str(tmp_path / "logs"), "--fail-on-regression", "5")
    assert failed.returncode == 1
    assert f"regression beyond 5 %: {TEST}: -20.0 % from run {dirs[4].name}" in failed.stderr
    assert "-> 80 (-20.0 %" in failed.stdout
    passed = invoke("history", str(tmp_path / "logs"), "--fail-on-regression", "25")
    assert passed.returncode == 0, passed.stderr


def test_noise_and_an_improvement_fail_nothing(tmp_path):
    steady = _runs(tmp_path / "a", [100, 101, 99, 100, 101, 99, 100, 100])
    done = invoke("history", *map(str, steady), "--fail-on-regression", "1", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["changes"] == []
    better = _runs(tmp_path / "b", [80, 81, 79, 80, 100, 101, 99, 100])
    done = invoke("history", *map(str, better), "--fail-on-regression", "1", "--json")
    assert done.returncode == 0, done.stderr
    [change] = json.loads(done.stdout)["changes"]
    assert change["regression"] is False and change["change_pct"] == pytest.approx(25)


def test_the_services_database_gives_the_same_changes(tmp_path):
    dirs = _runs(tmp_path, STEADY_THEN_DROP, kernel_from=4)
    url = f"sqlite:///{tmp_path / 'k8sdds.db'}"
    added = invoke("serve", "--out", str(tmp_path / "logs"), "--db", url, "--add-runs")
    assert added.returncode == 0, added.stderr
    done = invoke("history", "--db", url, "--json")
    assert done.returncode == 0, done.stderr
    [change] = json.loads(done.stdout)["changes"]
    assert change["run_id"] == dirs[4].name and change["change_pct"] == pytest.approx(-20)
    assert change["changed_with"] == ["the controller's kernel: 6.1.0 against 6.12.0"]


def test_the_plot_and_the_report_mark_the_change(tmp_path):
    from k8sdds.analysis import report

    dirs = _runs(tmp_path, STEADY_THEN_DROP)
    done = invoke("history", *map(str, dirs), "--out", str(tmp_path / "plot"))
    assert done.returncode == 0, done.stderr
    svg = (tmp_path / "plot" / "history.svg").read_text()
    assert "-20 %" in svg  # the change's annotation
    page = report.build(dirs, tmp_path / "report").read_text()
    section = page[page.index('<section id="history">'):]
    assert dirs[4].name in section[:section.index("</section>")]
    assert "regression" in section[:section.index("</section>")]


@pytest.mark.parametrize("args,said", [
    ((), "give run directories or --db URL"),
    (("--metric", "bogus"), "--metric"),
])
def test_bad_history_input_is_a_clear_error(tmp_path, args, said):
    done = invoke("history", *args)
    assert done.returncode == 2 and said in done.stderr
    assert "Traceback" not in done.stderr


def test_a_folder_without_runs_and_a_single_run_are_refused(tmp_path):
    (tmp_path / "empty").mkdir()
    done = invoke("history", str(tmp_path / "empty"))
    assert done.returncode == 2 and "not a run directory, nor a folder of them" in done.stderr
    [one] = _runs(tmp_path, [100])
    done = invoke("history", str(one))
    assert done.returncode == 2 and "a history needs the same test in several runs" in \
        done.stderr


@pytest.mark.parametrize("page", ["docs/how-to/analyse.md", "docs/how-to/watch-over-time.md"])
def test_the_history_block_runs_as_written(tmp_path, page):
    """The pages' history blocks, read from the page and run (through the CLI's entry point,
    in this process) in a folder of their own whose `logs` holds eight runs of one test:
    steady, then 3 % lower (a change, within the page's 5 % bound: every command exits 0)."""
    from pathlib import Path

    from .test_docs_commands import blocks

    root = Path(__file__).parent.parent
    [block] = [b for b in blocks() if b.page == root / page and b.commands
               and b.commands[0][:2] == ("k8sdds", "history")]
    _runs(tmp_path, [100, 101, 99, 100, 97, 98, 96, 97])
    for words in block.commands:
        done = invoke(*words[1:], cwd=tmp_path)
        assert done.returncode == 0, (words, done.stdout[-2000:], done.stderr[-2000:])
        if words[1] == "history":
            assert "throughput_mbps: 1 test(s) across 8 runs" in done.stdout, done.stdout
    assert (tmp_path / "history" / "history.png").is_file()


def test_the_services_history_page_shows_the_series_and_the_change(tmp_path):
    """The real `k8sdds serve` over the runs (added by its watcher): /history lists the test's
    mean per run and the change point, as `k8sdds history --db` finds it."""
    import os
    import subprocess
    import sys
    import time
    from pathlib import Path

    from .test_serve import _free_port, _get, _wait_listening

    dirs = _runs(tmp_path, STEADY_THEN_DROP, kernel_from=4)
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "k8sdds", "serve", "--out", str(tmp_path / "logs"), "--listen",
         f"127.0.0.1:{port}", "--watch", "0.2", "--db", f"sqlite:///{tmp_path / 'db'}"],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
        stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_listening(proc, port)
        deadline = time.monotonic() + 60
        while len(json.loads(_get(f"{base}/api/runs")[1])) < len(dirs):
            assert time.monotonic() < deadline, "the service did not add the runs"
            time.sleep(0.2)  # the watcher adds them: no event to wait on
        status, page = _get(f"{base}/history?metric=throughput_mbps")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert status == 200, page
    changes = page[page.index('<ul id="changes">'):]
    changes = changes[:changes.index("</ul>")]
    assert f"from run {dirs[4].name}" in changes and "regression" in changes
    assert "the controller&#39;s kernel: 6.1.0 against 6.12.0" in changes  # as HTML escapes it
    assert all(f'href="/runs/{d.name}"' in page for d in dirs)
    assert "Traceback" not in proc.stderr.read()
