"""A failed repeat's rows stay on disk for the record but enter no summary, figure, comparison,
export or database unless asked for (--include-failed); the report lists the repeat with its
reason. On a run of real ddsperf output whose second repeat half-measured and failed."""

from __future__ import annotations

import io
import json

import pandas as pd
import pytest

from k8sdds.analysis import load, tables
from k8sdds.reparse import reparse

from .cli_support import Done, invoke
from .conftest import fake_run

REASON = "sub0: the subscriber stopped after 2 of 10 s"


@pytest.fixture
def run(tmp_path):
    """Two repeats of the 1 KiB throughput test; repeat 2 failed, and the rows it parsed
    (kept on disk) read ten times lower, as a repeat cut short would."""
    run = fake_run(tmp_path / "runs", repeats=2)
    reparse(run.path)
    df = pd.read_csv(run.results_path)
    half = (df["repeat"] == 2) & (df["metric"] == "throughput_mbps")
    df.loc[half, "value"] /= 10
    df.to_csv(run.results_path, index=False)
    manifest = json.loads((run.path / "manifest.json").read_text())
    manifest["repeats"]["test-1/rep-2"].update(status="failed", reason=REASON)
    (run.path / "manifest.json").write_text(json.dumps(manifest))
    return run


def _mean(runs: load.Runs) -> float:
    thr = tables.throughput(runs)
    return float(thr[thr.data_len == 1024]["mean"].iloc[0])


def test_a_failed_repeat_s_rows_are_kept_on_disk_but_left_out_of_the_summary(run):
    on_disk = pd.read_csv(run.results_path)
    assert (on_disk["repeat"] == 2).any()  # kept for the record
    good = load.load([run.path])
    assert not ((good.results.test == 1) & (good.results.repeat == 2)).any()
    assert ((good.results.test == 2) & (good.results.repeat == 2)).any()  # its own test ok
    assert good.excluded == int(((on_disk.test == 1) & (on_disk.repeat == 2)).sum()) > 0
    everything = load.load([run.path], include_failed=True)
    assert everything.excluded == 0
    # the half-measured repeat would have pulled the mean down by almost half
    assert _mean(everything) < 0.6 * _mean(good)
    assert tables.throughput(good)[lambda t: t.data_len == 1024]["repeats"].iloc[0] == 1


def test_failed_repeats_are_pure_to_find():
    manifest = {"repeats": {"test-1/rep-2": {"status": "failed"},
                            "test-3/rep-1": {"status": "done"}, "odd": {"status": "failed"}}}
    assert load.failed_repeats(manifest) == {(1, 2)}


def _cli(*args: str) -> Done:
    return invoke(*args)


def test_export_and_report_leave_them_out_unless_asked_and_the_report_lists_them(run,
                                                                                  tmp_path):
    out = _cli("results", str(run.path))
    assert out.returncode == 0, out.stderr
    exported = pd.read_csv(io.StringIO(out.stdout))
    assert not ((exported.test == 1) & (exported.repeat == 2)).any()
    asked = pd.read_csv(io.StringIO(_cli("results", str(run.path), "--include-failed").stdout))
    assert ((asked.test == 1) & (asked.repeat == 2)).any()

    done = _cli("report", str(run.path), "--out", str(tmp_path / "report"))
    assert done.returncode == 0, done.stderr
    page = (tmp_path / "report" / "report.html").read_text()
    assert REASON in page and "test-1/rep-2" in page
    assert "are left out of every figure and table" in page


def test_the_database_holds_only_good_repeats_unless_asked(run, tmp_path):
    from sqlalchemy import select

    from k8sdds.serve import store
    from k8sdds.serve.schema import results

    for include, db in ((False, "good.db"), (True, "all.db")):
        engine = store.open_db(f"sqlite:///{tmp_path / db}")
        assert store.add_run(engine, run.path, include_failed=include)
        with engine.connect() as conn:
            keys = {(r.test, r.repeat) for r in conn.execute(
                select(results.c.test, results.c.repeat))}
        assert ((1, 2) in keys) is include and (2, 2) in keys
