"""1 to N subscribers (analysis.subscribers): the crossover and the lines, on tables whose
figures are written here."""

from __future__ import annotations

import math

import pandas as pd

from k8sdds.analysis import subscribers as fan

KEY = {"datapath": "weave", "engine": "ddsperf", "transport": "udp",
       "path": "pod-pod-cross-node", "data_len": 1024, "best_effort": False}


def _row(multicast: bool, n: int, aggregate: tuple[float, float, float], repeats: int = 3,
         cpu: float = 10.0) -> dict:
    mean, low, high = aggregate
    row = {**KEY, "multicast": multicast, "num_subscribers": n, "repeats": repeats,
           "delivery": "multicast" if multicast else "unicast"}
    for figure, values in (("aggregate_mbps", (mean, low, high)),
                           ("per_sub_mbps", (mean / n, low / n, high / n)),
                           ("loss_pct", (0.0, 0.0, 0.0)), ("pub_cpu_us", (cpu, cpu, cpu))):
        row |= dict(zip((figure, f"{figure}_low", f"{figure}_high"), values, strict=True))
    return row


def test_multicast_overtakes_where_its_interval_is_first_above_unicasts():
    tab = pd.DataFrame([
        _row(False, 1, (300, 280, 320)), _row(True, 1, (290, 270, 310)),
        _row(False, 2, (320, 300, 340)), _row(True, 2, (350, 330, 370)),  # overlapping
        _row(False, 4, (330, 310, 350)), _row(True, 4, (600, 560, 640))])
    assert fan.crossover(tab) == (4, "600 against 330 Mb/s in all, the intervals apart")


def test_overlapping_everywhere_is_no_crossover_and_one_repeat_no_verdict():
    tab = pd.DataFrame([_row(False, 1, (300, 280, 320)), _row(True, 1, (310, 290, 330)),
                        _row(False, 2, (300, 280, 320)), _row(True, 2, (330, 300, 360))])
    assert fan.crossover(tab) == (None, "not above unicast beyond noise up to 2 subscribers")
    one = pd.DataFrame([_row(False, 2, (300, math.nan, math.nan), repeats=1),
                        _row(True, 2, (900, math.nan, math.nan), repeats=1)])
    assert fan.crossover(one)[0] is None
    assert fan.crossover(one)[1] == "no verdict at 2 subscribers (one repeat: no interval)"
    # and the line claims nothing either way: no "does not overtake" from one repeat
    [line] = fan.sentences(pd.concat([one, one.assign(num_subscribers=4)]))
    assert line.endswith("; where multicast overtakes unicast is not said (no verdict at 2, "
                         "4 subscribers (one repeat: no interval))"), line
    assert "does not overtake" not in line
    # the K8sDDS schedule runs `256,false,1,...` twice: unicast at 1 has an interval, its
    # multicast side none; still no count is judged, so still no claim
    twice = pd.concat([one.assign(num_subscribers=1).replace({"repeats": {1: 2}}).assign(
        aggregate_mbps_low=[280.0, math.nan], aggregate_mbps_high=[320.0, math.nan]), one])
    [line] = fan.sentences(twice)
    assert "is not said (no verdict at 1, 2 subscribers" in line, line


def test_the_line_names_each_delivery_the_crossover_or_why_there_is_no_multicast():
    tab = pd.DataFrame([_row(False, 1, (300, 280, 320), cpu=12), _row(True, 1, (300, 280, 320)),
                        _row(False, 4, (320, 300, 340), cpu=48), _row(True, 4, (900, 850, 950))])
    [line] = fan.sentences(tab)
    assert line == ("1 to N subscribers on weave (ddsperf udp 1024 B): unicast 300 Mb/s a "
                    "subscriber at 1, 80 at 4 (the publisher 12 µs of CPU a message, then "
                    "48); multicast 300 Mb/s a subscriber at 1, 225 at 4 (the publisher 10 µs "
                    "of CPU a message, then 10); multicast overtakes unicast at 4 subscribers "
                    "(900 against 320 Mb/s in all, the intervals apart)")
    flannel = tab[~tab["multicast"]].assign(datapath="flannel-vxlan")
    [line] = fan.sentences(flannel, [{"datapath": "flannel-vxlan", "column": "multicast",
                                      "reason": "multicast does not cross nodes"}])
    assert line.endswith("; no multicast on it: multicast does not cross nodes")


def test_the_publishers_cpu_per_message_is_over_the_seconds_it_wrote_in():
    """ddsperf's per-second lines: 50 % and 60 % of a core in the two seconds it wrote
    10,000 and 20,000 samples; the second before it wrote (discovery, 5 %) is not counted:
    1.1 core-seconds over 30,000 samples, 36.7 µs a message."""
    from k8sdds.results.schema import PARAMS

    params = {p: 0 for p in PARAMS} | {**KEY, "multicast": False, "num_subscribers": 1,
                                       "latency_test": False, "load": ""}
    rows = [{**params, "run_id": "r", "test": 1, "repeat": 1, "role": "pub", "kind": "sample",
             "metric": metric, "t": t, "value": value}
            for t, cpu, rate in ((1.0, 5, 0), (2.0, 50, 10_000), (3.0, 60, 20_000))
            for metric, value in (("cpu_pct", cpu), ("samples_per_s", rate))]
    rows.append({**params, "run_id": "r", "test": 1, "repeat": 1, "role": "sub0",
                 "kind": "summary", "metric": "throughput_mbps", "t": math.nan, "value": 80.0})
    reps = fan._per_repeat(pd.DataFrame(rows))
    assert list(reps["pub_cpu_us"].round(1)) == [36.7]
    # where the repeat has the kernel's account of the publisher's process, that is the
    # figure (parsers.cpu): 0.8 CPU seconds over 20,000 samples, 40 µs
    rows.append({**params, "run_id": "r", "test": 1, "repeat": 1, "role": "pub",
                 "kind": "summary", "metric": "cpu_per_message_us", "t": math.nan,
                 "value": 40.0})
    reps = fan._per_repeat(pd.DataFrame(rows))
    assert list(reps["pub_cpu_us"]) == [40.0]
