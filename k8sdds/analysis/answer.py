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
                            row["mean"], (row["mean"] / h["mean"] - 1) * 100, noise, conf))
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


def sentences(found: list[Cost]) -> list[str]:
    """One sentence per datapath: its throughput cost at each payload and what it adds to
    the round trip, against host."""
    lines = []
    for dp in dict.fromkeys(c.datapath for c in found):
        mine = [c for c in found if c.datapath == dp]
        parts = []
        thr = [c for c in mine if c.metric == "throughput"]
        if thr:
            parts.append("throughput " + ", ".join(
                f"{_change(c, 'costs', 'gains')} at {_size(c.data_len)}" for c in thr))
        for name in ("p50", "p99"):
            lat = [c for c in mine if c.metric == name]
            if lat:
                parts.append(f"{name} round trip " + ", ".join(
                    f"{_change(c, 'gains', 'adds')} at {_size(c.data_len)}" for c in lat))
        cpu = [c for c in mine if c.metric == "cpu"]
        if cpu:
            parts.append("subscriber CPU " + ", ".join(
                f"{_change(c, 'saves', 'adds')} at {_size(c.data_len)}" for c in cpu))
        lines.append(f"{dp} against host: " + "; ".join(parts) + ".")
    return lines


def _change(c: Cost, down: str, up: str) -> str:
    """'costs 41 %' / 'adds 4 %' / 'within noise (+1 %)'."""
    if c.noise:
        return f"within noise ({c.change_pct:+.0f} %)"
    word = down if c.change_pct < 0 else up
    unsure = " (one repeat: no interval)" if c.noise is None else ""
    return f"{word} {abs(c.change_pct):.0f} %{unsure}"


def table(found: list[Cost]) -> pd.DataFrame:
    """The answer as a table: one row per datapath, metric and payload."""
    return pd.DataFrame([{
        "datapath": c.datapath, "metric": c.metric, "payload": _size(c.data_len),
        "host": c.host, "datapath value": c.value, "change %": c.change_pct,
        "within noise": {True: "yes", False: "no", None: "unknown"}[c.noise],
        "confidence": c.confidence}
        for c in found])
