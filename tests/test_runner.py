"""The runner's own logic on a fake backend (no root, no namespaces): what a repeat records,
failures that do not stop the run, stops and a full disk that leave a resumable run, and
resume that runs exactly what is left."""

from __future__ import annotations

import errno
import json
from collections.abc import Callable

import pandas as pd
import pytest

from k8sdds import schedule, stopping
from k8sdds.engines import registry
from k8sdds.errors import RunStopped, ScheduleError, UserError
from k8sdds.results import RepeatKey, RunDir
from k8sdds.runner import Runner, RunOptions, resumable

from .fake_backend import LOGS, FakeBackend

SCHEDULE = ("dataLen,multicast,numSubscribers,bestEffort,batchSize,repeats,duration\n"
            "1024,false,1,false,0,2,1\n1024,false,1,false,0,1,1\n")


@pytest.fixture
def setup(tmp_path):
    sch = tmp_path / "s.csv"
    sch.write_text(SCHEDULE)
    engines = registry()
    tests = schedule.expand(schedule.load(sch, engines=engines), ["flannel-hostgw"], sch)

    def runner(backend: FakeBackend) -> Runner:
        return Runner(backend, engines, RunOptions(out=tmp_path / "out", schedule=sch,
                                                   backend_options={"testbed": "tb"}))
    return tests, runner, engines


def _rows(run_dir) -> pd.DataFrame:
    return pd.read_csv(RunDir(run_dir).results_path)


def _stop_at(n: int) -> Callable[[int], None]:
    """A `before_repeat` hook that asks for a stop as repeat `n` starts (as SIGTERM's
    handler does; the runner checks between steps)."""
    def hook(deployed: int) -> None:
        if deployed == n:
            stopping.ask()
    return hook


def _stopped(runner: Runner, tests) -> RunDir:
    """The run directory of `runner`, run until its backend's hook asked for a stop."""
    try:
        with pytest.raises(KeyboardInterrupt):
            runner.run(tests)
    finally:
        stopping.reset()
    return RunDir(runner.run_dir)


def test_a_run_records_every_repeat_and_its_rows(setup):
    tests, runner, _ = setup
    backend = FakeBackend()
    outcome = runner(backend).run(tests)
    manifest = RunDir(outcome.run_dir).read_manifest()
    assert manifest.status == "complete" and outcome.repeats == 3 and not outcome.failed
    assert sorted(manifest.repeats) == [RepeatKey(1, 1), RepeatKey(1, 2), RepeatKey(2, 1)]
    entry = manifest.repeats[RepeatKey(1, 2)]
    assert entry.status == "done" and entry.placement == {"pub": "node1", "sub0": "node2"}
    assert entry.argv["sub0"][0] == "ddsperf" and entry.discovery == "peers"
    assert manifest.backend_options == {"testbed": "tb"}
    df = _rows(outcome.run_dir)
    assert set(zip(df.test, df.repeat, strict=True)) == {(1, 1), (1, 2), (2, 1)}
    assert (df[df.metric == "throughput_mbps"].value > 0).all()
    # each row says its node's architecture, as the cluster described it (hybrid here)
    assert set(zip(df.node, df.arch, strict=True)) == {("node1", "amd64"), ("node2", "arm64")}
    assert backend.ups == backend.downs == 1
    assert backend.started[:2] == ["sub0", "pub"]  # subscribers first, the publisher last


