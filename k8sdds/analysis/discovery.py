"""Discovery, in a table and a line: per datapath, discovery mode and number of
participants (a `dds-discovery` or `zenoh-discovery` test: the mode is the engine's word for
it, `multicast`, `peers`, `zenoh scouting`, `zenoh peers`, `zenoh router`), how long until
every participant had matched (Zenoh: known) every peer, and what discovery cost each
node's network interface while it ran and at steady state; with the repeats that did not
discover at all. Pure: loaded runs in, a table and sentences out.

The figures, per repeat, then over the repeats (mean and 95 % interval, Student's t):
- **time**: the slowest participant's discovery time (they start together at one instant,
  so it is when the last of them had matched everyone: "16 participants matched in 1.8 s");
  beside it the median participant's;
- **traffic per node**: what crossed a node's uplink, in and out, read from its own
  counters (sampled every 50 ms where the backend can: Backend.count_traffic): the bytes
  from the common start until the last participant had matched everyone, those bytes a
  second, and bytes a second over the steady window after it (from 2 s after, as long as
  the test's duration). The mean over the nodes is the figure. Traffic between pods of one
  node never crosses its uplink and is not counted; encapsulation is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import pandas as pd

from k8sdds.analysis.stats import summarize
from k8sdds.engines import registry
from k8sdds.engines.discovery import SETTLE, DiscoveryTest
from k8sdds.parsers import counters
from k8sdds.parsers import discovery as parsed
from k8sdds.results import ManifestError, RepeatKey

# the discovery tests' engines, each naming its modes
ENGINES = {n: e for n, e in registry().items() if isinstance(e, DiscoveryTest)}
KEYS = ["datapath", "discovery", "participants"]
SHARED = "node-node"  # the path whose participants share their node's interface
PHASES = ("discovery", "steady")
TRAFFIC = ("discovery_bytes", "discovery_bytes_per_s", "discovery_packets_per_s",
           "steady_bytes_per_s", "steady_packets_per_s")


def modes(manifests: Mapping[str, dict]) -> dict[tuple[str, int, int], str]:
    """(run id, test, repeat) -> the discovery mode the repeat ran with (the manifest's:
    the schedule may leave it to the datapath)."""
    out = {}
    for rid, m in manifests.items():
        for key, entry in (m.get("repeats") or {}).items():
            try:
                k = RepeatKey.parse(key)
            except ManifestError:
                continue
            out[(rid, k.test, k.repeat)] = str(entry.get("discovery") or "")
    return out


def _node_traffic(samples: pd.DataFrame, start: float, end: float, duration: float
                  ) -> dict[str, float]:
    """One repeat's traffic on the nodes' uplinks (their sampled counters, `samples`: t in
    seconds since the instant all started at): bytes and packets in and out from the
    common start to the last participant's discovery (`start`, `end`), and a second over
    the steady window (from SETTLE after `end`, `duration` long); each the mean over the
    nodes. NaN where the samples do not cover a span."""
    out: dict[str, list[float]] = {k: [] for k in TRAFFIC}
    steady = (end + SETTLE, end + SETTLE + duration)
    for _, rows in samples.groupby("node"):
        for unit in ("bytes", "packets"):
            mine = rows[rows["metric"].isin([f"node_rx_{unit}", f"node_tx_{unit}"])]
            total = mine.groupby("t")["value"].sum().sort_index()
            if len(total) < 2:
                continue
            t, v = total.index.to_numpy(), total.to_numpy()

            def between(a: float, b: float, t=t, v=v) -> float:
                if a < t[0] or b > t[-1] or b <= a:
                    return math.nan
                return float(np.interp(b, t, v) - np.interp(a, t, v))
            spent = between(start, end)
            if unit == "bytes":
                out["discovery_bytes"].append(spent)
            out[f"discovery_{unit}_per_s"].append(spent / (end - start)
                                                  if end > start else math.nan)
            out[f"steady_{unit}_per_s"].append(between(*steady) / duration)
    return {k: float(np.nanmean(v)) if v and not all(map(math.isnan, v)) else math.nan
            for k, v in out.items()}


def repeats(runs) -> pd.DataFrame:
    """One row per repeat of a discovery test: its datapath, mode, participants, the
    slowest and the median participant's time (s), the latest start after the common
    instant (s), and what crossed a node's uplink (the mean over the nodes): the bytes
    discovery took, and bytes and packets a second in each phase."""
    res = runs.results
    res = res[res["engine"].isin(list(ENGINES))] if not res.empty else res
    if res.empty:
        return pd.DataFrame()
    mode = modes(runs.manifests)
    repeat = ["run_id", "test", "repeat"]
    nodes = dict(list(res[res["role"] == counters.ROLE].groupby(repeat)))
    out = []
    for (rid, test, rep), rows in res[res["kind"] == "summary"].groupby(repeat):
        done = rows[rows["metric"] == parsed.TIME].set_index("role")["value"]
        late = rows[rows["metric"] == parsed.LATE].set_index("role")["value"]
        times = done.to_numpy()
        first = rows.iloc[0]
        # each participant's discovery on the clock all started by (RoleContext.start_at)
        ends = (late + done).dropna()
        row = {"run_id": rid, "test": int(test), "repeat": int(rep),
               "datapath": first["datapath"],
               "discovery": ENGINES[first["engine"]].mode(
                   str(first["topology"]),
                   mode.get((rid, int(test), int(rep))) or str(first["discovery"])),
               "participants": int(first["num_subscribers"]) + 1,
               "matched": len(times),
               "time_s": float(times.max()) if len(times) else math.nan,
               "median_s": float(np.median(times)) if len(times) else math.nan,
               "late_s": float(late.max()) if len(late) else math.nan}
        sampled = nodes.get((rid, test, rep))
        row |= _node_traffic(sampled, 0.0, float(ends.max()), float(first["duration"])) \
            if sampled is not None and len(ends) else dict.fromkeys(TRAFFIC, math.nan)
        out.append(row)
    return pd.DataFrame(out)


def _failures(runs) -> pd.DataFrame:
    """The failed repeats of discovery tests: their datapath, mode, participants, reason."""
    out = []
    for m in runs.manifests.values():
        tests = {t.get("number"): t for t in m.get("tests") or []}
        for key, entry in (m.get("repeats") or {}).items():
            if entry.get("status") != "failed":
                continue
            try:
                k = RepeatKey.parse(key)
            except ManifestError:
                continue
            t = tests.get(k.test) or {}
            engine = ENGINES.get(t.get("engine"))
            if engine is None:
                continue
            out.append({"datapath": t.get("datapath"),
                        "discovery": engine.mode(
                            str(t.get("topology") or ""),
                            entry.get("discovery") or t.get("discovery") or ""),
                        "participants": int(t.get("num_subscribers", 0)) + 1,
                        "reason": entry.get("reason") or ""})
    return pd.DataFrame(out, columns=[*KEYS, "reason"])


def _floor(low: float) -> float:
    """An interval's low end, cut at zero (NaN stays: no interval)."""
    return low if math.isnan(low) else max(0.0, low)


