"""Schedule loading and validation: every error names file, line, column, value, what is allowed."""

from __future__ import annotations

import pytest

from k8sdds import model, schedule
from k8sdds.errors import ScheduleError
from k8sdds.model import Defaults, Limits
from k8sdds.schedule import expand, load

from .conftest import FIXTURES

HEADER = "dataLen,multicast,numSubscribers,bestEffort,batchSize"


def test_k8sdds_schedule_loads_unchanged():
    tests = schedule.load(FIXTURES / "schedule-k8sdds.csv")
    assert len(tests) == 16
    first, batched, multicast8 = tests[0], tests[11], tests[15]
    assert (first.data_len, first.multicast, first.num_subscribers, first.best_effort,
            first.batch_size) == (64, False, 1, False, 0)
    assert batched.batch_size == 8192
    assert multicast8.multicast and multicast8.num_subscribers == 8
    assert [t.data_len for t in tests[:6]] == [64, 256, 1024, 4096, 16384, 63000]
    assert all(t.engine == "ddsperf" and t.transport == "udp" for t in tests)


def test_shipped_schedules_load():
    from pathlib import Path

    root = Path(__file__).parent.parent / "schedules"
    assert (root / "k8sdds.csv").read_bytes() == (FIXTURES / "schedule-k8sdds.csv").read_bytes()
    for path in root.glob("*.csv"):
        assert schedule.load(path)


def _error(write_schedule, text, **kw) -> str:
    path = write_schedule(text)
    with pytest.raises(ScheduleError) as info:
        schedule.load(path, **kw)
    message = str(info.value)
    assert str(path) in message
    return message


def test_unknown_column_suggests_close_match(write_schedule):
    msg = _error(write_schedule, HEADER + ",latencyTset\n64,false,1,false,0,true\n")
    assert "line 1" in msg and "unknown column 'latencyTset'" in msg
    assert "did you mean 'latencyTest'" in msg


def test_missing_required_column(write_schedule):
    msg = _error(write_schedule, "dataLen,multicast,numSubscribers,bestEffort\n64,false,1,false\n")
    assert "missing required column(s) batchSize" in msg


def test_bad_type_names_row_column_value_and_allowed(write_schedule):
    msg = _error(write_schedule, HEADER + "\n64,false,1,false,0\n64,maybe,1,false,0\n")
    assert "line 3 (test row 1)" in msg
    assert "column 'multicast'" in msg and "'maybe'" in msg and "true or false" in msg


def test_not_a_number(write_schedule):
    msg = _error(write_schedule, HEADER + "\nabc,false,1,false,0\n")
    assert "column 'dataLen'" in msg and "'abc'" in msg and "whole number" in msg


def test_data_len_must_fit_the_engine(write_schedule):
    msg = _error(write_schedule, HEADER + "\n8,false,1,false,0\n")
    assert "column 'dataLen'" in msg and "ddsperf sends samples of 12 to" in msg


def test_zero_subscribers_rejected(write_schedule):
    msg = _error(write_schedule, HEADER + "\n64,false,0,false,0\n")
    assert "column 'numSubscribers'" in msg and "from 1 to" in msg


def test_more_subscribers_than_the_cluster_can_place(write_schedule):
    msg = _error(write_schedule, HEADER + "\n64,false,9,false,0\n",
                 limits=Limits(max_subscribers=8))
    assert "column 'numSubscribers'" in msg and "at most 8" in msg


def test_batching_in_latency_test_is_a_contradiction(write_schedule):
    msg = _error(write_schedule, HEADER + ",latencyTest\n256,false,1,false,8192,true\n")
    assert "column 'batchSize'" in msg and "latency test" in msg


def test_batching_in_latency_test_from_the_command_line(write_schedule):
    msg = _error(write_schedule, HEADER + "\n256,false,1,false,8192\n",
                 defaults=Defaults(latency_test=True))
    assert "latency test" in msg


def test_option_value_from_command_line_is_named(write_schedule):
    msg = _error(write_schedule, HEADER + "\n256,false,1,false,0\n",
                 defaults=Defaults(transport="dtls"))
    assert "set on the command line" in msg and "column 'transport'" in msg


def test_empty_file(write_schedule):
    assert "empty" in _error(write_schedule, "")
    assert "empty" in _error(write_schedule, "\n \n")


def test_header_without_rows(write_schedule):
    assert "no test rows" in _error(write_schedule, HEADER + "\n")


def test_duplicate_header(write_schedule):
    msg = _error(write_schedule, HEADER + ",dataLen\n64,false,1,false,0,64\n")
    assert "duplicate column 'dataLen'" in msg and "columns 1 and 6" in msg