def test_a_value_no_measurement_can_have_is_left_out_and_said_in_the_repeat(setup, tmp_path):
    """A subscriber whose log says a thread used 999,999 % of a core (no machine has 10,000
    cores): that sample is no row, and the repeat's entry says which, where and why."""
    tests, runner, _ = setup
    sub = tmp_path / "sub.log"
    sub.write_text(LOGS["sub"].read_text().replace("recvUC:24%+3%", "recvUC:999999%+3%", 1))
    outcome = runner(FakeBackend(logs={**LOGS, "sub": sub})).run(tests)
    manifest = RunDir(outcome.run_dir).read_manifest()
    for key, entry in manifest.repeats.items():
        assert entry.status == "done"
        # the threads' shares of second 1 add up (0+1+999,999+3), and the mean of the four
        # seconds with it (the others 29, 29, 32) is no share either
        assert entry.dropped == [
            "sub0.log: cpu_pct 1000003.0 at 1 s: a CPU share over 102400 % (1,024 cores); "
            "left out", "sub0.log: cpu_pct 250023.25: a CPU share over 102400 % (1,024 "
            "cores); left out"], (key, entry.dropped)
    df = _rows(outcome.run_dir)
    cpu = df[(df.role == "sub0") & (df.metric == "cpu_pct") & (df.kind == "sample")]
    assert len(cpu) > 0 and (cpu.value <= 100 * 1024).all()


def test_failures_are_recorded_with_their_reason_and_the_run_goes_on(setup):
    tests, runner, _ = setup
    outcome = runner(FakeBackend(fail_deploy={1}, exit_codes={"sub0": 3})).run(tests)
    manifest = RunDir(outcome.run_dir).read_manifest()
    assert manifest.status == "complete" and outcome.repeats == 3
    first = manifest.repeats[RepeatKey(1, 1)]
    assert first.status == "failed" and first.reason == "deployment failed: node1 is not Ready"
    second = manifest.repeats[RepeatKey(1, 2)]
    assert second.status == "failed" and "sub0 exited with status 3" in second.reason
    assert len(outcome.failed) == 3


def test_a_stop_leaves_a_run_that_resume_finishes_exactly(setup):
    tests, runner, engines = setup

    run = _stopped(runner(FakeBackend(before_repeat=_stop_at(3))), tests)
    manifest = run.read_manifest()
    assert manifest.status == "interrupted"
    # in rounds (the default): test 1's first repeat, test 2's, then test 1's second
    assert sorted(manifest.repeats) == [RepeatKey(1, 1), RepeatKey(2, 1)]
    assert set(_rows(run.path).test) == {1, 2}
    # a kill between a repeat's rows and its manifest entry leaves rows without an entry:
    # resume drops them and runs that repeat again
    stray = _rows(run.path).query("test == 1").assign(repeat=2).to_dict("records")
    run.append_results(stray)
    backend = FakeBackend()
    outcome = runner(backend).resume(run, resumable(run, backend, engines))
    manifest = run.read_manifest()
    assert manifest.status == "complete" and outcome.repeats == 1 and backend.deployed == 1
    assert len(manifest.resumed) == 1
    df = _rows(run.path)
    per_repeat = df.groupby(["test", "repeat"]).size()
    assert list(per_repeat.index) == [(1, 1), (1, 2), (2, 1)]
    # no repeat's rows twice: each value of a role once (a count per repeat follows how
    # many seconds the machine's speed fitted in, and is no such fact)
    assert not df.duplicated(["test", "repeat", "role", "node", "kind", "metric", "t"]).any()


def test_a_full_disk_stops_the_run_resumable(setup, monkeypatch):
    tests, runner, engines = setup
    calls = {"n": 0}
    real = RunDir.append_results

    def full(self, rows):
        calls["n"] += 1
        if calls["n"] == 2:
            raise OSError(errno.ENOSPC, "No space left on device", str(self.results_path))
        real(self, rows)

    monkeypatch.setattr(RunDir, "append_results", full)
    first = runner(FakeBackend())
    with pytest.raises(RunStopped, match="No space left on device.*--resume"):
        first.run(tests)
    run = RunDir(first.run_dir)
    manifest = run.read_manifest()
    assert manifest.status == "stopped" and list(manifest.repeats) == [RepeatKey(1, 1)]
    monkeypatch.setattr(RunDir, "append_results", real)
    outcome = runner(FakeBackend()).resume(run, resumable(run, FakeBackend(), engines))
    assert outcome.repeats == 2 and run.read_manifest().status == "complete"


