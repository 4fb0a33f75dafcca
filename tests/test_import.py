"""`k8sdds import k8sdds-data` on a small K8sDDS tree built from the real K8sDDS logs."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from k8sdds.errors import UserError
from k8sdds.importer import configuration, import_tree

from .cli_support import invoke
from .conftest import FIXTURES

R = FIXTURES / "rtiperftest"


def _tree(root: Path) -> Path:
    """throughput-test/flannel-udp (rows 0 and 1), latency-test/weave-tls (row 2, plus a test
    whose parameters Perftest refused), schedule.csv at the top, as K8sDDS kept them."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(FIXTURES / "schedule-k8sdds.csv", root / "schedule.csv")
    layout = {
        "throughput-test/flannel-udp/test-0": {"pub": "legacy-throughput-pub-loaded-latency.log",
                                               "sub0": "legacy-throughput-sub.log"},
        "throughput-test/flannel-udp/test-1": {"pub": "legacy-throughput-pub-loaded-latency.log",
                                               "sub0": "legacy-throughput-sub5-of-8.log"},
        "latency-test/weave-tls/test-2": {"pub": "csv-latency-pub-tls.log",
                                          "sub": "legacy-latency-sub.log"},
        "latency-test/weave-tls/test-11": {"pub": "failed-batching-in-latency-test.log"},
    }
    for folder, logs in layout.items():
        (root / folder).mkdir(parents=True)
        for role, name in logs.items():
            shutil.copy(R / name, root / folder / f"rtiperftest-{role}.log")
    return root


FOLDERS = {
    "flannel-udp": ("flannel-vxlan", "udp", ""), "kuberouter-tcp": ("kube-router", "tcp", ""),
    "weave-tcp-encrypted": ("weave-encrypted", "tcp", ""),
    "weave-udp-secure": ("weave", "udp", "secure"),
    # the published tree's forms: <cni>-<variant>-<transport>
    "flannel-hostgw-dds-secure-tcp": ("flannel-hostgw", "tcp", "secure"),
    "kube-router-dds-secure-udp": ("kube-router", "udp", "secure"),
    "weavenet-encryption-udp": ("weave-encrypted", "udp", ""),
    "weavenet-tls": ("weave", "tls", ""), "hostnetwork-tcp": ("host", "tcp", ""),
}


def test_folder_names():
    assert {folder: configuration(folder) for folder in FOLDERS} == FOLDERS
    for folder, refusal in (("cilium-udp", "unknown CNI 'cilium'"),
                            ("flannel", "expected <cni>.-variant.-<transport>"),
                            ("flannel-vxlan-encryption-udp", "unknown variant 'encryption'")):
        with pytest.raises(UserError, match=refusal):
            configuration(folder)


