"""The run directory's owner: typed manifest, repeat keys, one error path, schema versions
and their upgrades (on a version-1 run directory written by k8sdds 0.1.0 before version 2)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace

import pandas as pd
import pytest

from k8sdds.errors import RunDirError
from k8sdds.model import Test
from k8sdds.reparse import reparse
from k8sdds.results import (
    SCHEMA_VERSION,
    ManifestError,
    RepeatEntry,
    RepeatKey,
    RunDir,
    RunManifest,
    encode_test,
)

from .conftest import FIXTURES

V1 = FIXTURES / "rundir-v1"  # a real run: 2 rows x host, flannel-hostgw, ddsperf 0.10.2


def _test(**over) -> Test:
    base = Test(row=0, line=2, data_len=1024, multicast=False, num_subscribers=1,
                best_effort=False, batch_size=0, datapath="host", number=1)
    return replace(base, **over)


def _v1_copy(tmp_path):
    target = tmp_path / V1.name
    shutil.copytree(V1, target)
    return RunDir(target)


def test_repeat_key_is_the_directory_and_parses_back():
    key = RepeatKey(3, 12)
    assert str(key) == "test-3/rep-12" and RepeatKey.parse(str(key)) == key
    assert RunDir("/x").repeat_dir(key).as_posix() == "/x/test-3/rep-12"
    for bad in ("test-3", "test-a/rep-1", "test-1/rep-1/x", "../test-1/rep-1"):
        with pytest.raises(ManifestError, match="test-N/rep-R"):
            RepeatKey.parse(bad)


def test_manifest_round_trips(tmp_path):
    run = RunDir.create(tmp_path, "m")
    tests = [_test(), _test(number=2, datapath="flannel-vxlan", repeats=2)]
    manifest = RunManifest(run_id="m", backend="emulated", tests=tests,
                        backend_options={"testbed": "tb"},
                        repeats={RepeatKey(2, 1): RepeatEntry("failed", "sub0: no log",
                                                              placement={"pub": "node1"})})
    run.write_manifest(manifest)
    back = run.read_manifest()
    assert back == manifest
    on_disk = json.loads(run.manifest_path.read_text())
    assert on_disk["schema_version"] == SCHEMA_VERSION
    assert on_disk["repeats"]["test-2/rep-1"]["reason"] == "sub0: no log"
    assert [(t.number, reps) for t, reps in back.pending()] == [(1, [1]), (2, [2])]


def test_a_version_1_run_directory_is_upgraded_when_read(tmp_path):
    assert json.loads((V1 / "manifest.json").read_text())["schema_version"] == 1
    manifest = RunDir(V1).read_manifest()
    assert manifest.schema_version == SCHEMA_VERSION == 3
    assert manifest.backend_options == {"testbed": "v1fix"}  # from the cluster it recorded
    assert [t.datapath for t in manifest.tests] == ["host", "host", "flannel-hostgw",
                                                     "flannel-hostgw"]
    assert sorted(manifest.repeats) == [RepeatKey(n, 1) for n in range(1, 5)]
    assert all(e.status == "done" and e.placement for e in manifest.repeats.values())
    assert not list(r for _, reps in manifest.pending() for r in reps)


def test_a_version_2_fingerprint_names_its_cpu_count_as_the_environment_does():
    """Version 2's node fingerprints said `cpus`; read today, `cpu_count` (as `environment`
    and compare's check name it), every other field as it was."""
    from k8sdds.results.manifest import upgrade

    old = {"schema_version": 2, "run_id": "r", "backend": "emulated", "tests": [],
           "fingerprints": {"flannel-vxlan": {"node1": {"cpu_model": "AMD EPYC", "cpus": 2,
                                                        "kernel": "6.18"}},
                            "host": {"node1": {"error": "not read"}}}}
    got = upgrade(old)
    assert got["schema_version"] == 3
    assert got["fingerprints"] == {
        "flannel-vxlan": {"node1": {"cpu_model": "AMD EPYC", "cpu_count": 2, "kernel": "6.18"}},
        "host": {"node1": {"error": "not read"}}}
    assert old["fingerprints"]["flannel-vxlan"]["node1"]["cpus"] == 2  # the input untouched