def table(runs) -> pd.DataFrame:
    """Per datapath, mode and participants: repeats, failed repeats, the time (s) with its
    interval, the median participant's, and the traffic per node in each phase (kB/s with
    its interval, packets/s)."""
    reps = repeats(runs)
    failed = _failures(runs)
    found = set(map(tuple, failed[KEYS].values.tolist()))
    if not reps.empty:
        found |= set(map(tuple, reps[KEYS].values.tolist()))
    groups = sorted(found, key=lambda k: (str(k[0]), int(k[2]), str(k[1])))
    out = []
    for key in groups:
        mine = reps[(reps[KEYS] == pd.Series(key, index=KEYS)).all(axis=1)] \
            if not reps.empty else reps
        lost = failed[(failed[KEYS] == pd.Series(key, index=KEYS)).all(axis=1)]
        t = summarize(list(mine["time_s"])) if not mine.empty else summarize([])
        row = {**dict(zip(KEYS, key, strict=True)), "repeats": int(t.n),
               "failed": len(lost),
               # an interval's low end below zero is cut there: no time or rate is negative
               "time_s": t.mean, "time_low": _floor(t.ci_low), "time_high": t.ci_high,
               "median_s": float(mine["median_s"].mean()) if not mine.empty else math.nan,
               "late_s": float(mine["late_s"].max()) if not mine.empty else math.nan,
               "why_failed": "; ".join(dict.fromkeys(lost["reason"]))[:300],
               "discovery_kB": float(mine["discovery_bytes"].mean() / 1000)
               if not mine.empty else math.nan}
        for phase in PHASES:
            b = summarize(list(mine[f"{phase}_bytes_per_s"] / 1000)) if not mine.empty \
                else summarize([])
            row |= {f"{phase}_kBps": b.mean, f"{phase}_kBps_low": _floor(b.ci_low),
                    f"{phase}_kBps_high": b.ci_high,
                    f"{phase}_pps": float(mine[f"{phase}_packets_per_s"].mean())
                    if not mine.empty else math.nan}
        out.append(row)
    return pd.DataFrame(out)


def duration(seconds: float) -> str:
    """`18 ms`, `1.84 s`."""
    return f"{seconds * 1000:.3g} ms" if seconds < 1 else f"{seconds:.3g} s"


def size(kilobytes: float) -> str:
    """`556 kB`, `2.68 MB`."""
    return f"{kilobytes:.3g} kB" if kilobytes < 1000 else f"{kilobytes / 1000:.3g} MB"


def _time(row) -> str:
    """`1.84 s (1.71 s to 1.97 s, 3 repeats)`, or `1.84 s (1 repeat, no interval)`."""
    if row["repeats"] >= 2 and not math.isnan(row["time_low"]):
        return (f"{duration(row['time_s'])} ({duration(row['time_low'])} to "
                f"{duration(row['time_high'])}, {row['repeats']} repeats)")
    return f"{duration(row['time_s'])} (1 repeat, no interval)"


def sentences(tab: pd.DataFrame) -> list[str]:
    """One line per datapath and number of participants, the modes side by side:
    `discovery on flannel-vxlan, 16 participants: peers 412 ms (380 ms to 440 ms, 3
    repeats), 96 kB a node, then 33 kB/s steady`; a mode whose repeats all failed says why,
    and one whose some failed says how many."""
    lines = []
    if tab.empty:
        return lines
    for (dp, n), rows in tab.groupby(["datapath", "participants"], sort=False):
        parts = []
        for _, r in rows.iterrows():
            if r["repeats"] == 0:
                parts.append(f"{r['discovery']} did not match every peer in any of "
                             f"{r['failed']} repeats ({r['why_failed']})")
                continue
            text = f"{r['discovery']} {_time(r)}, " + (
                f"{size(r['discovery_kB'])} a node, then {size(r['steady_kBps'])}/s steady"
                if not math.isnan(r["discovery_kB"]) else "no node's traffic read")
            if r["failed"]:
                text += (f" ({r['failed']} of {r['repeats'] + r['failed']} repeats did not "
                         f"match every peer: {r['why_failed']})")
            parts.append(text)
        lines.append(f"discovery on {dp}, {n} participants: " + "; ".join(parts))
    return lines