def test_import_makes_run_directories_that_report_works_on(tmp_path):
    tree = _tree(tmp_path / "k8sdds-data")
    (tmp_path / "k8sdds-data" / "latency-test" / "weave-tls").mkdir(exist_ok=True)
    runs = import_tree(tree, tmp_path / "logs")
    names = sorted(r.name for r in runs)
    assert names == ["k8sdds-latency-test-weave-tls", "k8sdds-throughput-test-flannel-udp"]
    thr_run = tmp_path / "logs" / "k8sdds-throughput-test-flannel-udp"
    df = pd.read_csv(thr_run / "results.csv")
    s = df[(df.kind == "summary") & (df.metric == "throughput_mbps")].sort_values("test")
    # test-1 reuses a 64-byte log where the schedule's row says 256: the header wins, and the
    # run records what the schedule said
    assert s.value.tolist() == [2.1, 2.5] and s.data_len.tolist() == [64, 64]
    thr_manifest = json.loads((thr_run / "manifest.json").read_text())
    [said] = thr_manifest["imported"]["header_over_schedule"]
    assert said.startswith("test-1: data_len 256 in ") and "64 in the log's header" in said
    assert set(s.datapath) == {"flannel-vxlan"} and set(s.engine) == {"rtiperftest"}
    assert (thr_run / "test-1" / "rep-1" / "sub0.log").exists()  # raw logs kept
    lat_run = tmp_path / "logs" / "k8sdds-latency-test-weave-tls"
    manifest = json.loads((lat_run / "manifest.json").read_text())
    assert manifest["repeats"]["test-3/rep-1"]["status"] == "done"
    failed = manifest["repeats"]["test-12/rep-1"]
    assert failed["status"] == "failed"
    assert "Batching cannot be used in a Latency test." in failed["reason"]
    lat = pd.read_csv(lat_run / "results.csv")
    p50 = lat[(lat.metric == "latency_us_p50") & (lat.kind == "summary")]
    # the study's log prints a one-way p50 of 1092 us: stored as the round trip
    assert p50.value.tolist() == [2 * 1092] and set(p50.transport) == {"tls"}
    assert set(p50.definition) == {"round trip"}
    assert set(p50.latency_test) == {True}
    # and the report works on old data as on new
    out = tmp_path / "report"
    proc = invoke("report", str(thr_run), str(lat_run), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    page = (out / "report.html").read_text()
    assert "flannel-vxlan" in page and "Batching cannot be used" in page


def test_import_errors_are_clear(tmp_path):
    with pytest.raises(UserError, match="no throughput-test or latency-test"):
        import_tree(tmp_path, tmp_path / "logs")
    tree = _tree(tmp_path / "t")
    (tree / "schedule.csv").unlink()
    shutil.rmtree(tree / "latency-test" / "weave-tls" / "test-2")  # left: a refused test
    with pytest.raises(UserError, match=r"weave-tls: no test's logs say what it measured "
                       r"\(test-11: its logs do not say data_len, num_subscribers \(Batching "
                       r"cannot be used in a Latency test\..*give a schedule with --schedule"):
        import_tree(tree, tmp_path / "logs")
    proc = invoke("import", "k8sdds-data", str(tmp_path / "nowhere"))
    assert proc.returncode == 2 and "not a directory" in proc.stderr


def test_import_never_follows_a_link_or_opens_a_fifo_in_the_tree(tmp_path):
    tree = _tree(tmp_path / "k8sdds-data")
    secret = tmp_path / "secret"
    secret.write_text("outside the tree\n")
    test0 = tree / "throughput-test" / "flannel-udp" / "test-0"
    (test0 / "rtiperftest-sub0.log").unlink()
    (test0 / "rtiperftest-sub0.log").symlink_to(secret)
    test1 = tree / "throughput-test" / "flannel-udp" / "test-1"
    (test1 / "rtiperftest-sub0.log").unlink()
    os.mkfifo(test1 / "rtiperftest-sub0.log")
    [run, _] = sorted(import_tree(tree, tmp_path / "logs"), key=lambda p: "latency" in p.name)
    manifest = json.loads((run / "manifest.json").read_text())
    for key, what in (("test-1/rep-1", "a symbolic link"), ("test-2/rep-1", "a FIFO")):
        entry = manifest["repeats"][key]
        assert entry["status"] == "failed" and what in entry["reason"], entry
    assert not any("outside the tree" in p.read_text() for p in run.rglob("*.log"))


def test_the_report_of_an_imported_tree_draws_each_protection(tmp_path):
    tree = _tree(tmp_path / "k8sdds-data")
    tls = tree / "throughput-test" / "weavenet-tls" / "test-2"  # row 2: 1024 B
    tls.mkdir(parents=True)
    shutil.copy(R / "csv-throughput-sub-tls.log", tls / "rtiperftest-sub0.log")
    runs = import_tree(tree, tmp_path / "logs")
    out = tmp_path / "report"
    # the TLS test has no publisher's log, so it is a failed repeat: its subscriber's rows
    # count only when asked for
    proc = invoke("report", *[str(r) for r in runs if "throughput" in r.name], "--out",
                  str(out), "--include-failed")
    assert proc.returncode == 0, proc.stderr
    assert (out / "protection.png").stat().st_size > 10_000
    svg = (out / "protection.svg").read_text()
    assert 'id="datapath-weave"' in svg and 'id="datapath-flannel-vxlan"' in svg
    assert "per transport and DDS Security" in (out / "report.html").read_text()


def test_a_bad_folder_is_skipped_and_the_rest_imported_once(tmp_path):
    tree = _tree(tmp_path / "k8sdds-data")
    (tree / "throughput-test" / "cilium-udp" / "test-0").mkdir(parents=True)
    (tree / "throughput-test" / ".DS_Store").write_text("")
    shutil.copy(R / "legacy-throughput-sub.log",
                tree / "throughput-test" / "flannel-udp" / "rtiperftest-sub0.log")  # stray
    out = tmp_path / "logs"
    proc = invoke("import", "k8sdds-data", str(tree), "--out", str(out))
    assert proc.returncode == 1, proc.stderr
    assert "skipped throughput-test/cilium-udp: cilium-udp: unknown CNI 'cilium'" in \
        " ".join(proc.stderr.split())
    assert sorted(p.name for p in out.iterdir()) == [
        "k8sdds-latency-test-weave-tls", "k8sdds-throughput-test-flannel-udp"]  # no partial
    manifest = json.loads((out / "k8sdds-throughput-test-flannel-udp" / "manifest.json")
                          .read_text())
    assert manifest["imported"]["skipped"] == [
        "rtiperftest-sub0.log: outside any test-<i> folder, so no test to give it"]
    again = invoke("import", "k8sdds-data", str(tree), "--out", str(out))
    assert again.returncode == 1 and "exists already" in again.stderr
    assert sorted(p.name for p in out.iterdir()) == [
        "k8sdds-latency-test-weave-tls", "k8sdds-throughput-test-flannel-udp"]  # never twice


def test_the_published_log_names_and_a_schedule_given_for_folders_without_one(tmp_path):
    tree = _tree(tmp_path / "k8sdds-data")
    test0 = tree / "throughput-test" / "flannel-udp" / "test-0"
    (test0 / "rtiperftest-pub.log").rename(test0 / "rtiperftest-pub0.log")  # as published
    (tree / "schedule.csv").rename(tmp_path / "elsewhere.csv")
    runs = import_tree(tree, tmp_path / "logs", schedule=tmp_path / "elsewhere.csv")
    thr = next(r for r in runs if "throughput" in r.name)
    manifest = json.loads((thr / "manifest.json").read_text())
    assert manifest["repeats"]["test-1/rep-1"]["status"] == "done"
    assert manifest["imported"]["tests_from"] == "the schedule"
    assert (thr / "test-1" / "rep-1" / "pub.log").exists()
    lat = json.loads((next(r for r in runs if "latency" in r.name) / "manifest.json")
                     .read_text())
    assert lat["repeats"]["test-12/rep-1"]["status"] == "failed"  # test-11: row 11 says it


def test_with_no_schedule_the_tests_come_from_the_logs_headers(tmp_path):
    """Perftest 3.x prints its test in every log: no schedule is needed for what it printed;
    a test whose logs print nothing of it (refused before its header) is listed, not lost."""
    tree = _tree(tmp_path / "k8sdds-data")
    (tree / "schedule.csv").unlink()
    runs = {r.name: r for r in import_tree(tree, tmp_path / "logs")}
    thr = runs["k8sdds-throughput-test-flannel-udp"]
    manifest = json.loads((thr / "manifest.json").read_text())
    assert manifest["imported"]["tests_from"] == "the logs' headers"
    said = {t["number"]: (t["data_len"], t["num_subscribers"], t["best_effort"],
                          t["duration"]) for t in manifest["tests"]}
    assert said == {1: (64, 1, False, 120), 2: (64, 1, False, 120)}  # the headers' own
    df = pd.read_csv(thr / "results.csv")
    assert set(df[df.metric == "throughput_mbps"].test) == {1, 2}
    kept = (thr / "schedule.csv").read_text().splitlines()
    assert kept == ["dataLen,multicast,numSubscribers,bestEffort,batchSize,duration",
                    "64,false,1,false,0,120", "64,false,1,false,0,120"]
    lat = json.loads((runs["k8sdds-latency-test-weave-tls"] / "manifest.json").read_text())
    assert [t["data_len"] for t in lat["tests"]] == [256] and lat["tests"][0]["latency_test"]
    [skipped] = lat["imported"]["skipped"]
    assert skipped.startswith("test-11: its logs do not say data_len, num_subscribers (")
    assert "Batching cannot be used in a Latency test" in skipped


def test_output_to_a_pipe_is_never_wrapped(tmp_path):
    """A long path printed to a pipe or a file stays on one line, whatever COLUMNS says."""
    deep = tmp_path / ("a-rather-long-folder-name-" * 6).rstrip("-") / "k8sdds-data"
    tree = _tree(deep)
    out = deep.parent / ("logs-" + "x" * 90)
    proc = subprocess.run([sys.executable, "-m", "k8sdds", "import", "k8sdds-data", str(tree),
                           "--out", str(out)], capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "40"}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines and all(str(out) in line for line in lines), lines
    assert max(map(len, lines)) > 200  # one line each, far past 80 columns


def test_no_link_anywhere_in_the_tree_is_followed(tmp_path):
    """A configuration folder, a whole kind folder, a test folder and a schedule.csv that are
    links to elsewhere on the machine: each skipped with its path and reason, the rest
    imported."""
    elsewhere = _tree(tmp_path / "elsewhere")  # what the links point at: not the study's
    tree = _tree(tmp_path / "k8sdds-data")
    (tree / "throughput-test" / "kuberouter-tcp").symlink_to(
        elsewhere / "throughput-test" / "flannel-udp")
    (tree / "throughput-test" / "flannel-udp" / "test-5").symlink_to(
        elsewhere / "throughput-test" / "flannel-udp" / "test-0")
    skipped: list[tuple[str, str]] = []
    runs = import_tree(tree, tmp_path / "logs", skipped)
    assert sorted(r.name for r in runs) == ["k8sdds-latency-test-weave-tls",
                                            "k8sdds-throughput-test-flannel-udp"]
    assert skipped == [("throughput-test/kuberouter-tcp",
                        f"{tree / 'throughput-test' / 'kuberouter-tcp'}: a symbolic link; "
                        "k8sdds follows no link in an imported tree")]
    manifest = json.loads((tmp_path / "logs" / "k8sdds-throughput-test-flannel-udp"
                           / "manifest.json").read_text())
    assert [t["number"] for t in manifest["tests"]] == [1, 2]  # test-5 is not among them
    assert manifest["imported"]["skipped"] == [
        f"{tree / 'throughput-test' / 'flannel-udp' / 'test-5'}: a symbolic link; k8sdds "
        "follows no link in an imported tree"]
    # the whole latency-test folder a link, and the top schedule.csv a link to another one
    other = _tree(tmp_path / "other")
    shutil.rmtree(other / "latency-test")
    (other / "latency-test").symlink_to(elsewhere / "latency-test")
    (other / "schedule.csv").unlink()
    foreign = tmp_path / "foreign.csv"
    foreign.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize\n"
                       "99,false,1,false,0\n99,false,1,false,0\n")
    (other / "schedule.csv").symlink_to(foreign)
    skipped = []
    [run] = import_tree(other, tmp_path / "logs2", skipped)
    assert skipped == [("latency-test", f"{other / 'latency-test'}: a symbolic link; k8sdds "
                                        "follows no link in an imported tree")]
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["imported"]["tests_from"] == "the logs' headers"  # not the linked one
    assert {t["data_len"] for t in manifest["tests"]} == {64}
    assert f"{other / 'schedule.csv'}: a symbolic link; not followed" in manifest[
        "imported"]["skipped"]


