"""A round trip under load (`load`, `loadLen`): the cells the schedule takes and refuses, the
capacity test a run adds, the rate a share is told, where the stream runs and what ddsperf
is asked to do. The sweep itself runs on the emulated cluster
(test_sweeps_emulated)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from k8sdds import capacity, schedule
from k8sdds.deployment.placement import place, side
from k8sdds.engines import registry
from k8sdds.engines.base import RoleContext
from k8sdds.errors import ScheduleError
from k8sdds.expansion import expand

HEAD = "dataLen,multicast,numSubscribers,bestEffort,batchSize,latencyTest,load"


def _of(results: str):
    """What the runner gives `capacity.stream`: each capacity test's values, read from a
    results table's text."""
    return lambda number: capacity.measured(results, number)


def _tests(*rows: str, head: str = HEAD):
    return schedule.loads("\n".join([head, *rows]) + "\n")


@pytest.mark.parametrize("cell,kept", [("50%", "50%"), ("50", "50%"), (" 7.5% ", "7.5%"),
                                       ("MAX", "max"), ("0", ""), ("0%", ""), ("", "")])
def test_a_load_cell_is_kept_as_a_share_max_or_none(cell, kept):
    [t] = _tests(f"64,false,1,false,0,true,{cell}")
    assert t.load == kept
    assert t.load_len == (1024 if kept else 0)  # the stream's default sample size


@pytest.mark.parametrize("cell", ["150%", "-5", "half", "nan", "inf"])
def test_a_load_beyond_the_path_or_not_a_share_is_refused_with_what_is_allowed(cell):
    with pytest.raises(ScheduleError) as err:
        _tests(f"64,false,1,false,0,true,{cell}")
    assert "column 'load'" in str(err.value)
    assert "from 0% to 100% (0: no stream), or max" in str(err.value)


@pytest.mark.parametrize("row,head,said", [
    ("64,false,1,false,0,false,50%", HEAD, "set latencyTest=true"),
    ("64,false,1,false,0,true,,100", HEAD + ",loadLen", "set load too"),
    ("qperf,tcp,64,false,1,false,0,true,50%", "engine,transport," + HEAD,
     "qperf runs no stream beside its round trip; load is for engine=ddsperf or "
     "rtiperftest or zenoh or mqtt"),
    ("64,false,1,false,0,true,50%,8", HEAD + ",loadLen", "ddsperf sends samples of 12"),
])
def test_a_load_that_cannot_run_is_refused_before_anything_starts(row, head, said):
    with pytest.raises(ScheduleError) as err:
        _tests(row, head=head)
    assert said in str(err.value), str(err.value)


def test_the_run_adds_one_capacity_test_before_the_first_share_that_needs_it():
    rows = _tests("64,false,1,false,0,true,0", "64,false,1,false,0,true,50%",
                  "256,false,1,false,0,true,75%", "64,false,1,false,0,true,max")
    rows = [replace(rows[1], repeats=3), *[r for i, r in enumerate(rows) if i != 1]]
    tests = expand(rows, ["flannel-vxlan", "host"])
    said = [(t.datapath, t.latency_test, t.data_len, t.load, t.repeats, t.number)
            for t in tests]
    assert said == [
        ("flannel-vxlan", False, 1024, "", 3, 1), ("flannel-vxlan", True, 64, "50%", 3, 2),
        ("flannel-vxlan", True, 64, "", 1, 3), ("flannel-vxlan", True, 256, "75%", 1, 4),
        ("flannel-vxlan", True, 64, "max", 1, 5),
        ("host", False, 1024, "", 3, 6), ("host", True, 64, "50%", 3, 7),
        ("host", True, 64, "", 1, 8), ("host", True, 256, "75%", 1, 9),
        ("host", True, 64, "max", 1, 10)]
    assert capacity.test_of(tests[3], tests).number == 1  # one capacity for both shares


RESULTS = ("test,repeat,role,kind,metric,value\n"
           "1,1,sub0,summary,samples_per_s,40000\n"
           "1,1,pub,summary,samples_per_s,41000\n"  # the publisher's: not what arrived
           "1,2,sub0,summary,samples_per_s,30000\n"
           "1,3,sub0,summary,samples_per_s,50000\n"
           "2,1,pub,summary,latency_us_p50,30\n")


def test_a_share_is_told_of_the_median_the_capacity_test_received_so_far():
    tests = expand(_tests("64,false,1,false,0,true,75%"), ["host"])
    stream = capacity.stream(tests[1], tests, _of(RESULTS))
    assert (stream.rate, stream.capacity, stream.missing) == (0.75 * 40000, 40000, "")
    assert stream.record() == {"rate_per_s": 30000.0, "capacity_per_s": 40000.0,
                               "of": "test-1, median of 3 repeat(s)"}


def test_max_is_told_no_rate_and_an_idle_row_has_no_stream():
    tests = expand(_tests("64,false,1,false,0,true,max", "64,false,1,false,0,true,0"),
                   ["host"])
    assert [t.load for t in tests] == ["max", ""]  # no capacity test: no share
    assert capacity.stream(tests[0], tests, _of("")).record() == {"rate_per_s": 0.0}
    assert capacity.stream(tests[1], tests, _of("")) is None


def test_a_share_whose_capacity_has_no_finished_repeat_says_so():
    tests = expand(_tests("64,false,1,false,0,true,75%"), ["host"])
    missing = capacity.stream(tests[1], tests,
                              _of("test,repeat,role,kind,metric,value\n")).missing
    assert missing == ("load=75%: the path's capacity (test-1, ddsperf at 1024 B) has no "
                       "finished repeat to take a share of")