def test_resume_checks_the_backend_and_the_tests_again(setup):
    tests, runner, engines = setup
    outcome = runner(FakeBackend()).run(tests)
    run = RunDir(outcome.run_dir)
    with pytest.raises(UserError, match="ran on the emulated backend; resume it with "
                                        "--backend emulated"):
        resumable(run, FakeBackend(name="ssh"), engines)
    data = json.loads(run.manifest_path.read_text())
    data["tests"][0]["data_len"] = -5  # a manifest is a file like any other
    run.manifest_path.write_text(json.dumps(data))
    with pytest.raises(ScheduleError, match=r"test 1, field data_len: value '-5'"):
        resumable(run, FakeBackend(), engines)
    data["tests"][0].update(data_len=1024, repeats=0, datapath="nowhere")
    run.manifest_path.write_text(json.dumps(data))
    with pytest.raises(ScheduleError, match=r"field repeats: value '0': allowed: a whole"):
        resumable(run, FakeBackend(), engines)
    data["tests"][0]["repeats"] = 2
    run.manifest_path.write_text(json.dumps(data))
    with pytest.raises(ScheduleError, match=r"field datapath: value 'nowhere': allowed: one"):
        resumable(run, FakeBackend(), engines)


def test_rounds_run_the_first_repeat_of_every_test_then_the_second(setup, tmp_path):
    _, _, engines = setup
    sch = tmp_path / "r.csv"
    sch.write_text(SCHEDULE)
    tests = schedule.expand(schedule.load(sch, engines=engines), ["host", "flannel-hostgw"],
                            sch)
    backend = FakeBackend()
    runner = Runner(backend, engines, RunOptions(out=tmp_path / "out", schedule=sch,
                                                 order="rounds"))
    outcome = runner.run(tests)
    by_number = {t.number: (t.datapath, t.row) for t in tests}
    # rows 0 (2 repeats) and 1 (1 repeat), on host then flannel-hostgw: tests 1 to 4
    assert [by_number[n] for n in (1, 2, 3, 4)] == [("host", 0), ("host", 1),
                                                    ("flannel-hostgw", 0),
                                                    ("flannel-hostgw", 1)]
    assert backend.ran == [(1, 1), (2, 1), (3, 1), (4, 1), (1, 2), (3, 2)]
    # the datapath is set each time it changes, not once per test
    assert backend.wired == ["host", "flannel-hostgw", "host", "flannel-hostgw"]
    manifest = RunDir(outcome.run_dir).read_manifest()
    assert manifest.order == "rounds" and manifest.status == "complete"
    assert len(manifest.repeats) == 6
    # the nodes' fingerprints: once per datapath, at its first repeat, kept by datapath
    assert backend.fingerprinted == [(1, 1), (3, 1)]
    assert manifest.fingerprints == {"host": {"node1": {"kernel": "fake"},
                                              "node2": {"kernel": "fake"}},
                                     "flannel-hostgw": {"node1": {"kernel": "fake"},
                                                        "node2": {"kernel": "fake"}}}


def test_a_resumed_run_keeps_its_order_unless_given_another(setup, tmp_path):
    _, _, engines = setup
    sch = tmp_path / "r.csv"
    sch.write_text(SCHEDULE.replace(",2,1\n", ",3,1\n"))  # row 0: 3 repeats, row 1: 1
    tests = schedule.expand(schedule.load(sch, engines=engines), ["host"], sch)

    first = Runner(FakeBackend(before_repeat=_stop_at(3)), engines,
                   RunOptions(out=tmp_path / "out", schedule=sch, order="rounds"))
    run = _stopped(first, tests)
    assert sorted(run.read_manifest().repeats) == [RepeatKey(1, 1), RepeatKey(2, 1)]
    backend = FakeBackend()
    Runner(backend, engines, RunOptions(out=run.path.parent)).resume(
        run, resumable(run, backend, engines))
    assert backend.ran == [(1, 2), (1, 3)] and run.read_manifest().order == "rounds"