def test_a_value_no_measurement_can_have_is_never_stored(tmp_path):
    """Negative rates, a loss over 100 %, infinite and not-a-number figures in Perftest's
    plain and CSV outputs: left out with the file and the reason; the rest is kept."""
    tree = _tree(tmp_path / "k8sdds-data")
    sub = tree / "throughput-test" / "flannel-udp" / "test-0" / "rtiperftest-sub0.log"
    sub.write_text(sub.read_text().replace("Packets/s(ave):    4154", "Packets/s(ave):   -4154")
                   .replace("Lost:     0 (0.00%)", "Lost:     0 (150.00%)"))
    pub = tree / "latency-test" / "weave-tls" / "test-2" / "rtiperftest-pub.log"
    pub.write_text(pub.read_text().replace("     1137,    241.3,", "      inf,      nan,"))
    runs = {r.name: r for r in import_tree(tree, tmp_path / "logs")}
    for run in runs.values():
        df = pd.read_csv(run / "results.csv")
        assert df.value.map(lambda v: v == v and abs(v) != float("inf") and v >= 0).all()
    thr = runs["k8sdds-throughput-test-flannel-udp"]
    df = pd.read_csv(thr / "results.csv")
    kept = df[(df.test == 1) & (df.role == "sub0") & (df.kind == "summary")]
    assert "throughput_mbps" in set(kept.metric)  # the rest of the line stands
    assert not {"samples_per_s", "lost_pct"} & set(kept.metric)
    said = json.loads((thr / "manifest.json").read_text())["imported"]["skipped"]
    assert "test-0/sub0.log: samples_per_s -4154.0: negative: no count, rate, time or share " \
        "is; left out" in said
    assert "test-0/sub0.log: lost_pct 150.0: a loss over 100 %; left out" in said
    lat = json.loads((runs["k8sdds-latency-test-weave-tls"] / "manifest.json").read_text())
    assert any(s.startswith("test-2/pub.log: latency_us_mean inf: not a finite number")
               for s in lat["imported"]["skipped"]), lat["imported"]