def test_wrong_number_of_values(write_schedule):
    msg = _error(write_schedule, HEADER + "\n64,false,1,false\n")
    assert "line 2" in msg and "4 values for 5 columns" in msg


def test_not_utf8(write_schedule, tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes((HEADER + "\n64,false,1,false,0 # caf\xe9\n").encode("latin-1"))
    with pytest.raises(ScheduleError, match="not UTF-8"):
        schedule.load(path)


def test_missing_file(tmp_path):
    with pytest.raises(ScheduleError, match="no such schedule file"):
        schedule.load(tmp_path / "nope.csv")


def test_bad_choice_suggests(write_schedule):
    msg = _error(write_schedule, HEADER + ",placement\n64,false,1,false,0,same-nod\n")
    assert "did you mean 'same-node'" in msg


def test_values_are_case_insensitive(write_schedule):
    path = write_schedule(HEADER + ",transport,latencyTest\n64,FALSE,1,True,0,UDP,false\n")
    [test] = schedule.load(path)
    assert test.transport == "udp" and test.best_effort is True and test.multicast is False


def test_command_line_applies_only_where_the_row_is_silent(write_schedule):
    path = write_schedule(HEADER + ",duration\n64,false,1,false,0,3\n64,false,1,false,0,\n")
    a, b = schedule.load(path, Defaults(duration=7, transport="tcp"))
    assert a.duration == 3 and b.duration == 7
    assert a.transport == b.transport == "tcp"


def test_defaults_without_optional_columns(write_schedule):
    [t] = schedule.load(write_schedule(HEADER + "\n64,false,1,false,0\n"))
    assert (t.engine, t.latency_test, t.transport, t.duration, t.repeats, t.placement,
            t.datapath, t.discovery) == ("ddsperf", False, "udp", 10.0, 1, "cross-node",
                                         None, None)


def test_expand_runs_once_per_datapath_and_numbers_tests(write_schedule):
    path = write_schedule(HEADER + "\n64,false,1,false,0\n1024,false,1,false,0\n")
    tests = schedule.expand(schedule.load(path), ["host", "flannel-vxlan"], path)
    assert [(t.number, t.datapath, t.data_len) for t in tests] == [
        (1, "host", 64), (2, "host", 1024), (3, "flannel-vxlan", 64),
        (4, "flannel-vxlan", 1024)]


def test_expand_row_with_own_datapath_runs_once(write_schedule):
    path = write_schedule(HEADER + ",datapath\n64,false,1,false,0,flannel-hostgw\n"
                                   "128,false,1,false,0,\n")
    tests = schedule.expand(schedule.load(path), ["host", "flannel-vxlan"], path)
    assert [(t.datapath, t.data_len) for t in tests] == [
        ("host", 128), ("flannel-vxlan", 128), ("flannel-hostgw", 64)]


def test_expand_from_to_is_inclusive_and_zero_based():
    tests = schedule.load(FIXTURES / "schedule-k8sdds.csv")
    chosen = schedule.expand(tests, ["host"], "s.csv", from_i=2, to_i=4)
    assert [t.row for t in chosen] == [2, 3, 4]
    with pytest.raises(ScheduleError, match="no test rows between"):
        schedule.expand(tests, ["host"], "s.csv", from_i=40, to_i=50)


def test_multicast_on_routed_datapath_rejected_at_load_time():
    tests = schedule.load(FIXTURES / "schedule-k8sdds.csv")
    with pytest.raises(ScheduleError) as info:
        schedule.expand(tests, ["flannel-vxlan"], "s.csv")
    msg = str(info.value)
    assert "line 14 (test row 12)" in msg and "column 'multicast'" in msg
    assert "does not cross nodes" in msg
    # the host network carries multicast: the whole K8sDDS schedule is accepted
    assert len(schedule.expand(tests, ["host"], "s.csv")) == 16


def test_a_row_a_datapath_cannot_carry_is_left_out_there_and_said_once():
    """The study's schedule on host, flannel-vxlan and weave (as the study ran it): 16 rows on
    host and weave, 12 on flannel-vxlan, and one line for the 4 multicast rows."""
    from k8sdds.expansion import expand_where_applicable, summary

    tests = schedule.load(FIXTURES / "schedule-k8sdds.csv")
    done = expand_where_applicable(tests, ["host", "flannel-vxlan", "weave"], "s.csv")
    per = {dp: [t.row for t in done.tests if t.datapath == dp]
           for dp in ("host", "flannel-vxlan", "weave")}
    assert per == {"host": list(range(16)), "flannel-vxlan": list(range(12)),
                   "weave": list(range(16))}
    assert [t.number for t in done.tests] == list(range(1, 45))
    assert [(n.row, n.line, n.datapath, n.column) for n in done.not_applicable] == [
        (12, 14, "flannel-vxlan", "multicast"), (13, 15, "flannel-vxlan", "multicast"),
        (14, 16, "flannel-vxlan", "multicast"), (15, 17, "flannel-vxlan", "multicast")]
    assert summary(done.not_applicable) == [
        "4 rows with multicast=true (rows 12 to 15): not applicable on flannel-vxlan: "
        "multicast does not cross nodes on this datapath (routed L3, as with the real CNI)"]
    two = expand_where_applicable(tests, ["host", "flannel-vxlan", "kube-router"], "s.csv")
    assert summary(two.not_applicable) == [
        "4 rows with multicast=true (rows 12 to 15): not applicable on flannel-vxlan, "
        "kube-router: multicast does not cross nodes on this datapath (routed L3, as with "
        "the real CNI)"]
    with pytest.raises(ScheduleError, match=r"line 14 \(test row 12\), column 'multicast': "
                       "value 'true' on datapath flannel-vxlan: multicast does not cross"):
        expand_where_applicable(tests, ["host", "flannel-vxlan"], "s.csv", strict=True)


def test_a_row_no_datapath_of_the_run_carries_is_an_error():
    from k8sdds.expansion import expand_where_applicable

    tests = schedule.load(FIXTURES / "schedule-k8sdds.csv")
    with pytest.raises(ScheduleError, match=r"s.csv, line 14 \(test row 12\), column "
                       "'multicast': value 'true': no datapath of this run can carry it "
                       r"\(flannel-vxlan: multicast does not cross nodes"):
        expand_where_applicable(tests, ["flannel-vxlan", "kube-router"], "s.csv")


def test_multicast_same_node_allowed_on_routed_datapath(write_schedule):
    path = write_schedule(HEADER + ",placement\n256,true,2,false,0,same-node\n")
    assert schedule.expand(schedule.load(path), ["flannel-vxlan"], path)


def test_tcp_with_multicast_rejected(write_schedule):
    msg = _error(write_schedule, HEADER + ",transport\n256,true,1,false,0,tcp\n")
    assert "multicast needs transport=udp" in msg


@pytest.mark.parametrize("defaults,expected", [
    (Defaults(duration=0), "option --duration: value '0'"),
    (Defaults(repeats=0), "option --repeats: value '0'"),
    (Defaults(send_queue_size=-1), "option --sendQueueSize: value '-1'"),
])
def test_command_line_values_are_checked_like_columns(write_schedule, defaults, expected):
    path = write_schedule(HEADER + "\n64,false,1,false,0\n")
    with pytest.raises(ScheduleError, match=expected):
        schedule.load(path, defaults)


def test_nan_and_negative_durations_rejected(write_schedule):
    for value in ("nan", "-3", "inf"):
        msg = _error(write_schedule, HEADER + f",duration\n64,false,1,false,0,{value}\n")
        assert "column 'duration'" in msg and "a number from 1 to 86400" in msg


def test_path_column_sets_placement_and_refuses_conflicts(write_schedule):
    path = write_schedule(HEADER + ",path\n256,false,1,false,0,pod-pod-same-node\n"
                                   "256,false,1,false,0,node-pod\n")
    same, mixed = load(path)
    assert same.placement == "same-node" and same.effective_path == "pod-pod-same-node"
    assert mixed.placement == "cross-node" and mixed.path == "node-pod"
    msg = _error(write_schedule, HEADER + ",path,placement\n256,false,1,false,0,node-pod,"
                 "same-node\n")
    assert "column 'placement'" in msg and "crosses nodes" in msg
    msg = _error(write_schedule, HEADER + ",path\n256,false,1,false,0,pod-to-pod\n")
    assert "column 'path'" in msg and "pod-pod-cross-node" in msg


def test_host_datapath_has_only_the_node_path(write_schedule):
    path = write_schedule(HEADER + ",path,datapath\n256,false,1,false,0,node-pod,host\n")
    with pytest.raises(ScheduleError, match="its only path is node-node"):
        expand(load(path), ["host"], path)


def test_a_schedule_mixes_engines(write_schedule):
    path = write_schedule(HEADER + ",engine,transport,latencyTest\n"
                                   "1024,false,1,false,0,ddsperf,udp,false\n"
                                   "131072,false,1,false,0,iperf3,tcp,false\n"
                                   "56,false,1,false,0,ping,udp,true\n")
    assert [t.engine for t in load(path)] == ["ddsperf", "iperf3", "ping"]
    msg = _error(write_schedule, HEADER + ",engine\n1024,false,2,false,0,iperf3\n")
    assert "column 'numSubscribers'" in msg and "one client and one server" in msg


def test_baseline_matrix_is_a_valid_schedule(tmp_path):
    from k8sdds import baseline
    from k8sdds.engines import registry
    text = baseline.schedule(["host", "flannel-vxlan"], list(model.Limits().paths),
                             ["ping", "iperf3", "qperf", "ab"], registry(), dds=True,
                             duration=2)
    path = tmp_path / "m.csv"
    path.write_text(text)
    tests = expand(load(path), ["host", "flannel-vxlan"], path)
    # host: node-node only; flannel-vxlan: all five paths; 9 probes each
    assert len(tests) == 9 + 5 * 9
    assert {t.effective_path for t in tests if t.datapath == "host"} == {"node-node"}
    assert {t.duration for t in tests if t.engine == "ddsperf"} == {3}
    assert {t.duration for t in tests if t.engine != "ddsperf"} == {2}
    # on kubernetes, the two paths through a Service carry only what a Service forwards
    text = baseline.schedule(["flannel-vxlan"], list(model.PATHS),
                             ["ping", "iperf3", "qperf", "ab"], registry(), dds=True,
                             duration=2)
    path.write_text(text)
    tests = load(path, limits=model.Limits(paths=model.PATHS))
    through = [t for t in tests if t.path in model.SERVICE_PATHS]
    assert {t.engine for t in through} == {"iperf3", "ab"}
    assert len(through) == 2 * 3  # iperf3 TCP, UDP and ab, on each of the two
    with pytest.raises(ScheduleError, match="pod-service"):
        load(path)  # the emulated backend's limits: no Service paths


def test_lone_carriage_returns_split_rows(write_schedule):
    # found by hypothesis: b"\r\x01" made the csv module raise instead of a clear error
    path = write_schedule(HEADER + "\r256,false,1,false,0\r")
    assert [t.data_len for t in load(path)] == [256]


# ---- nodes whose CPU budgets share one machine (the emulated cluster) ---------------------
PI_OWN = Limits(node_cpus=[0.8, 0.8, 0.8], machine_cpus=2)  # three workers of 0.8 CPU


def test_a_test_whose_busy_nodes_fit_the_machine_loads(write_schedule):
    tests = load(write_schedule(HEADER + "\n1024,false,1,false,0\n"), limits=PI_OWN)
    assert [t.num_subscribers for t in tests] == [1]  # two nodes busy: 1.6 of 2 CPUs


def test_a_test_whose_busy_nodes_need_more_cpus_than_the_machine_is_refused(write_schedule):
    msg = _error(write_schedule, HEADER + "\n1024,false,2,false,0\n", limits=PI_OWN)
    assert "column 'numSubscribers'" in msg and "3 nodes busy" in msg
    assert "2.40 CPUs" in msg and "holds 2 at once" in msg


def test_same_node_keeps_one_node_busy_whatever_the_subscribers(write_schedule):
    tests = load(write_schedule(HEADER + ",placement\n1024,false,4,false,0,same-node\n"),
                 limits=PI_OWN)
    assert tests[0].num_subscribers == 4


def test_multicast_is_refused_where_the_nodes_cannot_use_it(write_schedule):
    limits = Limits(no_multicast="qemu-user refuses IP_MULTICAST_IF")
    msg = _error(write_schedule, HEADER + "\n1024,true,1,false,0\n", limits=limits)
    assert "column 'multicast'" in msg and "qemu-user refuses IP_MULTICAST_IF" in msg
    msg = _error(write_schedule, HEADER + ",discovery\n1024,false,1,false,0,multicast\n",
                 limits=limits)
    assert "column 'discovery'" in msg and "cannot use multicast" in msg


def test_discovery_goes_by_peers_where_the_nodes_cannot_use_multicast():
    from k8sdds.repeat import discovery_of

    test = model.Test(row=0, line=2, data_len=1024, multicast=False, num_subscribers=1,
                      best_effort=False, batch_size=0, datapath="host")
    assert discovery_of(test) == "multicast"  # the host network carries it across nodes
    assert discovery_of(test, "qemu-user refuses it") == "peers"


def test_dds_security_is_refused_where_the_nodes_cannot_load_its_plugins(write_schedule):
    limits = Limits(no_secure="the plugins are at this machine's path")
    msg = _error(write_schedule, HEADER + ",secure\n1024,false,1,false,0,true\n",
                 limits=limits)
    assert "column 'secure'" in msg and "the plugins are at this machine's path" in msg
