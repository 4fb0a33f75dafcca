"""The round trip under load, in a table and a line: per datapath and round-trip test, its
p50 and p99 on the idle path (`load` empty) and beside a stream of each `load` share, each
with its 95 % interval over the repeats, and what the stream carried (its receiver's Mb/s).
A line says how the round trip grows with the load ("p99 round trip x3.1 at 75% load"), the
ratio of the means, with a verdict word only where the intervals back it
(`verdict.noise`). The table and sentences are pure; `plot` draws the table."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from k8sdds.analysis import plots, styles
from k8sdds.analysis.load import repeat_values
from k8sdds.analysis.numbers import three
from k8sdds.analysis.stats import summarize
from k8sdds.analysis.verdict import Side, noise
from k8sdds.model import SINK

# what makes two rows the same round trip under different loads
KEYS = ["datapath", "engine", "transport", "path", "data_len", "best_effort", "load_len"]
PERCENTILES = ("p50", "p99")


def share(load: str) -> float:
    """A `load` as a number for the axis and the order: the share in %, `max` past 100."""
    if not load:
        return 0.0
    return 120.0 if load == "max" else float(load.rstrip("%"))


def table(runs) -> pd.DataFrame:
    """One row per round-trip test and load of tests that ran under load (with the idle row
    beside them, whose stream size `load_len` is 0): repeats, p50 and p99 (µs) with their
    interval, and the stream's receiver's Mb/s."""
    res = runs.results
    if res.empty or "load" not in res or not res["load"].fillna("").astype(bool).any():
        return pd.DataFrame()
    res = res.assign(load=res["load"].fillna("").astype(str))
    rows = []
    trips = {p: repeat_values(res[res["latency_test"]], f"latency_us_{p}", "pub")
             for p in PERCENTILES}
    carried = repeat_values(res[res["latency_test"]], "throughput_mbps", SINK)
    same = KEYS[:-1]  # the round trip, whatever the stream's sample size
    loaded = trips["p99"][trips["p99"]["load"].astype(bool)]
    wanted = set(map(tuple, loaded[same].values.tolist()))
    group = [*KEYS, "load"]
    for key, g in trips["p99"].groupby(group, dropna=False):
        if tuple(key[:len(same)]) not in wanted:
            continue
        row = dict(zip(group, key, strict=True))
        mask = (trips["p50"][group] == pd.Series(key, index=group)).all(axis=1)
        for p, values in (("p50", trips["p50"][mask]["value"]), ("p99", g["value"])):
            s = summarize(list(values))  # no round trip is negative: a low end cut at 0
            row |= {p: s.mean, f"{p}_low": max(0.0, s.ci_low) if not math.isnan(s.ci_low)
                    else s.ci_low, f"{p}_high": s.ci_high}
        row["repeats"] = len(g)
        got = carried[(carried[group] == pd.Series(key, index=group)).all(axis=1)]
        row["stream_mbps"] = float(got["value"].mean()) if len(got) else math.nan
        rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return out
    out["share"] = out["load"].map(share)
    return out.sort_values([*KEYS, "share"]).reset_index(drop=True)


def _side(row, p: str) -> Side:
    return Side(row[p], row[f"{p}_low"], row[f"{p}_high"], int(row["repeats"]))


def sentences(tab: pd.DataFrame) -> list[str]:
    """Per datapath and round-trip test with an idle row: `round trip under load on
    flannel-vxlan (ddsperf udp 64 B beside 1024 B samples): p99 x3.1 at 75% (the stream
    412 Mb/s), x4.0 at max; p50 x1.1 at 75% (within noise)`."""
    lines = []
    if tab.empty:
        return lines
    for key, same in tab.groupby(KEYS[:-1], dropna=False, sort=False):
        idle = same[same["load"] == ""]
        if idle.empty:
            continue
        base = idle.iloc[0]
        for size, g in same[same["load"] != ""].groupby("load_len"):
            lines.append(_line(key, int(size), base, g))
    return lines


def _line(key: tuple, size: int, base, g: pd.DataFrame) -> str:
    parts = []
    for p in reversed(PERCENTILES):
        said = []
        for _, r in g.iterrows():
            ratio = r[p] / base[p] if base[p] else math.nan
            quiet = noise(_side(r, p), _side(base, p))
            word = {True: " (within noise)", None: " (no verdict: one repeat)"}.get(quiet, "")
            stream = (f", the stream {three(r['stream_mbps'])} Mb/s"
                      if p == "p99" and not math.isnan(r["stream_mbps"]) else "")
            said.append(f"x{three(ratio)} at {r['load']} load{stream}{word}")
        parts.append(f"{p} {three(base[p])} µs idle, " + ", ".join(said))
    dp, engine, transport, _, data_len, _ = key
    return (f"round trip under load on {dp} ({engine} {transport} {int(data_len)} B, the "
            f"stream's samples {size} B): " + "; ".join(parts))


def plot(tab: pd.DataFrame, out: Path) -> str | None:
    """The round trip against the load beside it (`analysis.under_load.table`): p50 and p99
    with their intervals, a line per datapath and stream sample size; `max` past 100 %."""
    if tab.empty:
        return None
    fig, axes = plots.plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, p in zip(axes, ("p50", "p99"), strict=True):
        for dp, g in plots.ordered(tab):
            idle = g[g["load"] == ""]
            for size, d in g[g["load"] != ""].groupby("load_len"):
                d = pd.concat([idle, d]).sort_values("share")
                yerr = np.nan_to_num(np.vstack([d[p] - d[f"{p}_low"], d[f"{p}_high"] - d[p]]))
                ax.errorbar(d["share"], d[p], yerr=yerr, capsize=3, **{
                    **plots.style(dp), "label": f"{styles.label(dp)}, {size} B stream"})
        ax.set_xticks([0, 25, 50, 75, 100, 120], ["idle", "25%", "50%", "75%", "100%", "max"])
        ax.set(xlabel="load: the stream's share of the path's capacity",
               ylabel=f"{p} round trip (µs)")
    axes[0].legend(title="datapath", fontsize=8)
    fig.suptitle("Round trip against the load beside it")
    return plots.save(fig, out, "under_load")