def test_a_header_value_no_test_can_have_is_never_a_parameter(tmp_path):
    tree = _tree(tmp_path / "k8sdds-data")
    (tree / "schedule.csv").unlink()
    for log in (tree / "throughput-test" / "flannel-udp" / "test-0").iterdir():
        log.write_text(log.read_text().replace("Data Size: 64", "Data Size: 1000000000000"))
    runs = {r.name: r for r in import_tree(tree, tmp_path / "logs")}
    manifest = json.loads((runs["k8sdds-throughput-test-flannel-udp"] / "manifest.json")
                          .read_text())
    assert [t["data_len"] for t in manifest["tests"]] == [64]  # test-1 only
    assert any(s.startswith("test-0: its log's header says data_len 1000000000000, which no "
                            "test can have (allowed: ") for s in manifest["imported"]["skipped"])


def test_out_that_is_a_link_a_file_or_inside_the_tree_is_a_clear_error(tmp_path):
    tree = _tree(tmp_path / "k8sdds-data")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    (tmp_path / "file").write_text("x")
    for out, said in ((tmp_path / "dangling", "a symbolic link to nothing"),
                      (tmp_path / "file", "not a directory"),
                      (tree / "latency-test" / "runs",
                       "inside the tree's latency-test folder")):
        done = invoke("import", "k8sdds-data", str(tree), "--out", str(out))
        assert done.returncode == 2 and f"--out {out}: {said}" in " ".join(
            done.stderr.split()), done.stderr
        assert "Traceback" not in done.stderr
    assert not (tmp_path / "nowhere").exists()
    assert not (tree / "latency-test" / "runs").exists()


