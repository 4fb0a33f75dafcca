"""The two sweeps of issue 81 on the real emulated cluster, as their how-tos write them: a
round trip under load (docs/how-to/latency-under-load.md), its facts read from ddsperf's own
lines (what the capacity test's subscriber received, what the stream's publisher sent and
its subscriber got, the ping's round trips), not from what k8sdds derived of them; and 1 to
N subscribers by unicast and multicast (docs/how-to/subscribers.md)."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from .emulated_support import namespaces, requires_namespaces

pytestmark = [pytest.mark.emulated, requires_namespaces()]
ROOT = Path(__file__).parent.parent
SUB = re.compile(r"rate (?P<rate>[\d.]+) (?P<k>k)S/s")  # a ddsperf sub's interval line
PUB = re.compile(r"^\[\d+\]\s+[\d.]+\s+(?P<rate>[\d.]+)(?P<k>k?)/s\s")  # a ddsperf pub's
PING = re.compile(r"size 64 mean [\d.]+us .* cnt (?P<cnt>\d+)")


def _steady(rates: list[float]) -> float:
    """The mean of ddsperf's per-second rates without the first and the last (discovery,
    the stop)."""
    return statistics.fmean(rates[1:-1] if len(rates) >= 3 else rates)


def _rates(log: Path, pattern: re.Pattern) -> list[float]:
    """The samples a second of each of a log's interval lines that carried any."""
    out = []
    for line in log.read_text().splitlines():
        m = pattern.search(line)
        if m and float(m["rate"]) > 0:
            out.append(float(m["rate"]) * (1000 if m["k"] else 1))
    return out


def _how_to_run(tmp_path: Path, page: str, prefix: str, duration: str, which: int = 0,
                repeats: int = 2):
    """The page's command (its `which`-th), read from it, with `repeats` (the page's 3 take
    minutes) and `--duration`, a testbed (`prefix` + pid) and folder of its own, and
    `--json`: (its outcome, its run directory, its manifest, the testbed's name)."""
    from .test_docs_commands import blocks

    block = [b for b in blocks() if b.page == ROOT / page][which]
    [words] = block.commands
    words = list(words)
    words[words.index("--repeats") + 1] = str(repeats)
    testbed = prefix + str(os.getpid() % 1000)
    env = {**os.environ, "K8SDDS_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run([sys.executable, "-m", "k8sdds", *words[1:], "--duration", duration,
                           "--testbed", testbed, "--out", str(tmp_path / "logs"), "--json"],
                          cwd=ROOT, capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout)
    assert outcome["failed"] == [], outcome["failed"]
    run = Path(outcome["run_dir"])
    return outcome, run, json.loads((run / "manifest.json").read_text()), testbed


def test_the_how_tos_sweep_runs_as_written(tmp_path):
    """docs/how-to/latency-under-load.md's command, as `_how_to_run` changes it: 2 repeats
    of 3 s."""
    outcome, run, manifest, testbed = _how_to_run(
        tmp_path, "docs/how-to/latency-under-load.md", "kdl", "3")
    tests = {t["number"]: t for t in manifest["tests"]}
    # the run added the capacity test before the first share: ddsperf's throughput at 1 KiB
    assert [(t["latency_test"], t["data_len"], t["load"]) for t in tests.values()] == [
        (True, 64, ""), (False, 1024, ""), (True, 64, "25%"), (True, 64, "50%"),
        (True, 64, "75%"), (True, 64, "100%"), (True, 64, "max")]
    capacity = {rep: _steady(_rates(run / f"test-2/rep-{rep}/sub0.log", SUB))
                for rep in (1, 2)}
    for number, share in ((3, 0.25), (4, 0.5), (6, 1.0)):
        for rep in (1, 2):
            logs = run / f"test-{number}/rep-{rep}"
            # rounds: the capacity's repeat 2 runs before the shares' repeat 2
            told = share * statistics.median([capacity[r] for r in range(1, rep + 1)])
            said = manifest["repeats"][f"test-{number}/rep-{rep}"]["stream"]
            assert said["rate_per_s"] == pytest.approx(told, rel=0.02), said
            assert f"pub {round(said['rate_per_s'])}Hz size 1024" in " ".join(
                manifest["repeats"][f"test-{number}/rep-{rep}"]["argv"]["stream"])
            # ddsperf keeps to the rate over the run (a second behind is caught up in the
            # next; beside the round trip, on 2 shared cores, it may fall short: what it
            # got is what the table and the answer show)
            sent = _rates(logs / "stream.log", PUB)
            assert statistics.fmean(sent) <= told * 1.1, (number, rep, sent, told)
            got = _steady(_rates(logs / "sink.log", SUB))
            assert got == pytest.approx(_steady(sent), rel=0.15), (number, rep, got, sent)
            assert sum(int(m["cnt"]) for m in PING.finditer(
                (logs / "pub.log").read_text())) > 0
    # `max`: no rate told, the stream as fast as ddsperf goes
    assert manifest["repeats"]["test-7/rep-1"]["stream"] == {"rate_per_s": 0.0}
    assert "pub inf size 1024" in " ".join(
        manifest["repeats"]["test-7/rep-1"]["argv"]["stream"])
    [line] = [a for a in outcome["answer"] if a.startswith("round trip under load")]
    print(line)
    assert line.startswith("round trip under load on flannel-vxlan (ddsperf udp 64 B, the "
                           "stream's samples 1024 B): p99 ")
    for load in ("25%", "50%", "75%", "100%", "max"):
        assert f" at {load} load, the stream " in line
    assert namespaces(testbed) == []


def test_the_subscribers_how_tos_sweep_runs_as_written(tmp_path):
    """docs/how-to/subscribers.md's command, as `_how_to_run` changes it: 2 repeats of
    2 s."""
    outcome, run, manifest, testbed = _how_to_run(
        tmp_path, "docs/how-to/subscribers.md", "kdn", "2")
    ran = {(t["datapath"], t["multicast"], t["num_subscribers"]) for t in manifest["tests"]}
    # weave carries multicast across nodes, flannel-vxlan does not: left out there, said
    assert ran == {("weave", m, n) for m in (False, True) for n in (1, 2, 4, 8)} | {
        ("flannel-vxlan", False, n) for n in (1, 2, 4, 8)}
    # eight subscribers over the two other workers, each received over its own socket:
    # ddsperf's own lines, one per subscriber, each with data
    eight = [t["number"] for t in manifest["tests"] if t["datapath"] == "weave"
             and t["multicast"] and t["num_subscribers"] == 8]
    logs = run / f"test-{eight[0]}" / "rep-1"
    got = [len(SUB.findall((logs / f"sub{i}.log").read_text())) for i in range(8)]
    assert all(got), got
    said = {a.split(" (")[0]: a for a in outcome["answer"] if a.startswith("1 to N")}
    assert set(said) == {"1 to N subscribers on weave", "1 to N subscribers on flannel-vxlan"}
    assert "multicast" in said["1 to N subscribers on weave"].split("; ")[1]
    assert said["1 to N subscribers on weave"].split("; ")[2].startswith(
        ("multicast overtakes unicast at ", "multicast does not overtake unicast ("))
    assert said["1 to N subscribers on flannel-vxlan"].endswith(
        "no multicast on it: multicast does not cross nodes on this datapath (routed L3, as "
        "with the real CNI)")
    assert namespaces(testbed) == []