def test_an_upgraded_run_is_written_back_at_the_current_version(tmp_path):
    run = _v1_copy(tmp_path)
    run.write_manifest(run.read_manifest())
    data = json.loads(run.manifest_path.read_text())
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["backend_options"] == {"testbed": "v1fix"}
    assert RunDir(run.path).read_manifest().tests == RunDir(V1).read_manifest().tests


def test_parse_rebuilds_the_results_of_a_version_1_run(tmp_path):
    run = _v1_copy(tmp_path)
    before = pd.read_csv(run.results_path)
    run.results_path.unlink()
    assert reparse(run.path) == len(before)
    after = pd.read_csv(run.results_path)
    key = ["test", "repeat", "role", "kind", "metric"]
    summary = before[before.kind == "summary"].sort_values(key).reset_index(drop=True)
    again = after[after.kind == "summary"].sort_values(key).reset_index(drop=True)
    assert summary[key + ["value"]].equals(again[key + ["value"]])


@pytest.mark.parametrize("mangle, message", [
    (lambda m: [m], "not an object"),
    (lambda m: {**m, "schema_version": 99}, "newer than this k8sdds"),
    (lambda m: {**m, "schema_version": "1"}, "not a version number"),
    (lambda m: {**m, "tests": {}}, "tests is missing or not a list"),
    (lambda m: {**m, "tests": [{**m["tests"][0], "data_len": "big"}]}, "field data_len"),
    (lambda m: {**m, "tests": [{**m["tests"][0], "multicast": 1}]}, "field multicast"),
    (lambda m: {**m, "tests": [{**m["tests"][0], "colour": "red"}]}, "unknown field"),
    (lambda m: {**m, "repeats": {"test-1": {"status": "done"}}}, "test-N/rep-R"),
    (lambda m: {**m, "repeats": {"test-9/rep-1": {"status": "done"}}}, "no test 9"),
    (lambda m: {**m, "repeats": {"test-1/rep-1": {"status": "great"}}}, "status 'great'"),
    (lambda m: {**m, "status": "dancing"}, "status 'dancing'"),
    (lambda m: {k: v for k, v in m.items() if k != "backend"}, "backend is missing"),
])
def test_a_damaged_manifest_names_the_file_and_the_field(tmp_path, mangle, message):
    run = _v1_copy(tmp_path)
    run.manifest_path.write_text(json.dumps(mangle(json.loads(run.manifest_path.read_text()))))
    with pytest.raises(RunDirError, match=message) as err:
        run.read_manifest()
    assert str(run.manifest_path) in str(err.value)


def test_unreadable_manifests_are_one_clear_error(tmp_path):
    with pytest.raises(RunDirError, match="not a run directory .it does not exist"):
        RunDir(tmp_path / "absent").read_manifest()
    with pytest.raises(RunDirError, match="not a run directory"):
        RunDir(tmp_path).read_manifest()
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(RunDirError, match="not valid JSON"):
        RunDir(tmp_path).read_manifest()
    (tmp_path / "manifest.json").write_bytes(b"\xff\xfe")
    with pytest.raises(RunDirError, match="line 1: not UTF-8 .byte 0xff"):
        RunDir(tmp_path).read_manifest()


def test_tests_keep_every_field_through_the_manifest():
    test = _test(transport="tls", secure=True, pub_rate=5, discovery="peers", streams=2)
    assert RunManifest.from_dict(RunManifest(run_id="r", backend="ssh", tests=[test])
                              .to_dict()).tests == [test]
    assert set(encode_test(test)) == set(Test.__dataclass_fields__)
