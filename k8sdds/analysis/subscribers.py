"""One publisher and 1 to N subscribers, in a table and a line: per datapath and throughput
test, for each number of subscribers by unicast and by multicast, each subscriber's and the
aggregate throughput, the loss, and the publisher's CPU per message it sent, each with its
95 % interval over the repeats; and where multicast overtakes unicast (the fewest
subscribers at which its aggregate throughput is above unicast's with the intervals apart),
or why it cannot on a datapath that does not carry multicast. Pure: loaded runs in, a table
and sentences out.

The publisher's CPU per message, in µs: what each message cost it, whether sent once to a
group or once to every subscriber. Where the backend reads it (emulated), it is the
`cpu_per_message_us` of results.csv: the kernel's account of the publisher's process over
the samples its subscribers saw (parsers.cpu); elsewhere (kubernetes, ssh, and runs made
before that figure), ddsperf's own: its threads' CPU as it prints them each second over
the samples it wrote in the same seconds."""

from __future__ import annotations

import math

import pandas as pd

from k8sdds.analysis.load import REPEAT, summaries
from k8sdds.analysis.numbers import three
from k8sdds.analysis.stats import summarize
from k8sdds.analysis.verdict import Side
from k8sdds.results.schema import PARAMS

# what makes two rows the same stream to 1 to N subscribers
KEYS = ["datapath", "engine", "transport", "path", "data_len", "best_effort"]
FIGURES = ("per_sub_mbps", "aggregate_mbps", "loss_pct", "pub_cpu_us")


def _per_repeat(res: pd.DataFrame) -> pd.DataFrame:
    """One row per repeat of a throughput test: its parameters, each subscriber's mean
    throughput, their sum, the loss in % of what was sent to them, and the publisher's CPU
    per message (µs)."""
    res = res[~res["latency_test"].astype(bool)]
    by = PARAMS + REPEAT

    def summed(metric: str, role: str) -> pd.Series:
        s = summaries(res, metric)
        return s[s["role"].str.startswith(role)].groupby(by, dropna=False)["value"].sum()

    thr = summaries(res, "throughput_mbps")
    thr = thr[thr["role"].str.startswith("sub")].groupby(by, dropna=False)["value"]
    out = pd.DataFrame({"per_sub_mbps": thr.mean(), "aggregate_mbps": thr.sum()})
    lost, got = summed("lost", "sub"), summed("received", "sub")
    out["loss_pct"] = (lost / (lost + got) * 100).reindex(out.index)
    out["pub_cpu_us"] = _cpu_per_message(res, by).reindex(out.index)
    return out.reset_index()


def _cpu_per_message(res: pd.DataFrame, by: list[str]) -> pd.Series:
    """Per repeat, the publisher's CPU per sample it wrote (µs): the kernel's account
    (`cpu_per_message_us`) where the repeat has it, else ddsperf's (`_printed_per_message`)."""
    kernel = summaries(res, "cpu_per_message_us")
    kernel = kernel[kernel["role"] == "pub"].groupby(by, dropna=False)["value"].first()
    printed = _printed_per_message(res, by)
    return kernel.combine_first(printed) if not kernel.empty else printed


def _printed_per_message(res: pd.DataFrame, by: list[str]) -> pd.Series:
    """Per repeat, the publisher's CPU per sample it wrote (µs), over the same seconds for
    both: ddsperf prints, each second, the samples its writer wrote and each of its threads'
    CPU (user and system, % of a core; threads under 0.5 % summed as `others`): the CPU
    seconds of the seconds it wrote in, over the samples written in them."""
    pub = res[(res["role"] == "pub") & (res["kind"] == "sample")
              & res["metric"].isin(["cpu_pct", "samples_per_s"])]
    wide = pub.pivot_table(index=[*by, "t"], columns="metric", values="value",
                           aggfunc="first").dropna()
    if wide.empty or "samples_per_s" not in wide:
        return pd.Series(dtype=float)
    wide = wide[wide["samples_per_s"] > 0]
    sums = wide.groupby(level=by, dropna=False)[["cpu_pct", "samples_per_s"]].sum()
    return sums["cpu_pct"] / 100 / sums["samples_per_s"] * 1e6


