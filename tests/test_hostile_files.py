"""Hostile files beyond the schedule: testbed specs, inventories, known_hosts, run directories
(manifest, results, logs). Each is refused with exit 2, one line naming the file, no traceback,
nothing written; a run directory's links and FIFOs are never followed or opened. A corpus per
file kind is in tests/fixtures/hostile; the YAML loaders and the run directory reader also
get arbitrary input (hypothesis)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from k8sdds import guarded
from k8sdds.cluster import inventory
from k8sdds.errors import RunDirError, UserError
from k8sdds.results import RunDir
from k8sdds.testbed import spec

from .cli_support import Done, invoke
from .conftest import FIXTURES, fake_run

CORPUS = FIXTURES / "hostile"
PROFILE = dict(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)


def _cli(*args: str, timeout: float | None = None) -> Done | subprocess.CompletedProcess:
    """The command in this process; with a timeout (a FIFO's tests: a regression would block)
    in a child process that the timeout ends."""
    if timeout is None:
        return invoke(*args, env={"COLUMNS": "200"})
    return subprocess.run([sys.executable, "-m", "k8sdds", *args], capture_output=True,
                          text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "200",
                               "PYTHONPATH": str(Path(__file__).parent.parent)})


def _refused(done: Done | subprocess.CompletedProcess, *words: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr[-500:])
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    for word in words:
        assert word in done.stderr, done.stderr


# ---- YAML: specs and inventories -------------------------------------------------------
@pytest.mark.parametrize("name, words", [
    ("spec-alias-bomb.yaml", ["anchors and aliases", "line "]),
    ("spec-deep.yaml", ["nested more than 32 levels", "line 1"]),
    ("spec-not-utf8.yaml", ["line 3: not UTF-8 (byte 0xff)"]),
    ("spec-list.yaml", ["expected a mapping"]),
])
def test_hostile_testbed_specs_are_refused_at_once(name, words, tmp_path):
    started = time.monotonic()
    done = _cli("testbed", "up", "--testbed-spec", str(CORPUS / name), "--testbed", "hx")
    _refused(done, str(CORPUS / name), *words)
    assert time.monotonic() - started < 30  # no expansion, no minutes of parsing


@pytest.mark.parametrize("name, words", [
    ("inventory-alias-bomb.yaml", ["anchors and aliases"]),
    ("inventory-deep.yaml", ["nested more than 32 levels"]),
    ("inventory-injected-address.yaml", ["field address", "'192.0.2.11;id'"]),
    ("inventory-option-address.yaml", ["field address", "'-oProxyCommand=id'"]),
])
def test_hostile_inventories_are_refused_naming_the_field(name, words, tmp_path):
    done = _cli("cluster", "check", "--inventory", str(CORPUS / name), "--log-dir",
                str(tmp_path / "logs"))
    _refused(done, str(CORPUS / name), *words)
    assert not (tmp_path / "logs").exists()  # refused before anything was written


def test_a_spec_name_and_the_command_lines_must_agree(tmp_path):
    path = tmp_path / "edge.yaml"
    path.write_text("name: edge\nworkers: 2\n")
    with pytest.raises(spec.SpecError, match="names the testbed 'edge', the command line 'lab'"):
        spec.load(path, name="lab")
    assert spec.load(path).name == "edge"  # no --name: the spec's own
    assert spec.load(path, name="edge").name == "edge"


YAML_TEXT = st.text(alphabet=st.sampled_from(list("ab:-[]{}&*!|>'\"\n #,.?1")), max_size=300)


@settings(max_examples=400, **PROFILE)
@given(YAML_TEXT)
def test_the_yaml_loaders_on_arbitrary_text(tmp_path, text):
    path = tmp_path / "f.yaml"
    path.write_text(text)
    for load, error in ((spec.load, spec.SpecError), (inventory.load, inventory.InventoryError)):
        try:
            load(path)
        except error as exc:
            assert str(path) in str(exc)


def test_known_hosts_that_is_a_directory_is_one_clear_error(tmp_path):
    invf = tmp_path / "inv.yaml"
    invf.write_text("hosts:\n  - {name: a, address: 127.0.0.1, port: 1, role: control-plane, "
                    "user: pi}\n")
    (tmp_path / "kh").mkdir()
    done = _cli("cluster", "check", "--inventory", str(invf), "--known-hosts",
                str(tmp_path / "kh"), "--log-dir", str(tmp_path / "logs"))
    assert "Traceback" not in done.stderr and done.returncode == 1
    assert f"known_hosts {tmp_path / 'kh'}: a directory" in " ".join(done.stdout.split())


def test_a_dry_run_lists_only_its_own_commands(tmp_path):
    invf = tmp_path / "inv.yaml"
    invf.write_text("hosts:\n  - {name: a, address: 10.0.0.1, role: control-plane, user: pi}\n")
    args = ("cluster", "reset", "--inventory", str(invf), "--dry-run", "--log-dir",
            str(tmp_path / "logs"))
    first, second = _cli(*args), _cli(*args)
    assert first.returncode == second.returncode == 0
    assert first.stdout == second.stdout  # not the first one's commands again
    log = (tmp_path / "logs" / "a.log").read_text()
    assert log.count("kubeadm reset") == 2 * first.stdout.count("kubeadm reset") > 0


# ---- the guarded reading path -----------------------------------------------------------
def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "schedule.csv"
    os.mkfifo(fifo)
    done = _cli("run", "--sch", str(fifo), "--out", str(tmp_path / "out"), timeout=30)
    _refused(done, "a FIFO, not a regular file")


def test_sizes_and_links(tmp_path):
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    with pytest.raises(guarded.FileRefused, match="101 bytes; a log may have at most 100"):
        guarded.read_bytes(big, "log", limit=100)
    link = tmp_path / "link"
    link.symlink_to(big)
    assert guarded.read_bytes(link, "log") == b"x" * 101  # a file the user names: followed
    with pytest.raises(guarded.FileRefused, match="a symbolic link"):
        guarded.read_bytes(link, "log", follow=False)
    with pytest.raises(guarded.FileRefused, match="a directory"):
        guarded.read_bytes(tmp_path, "log")


# ---- run directories ----------------------------------------------------------------------
@pytest.mark.parametrize("name, words", [
    ("manifest-list.json", ["manifest.json"]),
    ("manifest-wrong-types.json", ["manifest.json"]),
    ("manifest-future.json", ["schema_version"]),
    ("manifest-deep.json", ["manifest.json"]),
])
def test_damaged_manifests_are_refused_by_file_and_field(name, words, tmp_path):
    run = fake_run(tmp_path)
    shutil.copy(CORPUS / name, run.manifest_path)
    before = sorted(p.name for p in run.path.rglob("*"))
    for command in (("parse", str(run.path)), ("report", str(run.path))):
        _refused(_cli(*command), *words)
    assert sorted(p.name for p in run.path.rglob("*")) == before  # nothing written


@pytest.mark.parametrize("name, words", [
    ("results-broken-row.csv", ["results.csv", "not a results table"]),
    ("results-missing-column.csv", ["results.csv", "no column value"]),
    ("results-not-utf8.csv", ["results.csv, line 3: not UTF-8"]),
    ("results-overflow.csv", ["results.csv, line 2", "not a finite number"]),
])
def test_damaged_results_are_refused_by_file_and_line(name, words, tmp_path):
    run = fake_run(tmp_path)
    shutil.copy(CORPUS / name, run.results_path)
    _refused(_cli("report", str(run.path), "--out", str(tmp_path / "report")), *words)
    assert not (tmp_path / "report").exists()


def _interrupted_run(tmp_path):
    """A run stopped after its first test: test 2 is pending."""
    from k8sdds.results import RepeatKey

    run = fake_run(tmp_path)
    manifest = run.read_manifest()
    del manifest.repeats[RepeatKey(2, 1)]
    manifest.status = "interrupted"
    run.write_manifest(manifest)
    shutil.rmtree(run.repeat_dir(RepeatKey(2, 1)))
    return run


def test_resume_and_parse_refuse_a_link_in_the_run_directory(tmp_path):
    run = _interrupted_run(tmp_path)
    victim = tmp_path / "victim"  # stands for /etc/passwd
    victim.write_text("precious\n")
    pending = run.path / "test-2" / "rep-1"
    pending.mkdir(parents=True)
    (pending / "pub.log").symlink_to(victim)
    for command in (("run", "--resume", str(run.path)), ("parse", str(run.path))):
        _refused(_cli(*command), "test-2/rep-1/pub.log: a symbolic link in a run directory")
    assert victim.read_text() == "precious\n"
    (pending / "pub.log").unlink()
    (run.path / "test-2").rename(tmp_path / "elsewhere")
    (run.path / "test-2").symlink_to(tmp_path / "elsewhere")  # a linked directory, too
    _refused(_cli("run", "--resume", str(run.path)), "test-2: a symbolic link")


def test_parse_refuses_a_fifo_instead_of_blocking(tmp_path):
    run = fake_run(tmp_path)
    log = run.path / "test-1" / "rep-1" / "sub0.log"
    log.unlink()
    os.mkfifo(log)
    _refused(_cli("parse", str(run.path), timeout=30), "sub0.log: a FIFO in a run directory")


@settings(max_examples=200, **PROFILE)
@given(st.binary(max_size=600))
def test_the_run_directory_reader_on_arbitrary_manifests(tmp_path, raw):
    (tmp_path / "manifest.json").write_bytes(raw)
    try:
        RunDir(tmp_path).read_manifest()
    except RunDirError as exc:
        assert "manifest.json" in str(exc)


def test_every_refusal_is_a_user_error():
    assert issubclass(guarded.FileRefused, UserError)


def test_resume_refuses_to_move_a_run_to_another_testbed(tmp_path):
    run = _interrupted_run(tmp_path)
    manifest = run.read_manifest()
    manifest.backend_options = {"testbed": "lab", "nodes": 4}
    run.write_manifest(manifest)
    _refused(_cli("run", "--resume", str(run.path), "--testbed", "other"),
             "--testbed other: the run in", "ran with lab")


def test_a_huge_spec_is_refused_before_its_nodes_are_read(tmp_path):
    path = tmp_path / "many.yaml"
    path.write_text("nodes:\n" + "".join(f"  - {{name: n{i}}}\n" for i in range(10_000)))
    started = time.monotonic()
    with pytest.raises(spec.SpecError, match="a cluster has 2 to 64 nodes, not 10000"):
        spec.load(path)
    assert time.monotonic() - started < 30
    path.write_text("workers: 1000000000\n")
    with pytest.raises(spec.SpecError, match="field 'workers'"):
        spec.load(path)
    path.write_text("profile: [1, 2]\nworkers: 2\n")
    with pytest.raises(spec.SpecError, match=f"{path}, field 'profile'"):
        spec.load(path)


def test_parse_says_which_logs_it_could_not_read(tmp_path):
    run = fake_run(tmp_path)
    (run.path / "test-2" / "rep-1" / "sub0.log").unlink()
    done = _cli("parse", str(run.path))
    assert done.returncode == 0, done.stderr
    assert "not read: test-2/rep-1 sub0: no log sub0.log" in done.stderr
