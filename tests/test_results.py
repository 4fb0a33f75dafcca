"""Result writing: atomic files, the tidy schema, and `k8sdds parse` on a run directory."""

from __future__ import annotations

import csv
import os

import pytest

from k8sdds.reparse import reparse
from k8sdds.results import COLUMNS, RunDir, atomic_write

from .conftest import fake_run


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path):
    target = tmp_path / "f.json"
    atomic_write(target, "one")
    atomic_write(target, "two")
    assert target.read_text() == "two"
    assert os.listdir(tmp_path) == ["f.json"]


def test_atomic_write_keeps_old_content_when_writing_fails(tmp_path):
    target = tmp_path / "f.csv"
    atomic_write(target, "old")

    with pytest.raises(TypeError):
        atomic_write(target, object())  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert os.listdir(tmp_path) == ["f.csv"]


def test_append_results_writes_header_once_and_keeps_column_order(tmp_path):
    run = RunDir.create(tmp_path, "r1")
    row = {c: "x" for c in COLUMNS}
    run.append_results([row])
    run.append_results([{**row, "value": 2.5, "multicast": True, "t": None}])
    with open(run.results_path) as fh:
        lines = list(csv.reader(fh))
    assert lines[0][: len(COLUMNS)] == COLUMNS
    assert len(lines) == 3
    last = dict(zip(lines[0], lines[2], strict=True))
    assert last["value"] == "2.5" and last["multicast"] == "true" and last["t"] == ""


def test_a_repeats_rows_are_appended_without_rewriting_the_file(tmp_path):
    run = RunDir.create(tmp_path, "r1")
    row = {c: "x" for c in COLUMNS}
    run.append_results([row])
    before = run.results_path.read_bytes()
    inode = run.results_path.stat().st_ino
    run.append_results([{**row, "value": 3}])
    after = run.results_path.read_bytes()
    assert run.results_path.stat().st_ino == inode  # the same file, not a new one
    assert after.startswith(before) and after.count(b"\n") == 3


def test_a_torn_last_line_is_never_read_and_is_cut_by_the_next_append(tmp_path):
    run = RunDir.create(tmp_path, "r1")
    row = {c: "x" for c in COLUMNS}
    run.append_results([row])
    whole = run.results_path.read_text()
    with open(run.results_path, "a") as fh:  # a writer killed inside its write
        fh.write("r1,1,1,emul")
    assert run.read_results_text() == whole
    run.append_results([{**row, "value": 4}])
    text = run.results_path.read_text()
    assert "emul\n" not in text and "emul" not in text.splitlines()[-1]
    assert text.startswith(whole) and len(text.splitlines()) == 3


def test_a_column_the_schema_lacks_is_refused_not_dropped():
    from k8sdds.results.table import rows_to_csv

    with pytest.raises(ValueError, match="new_field"):
        rows_to_csv([{c: "x" for c in COLUMNS} | {"new_field": 1}], header=True)


def test_run_dir_refuses_to_overwrite(tmp_path):
    RunDir.create(tmp_path, "same")
    with pytest.raises(FileExistsError):
        RunDir.create(tmp_path, "same")


def test_reparse_builds_tidy_table_and_is_idempotent(tmp_path):
    run = fake_run(tmp_path)
    n = reparse(run.path)
    first = run.results_path.read_bytes()
    assert reparse(run.path) == n
    assert run.results_path.read_bytes() == first
    with open(run.results_path) as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == n > 0
    assert set(COLUMNS) <= set(rows[0])
    thr = [r for r in rows if r["test"] == "1" and r["role"] == "sub0" and r["kind"] == "summary"
           and r["metric"] == "throughput_mbps"]
    assert len(thr) == 1 and float(thr[0]["value"]) > 100
    assert thr[0]["datapath"] == "flannel-hostgw" and thr[0]["path"] == "pod-pod-cross-node"
    assert thr[0]["node"] == "node2" and thr[0]["unit"] == "Mb/s" and thr[0]["t"] == ""
    lat = {r["metric"]: float(r["value"]) for r in rows
           if r["test"] == "2" and r["kind"] == "summary"}
    assert lat["latency_us_p50"] <= lat["latency_us_p90"] <= lat["latency_us_p99"]
    samples = [r for r in rows if r["kind"] == "sample"]
    assert samples and all(r["t"] != "" for r in samples)


def test_reparse_of_a_directory_without_manifest_is_a_clear_error(tmp_path):
    from k8sdds.errors import UserError

    with pytest.raises(UserError, match="not a run directory"):
        reparse(tmp_path)


def test_appending_to_results_of_an_older_version_keeps_columns_aligned(tmp_path):
    from k8sdds.results import COLUMNS, EXTRA_COLUMNS, RunDir
    run = RunDir(tmp_path)
    newest = EXTRA_COLUMNS[-1]
    old_header = COLUMNS + EXTRA_COLUMNS[:-1]  # before the newest column
    old_row = dict.fromkeys(old_header, "x") | {"metric": "lost", "value": "0"}
    run.results_path.write_text(",".join(old_header) + "\n" +
                                ",".join(old_row[c] for c in old_header) + "\n")
    run.append_results([{**old_row, "metric": "throughput_mbps", "value": 5.0,
                         newest: "y"}])
    import pandas as pd
    df = pd.read_csv(run.results_path)
    assert list(df.columns) == COLUMNS + EXTRA_COLUMNS
    assert df.metric.tolist() == ["lost", "throughput_mbps"]
    assert df["value"].tolist() == [0, 5.0] and df[newest].isna().tolist() == [True, False]


def test_datapath_usage_in_percent_of_a_core():
    from k8sdds.records import datapath_usage
    parsed = datapath_usage('{"wall_s": 2.0, "datapath_cpu_s": 0.5, "softirq_s": 0.1}')
    got = {v.metric: v.value for v in parsed.values}
    assert got == {"datapath_cpu_pct": 25.0, "softirq_pct": 5.0}
    assert datapath_usage("{not json").values == ()
    assert datapath_usage('{"wall_s": 0}').values == ()
    assert datapath_usage('{"wall_s": 1, "softirq_s": -0.2}').values[0].value == 0.0


def test_each_roles_architecture_comes_from_the_nodes_or_the_bare_hosts():
    from k8sdds.records import node_arches

    # the kubernetes backend's manifest names nodes, the ssh backend's its bare hosts
    assert node_arches({"nodes": [{"name": "pi2", "arch": "arm64"}]}) == {"pi2": "arm64"}
    assert node_arches({"hosts": [{"name": "h2", "arch": "amd64", "role": "worker"},
                                  {"name": "pi1", "arch": "arm"}], "workdir": "/tmp/x"}) == {
        "h2": "amd64", "pi1": "arm"}
    assert node_arches({}) == {}