def test_parse_of_a_run_whose_engine_is_unknown_is_a_clear_error(tmp_path):
    tree = _tree(tmp_path / "k8sdds-data")
    [run, _] = sorted(import_tree(tree, tmp_path / "logs"), key=lambda p: "latency" in p.name)
    manifest = json.loads((run / "manifest.json").read_text())
    manifest["tests"][0]["engine"] = "nosuch"
    (run / "manifest.json").write_text(json.dumps(manifest))
    before = (run / "results.csv").read_text()
    done = invoke("parse", str(run))
    assert done.returncode == 2 and "ran engine 'nosuch', which this k8sdds does not know" \
        in " ".join(done.stderr.split()), done.stderr
    assert (run / "results.csv").read_text() == before


def test_a_long_log_is_imported_a_piece_at_a_time_with_its_bytes_counted(tmp_path):
    """A 59 MB subscriber log (half a million interval lines): copied and parsed a piece at
    a time (the most Python holds at once, traced, is far below the log's size), its samples
    thinned as read, every byte of every log counted for the progress bar."""
    import tracemalloc

    tree = _tree(tmp_path / "tree")
    sub = tree / "throughput-test/flannel-udp/test-0/rtiperftest-sub0.log"
    head, cut, tail = sub.read_text().partition("Length:")
    line = ("Packets:  2336445  Packets/s: 2209783  Packets/s(ave): 2209783  Mbps:  1767.8  "
            "Mbps(ave):  1767.8  Lost:     0 (0.00%)\n")
    with open(sub, "w") as out:
        out.write(head)
        for _ in range(50):
            out.write(line * 10_000)
        out.write(cut + tail)
    size = sub.stat().st_size
    assert size > 59e6
    with open(sub) as log:  # the interval lines, counted here
        lines = sum(1 for text in log if text.lstrip().startswith("Packets:"))
    logs = sum(os.path.getsize(p) for p in tree.rglob("rtiperftest-*.log"))
    counted: list[int] = []
    tracemalloc.start()
    try:
        [run, _] = import_tree(tree, tmp_path / "out", advance=counted.append)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert sum(counted) == logs  # every log's bytes, each once
    assert peak < size / 2, f"{peak / 1e6:.0f} MB held at once for a {size / 1e6:.0f} MB log"
    df = pd.read_csv(run / "results.csv")
    thr = df[(df.test == 1) & (df.role == "sub0") & (df.metric == "throughput_mbps")]
    assert thr[thr.kind == "summary"].value.tolist() == [2.1]  # the result line, exact
    # every 256th: the smallest power of two leaving at most 3,600 of half a million
    assert 128 * 3600 < lines <= 256 * 3600
    assert thr[thr.kind == "sample"].t.tolist() == list(range(1, lines + 1, 256))
    manifest = json.loads((run / "manifest.json").read_text())
    assert f"test-0/sub0.log: throughput_mbps: {lines:,} interval samples, one in 256 kept " \
        "(at most 3,600; the summaries are of all)" in manifest["imported"]["skipped"]


@pytest.mark.parametrize("page", ["README.md", "docs/how-to/import-k8sdds-data.md"])
def test_the_pages_import_block_runs_as_written(tmp_path, page):
    """The page's import block, its lines read from the page and run (through the CLI's
    entry point, in this process) in a folder holding K8sDDS/Data (a small tree of the real
    K8sDDS logs, `_tree`), the report's `*` expanded as a shell expands it."""
    import glob

    from .test_docs_commands import ROOT, blocks

    [block] = [b for b in blocks() if b.page == ROOT / page and b.commands and
               b.commands[0][:3] == ("k8sdds", "import", "k8sdds-data")]
    _tree(tmp_path / "K8sDDS" / "Data")
    for words in block.commands:
        argv = [x for w in words[1:] for x in (sorted(glob.glob(w, root_dir=tmp_path))
                                              if "*" in w else [w])]
        done = invoke(*argv, cwd=tmp_path)
        assert done.returncode == 0, (words, done.stdout[-2000:], done.stderr[-2000:])
    assert (tmp_path / "study" / "k8sdds-throughput-test-flannel-udp" / "results.csv").is_file()
    assert (tmp_path / "study-report" / "report.html").is_file()
