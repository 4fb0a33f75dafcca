"""The answer, in a few lines: what each datapath costs against the `host` baseline
(throughput at each payload, p50 and p99 round trip), with the confidence of each figure and
a mark where the difference is within noise. Pure: tables in, rows and sentences out."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from k8sdds.analysis.tables import base

# a round-trip difference smaller than this is not claimed (pooled percentiles carry no
# confidence interval of their own)
LATENCY_NOISE_PCT = 3.0


@dataclass(frozen=True)
class Cost:
    datapath: str
    metric: str  # "throughput", "p50", "p99", "cpu"
    data_len: int
    host: float
    value: float
    change_pct: float
    noise: bool | None  # within noise: not shown to be real; None: unknown (one repeat)
    confidence: str  # what backs the figure ("±4 %, 5 repeats", "1200 round trips")
    repeats: int = 1  # repeats behind a mean (a round trip's percentiles are pooled)


def _size(n: int) -> str:
    return f"{n // 1024} KiB" if n >= 1024 and n % 1024 == 0 else f"{n} B"


def costs(thr: pd.DataFrame, lat: pd.DataFrame, cpu: pd.DataFrame | None = None
          ) -> list[Cost]:
    """Every datapath's change against host on the payload sweep (same other parameters):
    throughput, p50 and p99 round trip, and (`cpu`: the same table as `thr` of the
    subscribers' CPU) what the subscribers' CPU becomes."""
    out = _means(thr, "throughput")
    out += _latency(lat)
    if cpu is not None:
        out += _means(cpu, "cpu")
    order = {"throughput": 0, "p50": 1, "p99": 2, "cpu": 3}
    return sorted(out, key=lambda c: (c.datapath, order[c.metric], c.data_len))


def _means(thr: pd.DataFrame, metric: str) -> list[Cost]:
    """Changes of a mean over repeats, within noise where the 95 % intervals overlap."""
    out: list[Cost] = []
    t = base(thr) if not thr.empty else thr
    if not t.empty and "host" in set(t["datapath"]):
        host = t[t["datapath"] == "host"].set_index("data_len")
        for _, row in t[t["datapath"] != "host"].sort_values(["datapath", "data_len"]).iterrows():
            if row["data_len"] not in host.index:
                continue
            h = host.loc[row["data_len"]]
            overlap = not (row["ci_high"] < h["ci_low"] or row["ci_low"] > h["ci_high"])
            noise = None if pd.isna(row["ci_low"]) or pd.isna(h["ci_low"]) else bool(overlap)
            half = (row["ci_high"] - row["ci_low"]) / 2 / row["mean"] * 100 if row["mean"] else 0
            conf = (f"±{half:.0f} %, {int(row['repeats'])} repeats" if not pd.isna(half)
                    else f"{int(row['repeats'])} repeat, no interval")
            if not h["mean"]:
                continue
            out.append(Cost(row["datapath"], metric, int(row["data_len"]), h["mean"],
                            row["mean"], (row["mean"] / h["mean"] - 1) * 100, noise, conf,
                            min(int(row["repeats"]), int(h["repeats"]))))
    return out


def _latency(lat: pd.DataFrame) -> list[Cost]:
    out: list[Cost] = []
    la = base(lat) if not lat.empty else lat
    if not la.empty and "host" in set(la["datapath"]):
        host = la[la["datapath"] == "host"].set_index("data_len")
        for _, row in la[la["datapath"] != "host"].sort_values(
                ["datapath", "data_len"]).iterrows():
            if row["data_len"] not in host.index:
                continue
            h = host.loc[row["data_len"]]
            for name in ("p50", "p99"):
                if pd.isna(row[name]) or pd.isna(h[name]) or not h[name]:
                    continue
                change = (row[name] / h[name] - 1) * 100
                enough = bool(row.get(f"{name}_enough", True))
                out.append(Cost(row["datapath"], name, int(row["data_len"]), h[name],
                                row[name], change,
                                abs(change) < LATENCY_NOISE_PCT or not enough,
                                f"{int(row['roundtrips'])} round trips"))
    return out


# how each metric reads: its words, and whether a rise is better
METRICS = {"throughput": ("throughput", True), "p50": ("p50 round trip", False),
           "p99": ("p99 round trip", False), "cpu": ("subscriber CPU", False)}


def sentences(found: list[Cost]) -> list[str]:
    """One line per datapath, read at a glance: for each metric its largest change against
    host (said better or worse in words) and, over a sweep, its smallest; then what backs the
    figures ("flannel-vxlan: throughput -45 % at 1 KiB (worse), -3 % at 16 KiB; p50 round
    trip +25 % at 256 B (worse); one repeat, no interval")."""
    lines = []
    for dp in dict.fromkeys(c.datapath for c in found):
        mine = [c for c in found if c.datapath == dp]
        parts = [_phrase(name, [c for c in mine if c.metric == metric])
                 for metric, (name, _) in METRICS.items()
                 if any(c.metric == metric for c in mine)]
        lines.append(f"{dp}: " + "; ".join(parts) + _backing(mine))
    return lines


def _phrase(name: str, mine: list[Cost]) -> str:
    """'throughput -45 % at 1 KiB (worse), -3 % at 16 KiB' or 'p99 round trip within noise'."""
    claimed = [c for c in mine if not c.noise]
    if not claimed:
        return f"{name} within noise"
    big = max(claimed, key=lambda c: abs(c.change_pct))
    text = f"{name} {_signed(big)} at {_size(big.data_len)} ({_verdict(big)})"
    small = min(mine, key=lambda c: 0.0 if c.noise else abs(c.change_pct))
    if small is not big:
        said = "within noise" if small.noise else _signed(small)
        text += f", {said} at {_size(small.data_len)}"
    return text


def _signed(c: Cost) -> str:
    return f"{c.change_pct:+.0f} %"


def _verdict(c: Cost) -> str:
    rise_is_better = METRICS[c.metric][1]
    return "better" if (c.change_pct > 0) == rise_is_better else "worse"


def _backing(mine: list[Cost]) -> str:
    """What the means rest on: repeats and intervals (percentiles are pooled, not averaged)."""
    means = [c for c in mine if c.metric in ("throughput", "cpu")]
    if not means:
        return ""
    if any(c.noise is None for c in means):
        return "; one repeat, no interval"
    repeats = min(c.repeats for c in means)
    return f"; {repeats} repeats, 95 % intervals"


def table(found: list[Cost]) -> pd.DataFrame:
    """The answer as a table: one row per datapath, metric and payload."""
    return pd.DataFrame([{
        "datapath": c.datapath, "metric": c.metric, "payload": _size(c.data_len),
        "host": c.host, "datapath value": c.value, "change %": c.change_pct,
        "within noise": {True: "yes", False: "no", None: "unknown"}[c.noise],
        "confidence": c.confidence}
        for c in found])