def table(runs) -> pd.DataFrame:
    """Per datapath, throughput test, delivery (unicast, multicast) and subscribers, where
    some test of the runs has more than one subscriber: the repeats and each figure's mean
    with its interval (`_low`, `_high`)."""
    res = runs.results
    if res.empty or res["num_subscribers"].max() < 2:
        return pd.DataFrame()
    reps = _per_repeat(res)
    if reps.empty:
        return pd.DataFrame()
    rows = []
    group = [*KEYS, "multicast", "num_subscribers"]
    for key, g in reps.groupby(group, dropna=False):
        row = dict(zip(group, key, strict=True)) | {"repeats": len(g)}
        for figure in FIGURES:
            s = summarize([v for v in g[figure] if not math.isnan(v)])
            low = s.ci_low if math.isnan(s.ci_low) else max(0.0, s.ci_low)  # none negative
            row |= {figure: s.mean, f"{figure}_low": low, f"{figure}_high": s.ci_high}
        rows.append(row)
    out = pd.DataFrame(rows)
    out["delivery"] = out["multicast"].map({True: "multicast", False: "unicast"})
    return out.sort_values(group).reset_index(drop=True)


def _side(row, figure: str) -> Side:
    return Side(row[figure], row[f"{figure}_low"], row[f"{figure}_high"], int(row["repeats"]))


def _pairs(g: pd.DataFrame) -> list[tuple[int, Side, Side]]:
    """(subscribers, multicast's aggregate, unicast's) at each count that ran both."""
    uni = g[~g["multicast"]].set_index("num_subscribers")
    multi = g[g["multicast"]].set_index("num_subscribers")
    return [(n, _side(multi.loc[n], "aggregate_mbps"), _side(uni.loc[n], "aggregate_mbps"))
            for n in sorted(set(uni.index) & set(multi.index))]


def crossover(g: pd.DataFrame) -> tuple[int | None, str]:
    """The fewest subscribers at which multicast's aggregate throughput is above unicast's,
    the intervals apart, and what backs it; None and why where it is nowhere."""
    pairs = _pairs(g)
    if not pairs:
        return None, "no subscriber count ran both unicast and multicast"
    unbacked = []
    for n, m, u in pairs:
        if not (m.interval and u.interval):
            unbacked.append(n)
        elif m.low > u.high:
            return n, (f"{three(m.mean)} against {three(u.mean)} Mb/s in all, the intervals "
                       "apart")
    if unbacked:
        rest = ("" if len(unbacked) == len(pairs)
                else "; elsewhere not above unicast beyond noise")
        return None, (f"no verdict at {', '.join(map(str, unbacked))} subscribers (one "
                      f"repeat: no interval){rest}")
    return None, f"not above unicast beyond noise up to {pairs[-1][0]} subscribers"


def _judged(g: pd.DataFrame) -> bool:
    """Whether some subscriber count ran both deliveries with an interval on each side (a
    schedule's two identical rows give one side two values, the other still one)."""
    return any(m.interval and u.interval for _, m, u in _pairs(g))


def sentences(tab: pd.DataFrame, not_applicable: list[dict] = ()) -> list[str]:
    """Per datapath and throughput test with more than one subscriber count: each
    subscriber's throughput and the publisher's CPU per message from the fewest to the most
    subscribers, by each delivery, and where multicast overtakes unicast (or why not)."""
    lines = []
    if tab.empty:
        return lines
    for key, g in tab.groupby(KEYS, dropna=False, sort=False):
        if g["num_subscribers"].nunique() < 2:
            continue
        dp, engine, transport, _, data_len, _ = key
        parts = []
        for delivery, d in g.groupby("delivery", sort=False):
            lo, hi = d.iloc[0], d.iloc[-1]
            parts.append(
                f"{delivery} {three(lo['per_sub_mbps'])} Mb/s a subscriber at "
                f"{int(lo['num_subscribers'])}, {three(hi['per_sub_mbps'])} at "
                f"{int(hi['num_subscribers'])} (the publisher {three(lo['pub_cpu_us'])} µs of CPU "
                f"a message, then {three(hi['pub_cpu_us'])})")
        if g["multicast"].any():
            n, why = crossover(g)
            if n:
                parts.append(f"multicast overtakes unicast at {n} subscribers ({why})")
            elif not _judged(g):  # no count with an interval on both sides: no claim
                parts.append(f"where multicast overtakes unicast is not said ({why})")
            else:
                parts.append(f"multicast does not overtake unicast ({why})")
        else:
            left = [na["reason"] for na in not_applicable
                    if na.get("datapath") == dp and na.get("column") == "multicast"]
            parts.append("no multicast on it" + (f": {left[0]}" if left else " in these runs"))
        lines.append(f"1 to N subscribers on {dp} ({engine} {transport} {int(data_len)} B): "
                     + "; ".join(parts))
    return lines