def test_orders_are_pure_functions_of_the_pending_repeats(setup):
    from k8sdds.order import ORDERS

    tests, _, _ = setup
    a, b = tests[0], tests[1]
    pending = [(a, [2, 3]), (b, []), (a, [1])]
    assert [(t.number, r) for t, r in ORDERS["tests"](pending)] == [
        (a.number, 2), (a.number, 3), (a.number, 1)]
    assert [(t.number, r) for t, r in ORDERS["rounds"](pending)] == [
        (a.number, 2), (a.number, 1), (a.number, 3)]
    assert ORDERS["rounds"]([]) == []


def test_a_manifest_with_an_unknown_order_is_refused(setup):
    from k8sdds.results import RunManifest
    from k8sdds.results.manifest import ManifestError

    tests, runner, _ = setup
    outcome = runner(FakeBackend()).run(tests)
    data = RunDir(outcome.run_dir).read_manifest().to_dict()
    assert data["order"] == "rounds"  # the default, recorded
    # a manifest written before --order existed names none: its run went test by test
    assert RunManifest.from_dict({k: v for k, v in data.items() if k != "order"}
                                 ).order == "tests"
    with pytest.raises(ManifestError, match="order 'sideways' is not one of tests, rounds"):
        RunManifest.from_dict({**data, "order": "sideways"})


def test_where_the_runs_own_probe_found_no_multicast_it_is_not_used(tmp_path):
    """The fingerprints' multicast probe (taken at the datapath's first repeat) said it did
    not reach node2, though `host`'s record says multicast crosses: the multicast row fails
    before any role starts, naming what works; the row that leaves discovery to the
    datapath goes by peers, in its later repeat too (the probe is the manifest's then)."""
    sch = tmp_path / "s.csv"
    sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize,repeats,duration\n"
                   "1024,false,1,false,0,2,1\n1024,true,1,false,0,2,1\n")
    engines = registry()
    tests = schedule.expand(schedule.load(sch, engines=engines), ["host"], sch)
    backend = FakeBackend(multicast={"from": "node1", "between": "nodes",
                                     "group": "239.255.0.1:7400", "arrived": {"node2": False}})
    outcome = Runner(backend, engines, RunOptions(
        out=tmp_path / "out", schedule=sch, backend_options={"testbed": "tb"})).run(tests)
    manifest = json.loads((RunDir(outcome.run_dir).path / "manifest.json").read_text())
    reps = manifest["repeats"]
    assert [reps[f"test-1/rep-{r}"]["discovery"] for r in (1, 2)] == ["peers", "peers"]
    assert [reps[f"test-1/rep-{r}"]["status"] for r in (1, 2)] == ["done", "done"]
    for r in (1, 2):
        assert reps[f"test-2/rep-{r}"]["reason"] == (
            "this run's multicast probe from node1 did not arrive at node2: multicast=true "
            "cannot work between these nodes; use multicast=false")
    assert backend.started == ["sub0", "pub", "sub0", "pub"]  # test 1's roles only
    assert backend.fingerprinted == [(1, 1)]


def test_a_server_is_stopped_after_the_clients_that_talk_to_it(tmp_path):
    """MQTT's roles are the publisher (the driver), then the broker, where the engine
    listens, then its clients; those still running when the driver is done are stopped,
    the broker last: stopped first, it cut a load stream's writes mid-flight and the
    stream's "connection reset by peer" failed the repeat."""
    sch = tmp_path / "s.csv"
    sch.write_text("engine,transport,dataLen,multicast,numSubscribers,bestEffort,batchSize,"
                   "latencyTest\nmqtt,tcp,64,false,1,false,0,true\n")
    engines = registry()
    tests = schedule.expand(schedule.load(sch, engines=engines), ["flannel-hostgw"], sch)
    backend = FakeBackend(serving={"broker", "sub0"})
    Runner(backend, engines, RunOptions(out=tmp_path / "out", schedule=sch,
                                        backend_options={"testbed": "tb"})).run(tests)
    assert backend.started == ["broker", "sub0", "pub"]
    assert backend.stops == [["sub0"], ["broker"]]