def test_the_stream_runs_beside_the_round_trips_ends():
    roles = ["pub", "sub0", "sub1", "stream", "sink"]
    assert place(roles, ["a", "b", "c"], "cross-node") == {
        "pub": "a", "sub0": "b", "sub1": "c", "stream": "a", "sink": "b"}
    assert [side(r, roles, "node-pod") for r in roles] == ["node", "pod", "pod", "node", "pod"]
    # whatever runs between the ends (a discovery service, a broker), the stream crosses
    # the round trip's own path: publisher's node to the first subscriber's
    assert place(["pub", "cds", "sub0", "stream", "sink"], ["a", "b", "c"], "cross-node") == {
        "pub": "a", "cds": "b", "sub0": "c", "stream": "a", "sink": "c"}
    assert place(["pub", "broker", "sub0", "stream", "sink"], ["a", "b", "c"],
                 "cross-node") == {"pub": "a", "broker": "c", "sub0": "b", "stream": "a",
                                   "sink": "b"}


def test_ddsperf_streams_in_a_domain_of_its_own_at_the_told_rate():
    [t] = _tests("64,false,1,false,0,true,50%")
    engine = registry()["ddsperf"]
    assert engine.roles(t) == ["pub", "sub0", "stream", "sink"]
    where = {"pub": "10.0.0.1", "sub0": "10.0.0.2", "stream": "10.0.0.1", "sink": "10.0.0.2"}

    def argv(role: str) -> list[str]:
        return list(engine.command(t, RoleContext(role, where[role], "eth0", where, "peers",
                                                  "/tmp", stream_rate=12345.6)).argv)

    assert argv("pub")[-3:] == ["ping", "size", "64"]
    assert "-i" not in argv("pub") and argv("sub0")[-1] == "pong"
    assert argv("stream")[3:5] == ["-i", "1"] and argv("stream")[-4:] == [
        "pub", "12346Hz", "size", "1024"]
    assert argv("sink")[3:5] == ["-i", "1"] and argv("sink")[-1] == "sub"
    # the stream outlasts the round trip: it is stopped once the ping ends
    assert float(argv("stream")[2]) > float(argv("pub")[2])


def _argv(engine, test, role: str, where: dict[str, str]) -> list[str]:
    return list(engine.command(test, RoleContext(role, where[role], "eth0", where, "",
                                                 "/tmp", stream_rate=2345.6)).argv)


def _flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_mqtt_streams_on_a_topic_of_its_own_through_the_same_broker():
    [t] = _tests("mqtt,tcp,64,false,1,true,0,true,50%", head="engine,transport," + HEAD)
    engine = registry()["mqtt"]
    assert engine.roles(t) == ["pub", "broker", "sub0", "stream", "sink"]
    where = {"pub": "10.0.0.1", "broker": "10.0.0.3", "sub0": "10.0.0.2", "stream": "10.0.0.1",
             "sink": "10.0.0.2"}
    pub, pong, stream, sink = (_argv(engine, t, r, where)
                               for r in ("pub", "sub0", "stream", "sink"))
    assert (_flag(pub, "-mode"), _flag(pub, "-topic")) == ("ping", "k8sdds")
    assert (_flag(pong, "-mode"), _flag(pong, "-topic")) == ("pong", "k8sdds")
    assert [_flag(stream, f) for f in ("-mode", "-topic", "-size", "-rate", "-peers")] == [
        "pub", "k8sdds-stream", "1024", "2346", "1"]
    assert (_flag(sink, "-mode"), _flag(sink, "-topic")) == ("sub", "k8sdds-stream")
    assert _flag(stream, "-broker") == _flag(pub, "-broker") == "10.0.0.3:1883"
    # the stream outlasts the round trip: it is stopped once the ping ends
    assert float(_flag(stream, "-duration")) > float(_flag(pub, "-duration"))


@pytest.mark.parametrize("topology", ["peer", "routed"])
def test_zenoh_streams_on_a_key_of_its_own(topology):
    [t] = _tests(f"zenoh,tcp,{topology},64,false,1,false,0,true,max",
                 head="engine,transport,topology," + HEAD)
    engine = registry()["zenoh"]
    where = {"pub": "10.0.0.1", "router": "10.0.0.3", "sub0": "10.0.0.2",
             "stream": "10.0.0.1", "sink": "10.0.0.2"}
    roles = engine.roles(t)
    assert roles[-2:] == ["stream", "sink"]
    stream, sink, pub = (_argv(engine, t, r, where) for r in ("stream", "sink", "pub"))
    assert (_flag(stream, "-mode"), _flag(stream, "-key")) == ("pub", "k8sdds-stream")
    assert (_flag(sink, "-mode"), _flag(sink, "-key")) == ("sub", "k8sdds-stream")
    assert _flag(pub, "-key") == "k8sdds" and _flag(stream, "-rate") == "2346"
    if topology == "routed":
        assert _flag(stream, "-connect") == _flag(sink, "-connect") == "tcp/10.0.0.3:7447"
    else:  # peer to peer: the stream dials its receiver only, the ping its pongs only
        assert _flag(stream, "-connect") == "tcp/10.0.0.2:7999"
        assert _flag(sink, "-listen") == "tcp/0.0.0.0:7999"
        assert _flag(pub, "-connect") == "tcp/10.0.0.2:7447"
