"""A metric across runs of the same schedule (a regression view, as asv draws it): each
test's mean per run in the order the runs were made, and whether the last run differs
significantly from the runs before it (Welch's t-test over their repeat values)."""

from __future__ import annotations

import pandas as pd

from k8sdds.analysis.load import MEASURING, PARAMS, Runs, repeat_values
from k8sdds.analysis.stats import significance


def _label(key: tuple) -> str:
    row = dict(zip(PARAMS, key, strict=True))
    kind = "latency" if row["latency_test"] else "throughput"
    return f"{row['datapath']} {row['transport']} {row['data_len']} B {kind}"


def series(runs: Runs, metric: str = "throughput_mbps") -> pd.DataFrame:
    """Rows of (test, run_id, created, mean, repeats) for tests present in at least two
    runs that share a schedule (same SHA-256); empty when there is no such history."""
    by_schedule: dict[str, list[str]] = {}
    for rid, m in runs.manifests.items():
        digest = (m.get("schedule") or {}).get("sha256")
        if digest:
            by_schedule.setdefault(digest, []).append(rid)
    group = max(by_schedule.values(), key=len, default=[])
    if len(group) < 2:
        return pd.DataFrame()
    created = {rid: str(runs.manifests[rid].get("created", "")) for rid in group}
    rv = repeat_values(runs.results, metric, MEASURING)
    rv = rv[rv["run_id"].isin(group) & ~rv["latency_test"]]
    rows = []
    for key, g in rv.groupby(PARAMS, dropna=False):
        for rid, r in g.groupby("run_id"):
            rows.append({"test": _label(key), "run_id": rid, "created": created[rid],
                         "mean": r["value"].mean(), "repeats": len(r),
                         "values": r["value"].tolist()})
    df = pd.DataFrame(rows)
    if df.empty:
        return df
    counts = df.groupby("test")["run_id"].nunique()
    return df[df["test"].isin(counts[counts >= 2].index)].sort_values(["test", "created"])


def last_against_earlier(hist: pd.DataFrame) -> pd.DataFrame:
    """Per test: the last run's mean, the earlier runs' mean, the change and its
    significance (repeat values of the last run against those of all earlier runs)."""
    rows = []
    for test, g in hist.groupby("test", sort=True):
        last, earlier = g.iloc[-1], g.iloc[:-1]
        before = [v for vs in earlier["values"] for v in vs]
        sig = significance(before, last["values"])
        mean_before = sum(before) / len(before)
        rows.append({"test": test, "runs": len(g), "last run": last["run_id"],
                     "earlier mean": mean_before, "last mean": last["mean"],
                     "change %": (last["mean"] / mean_before - 1) * 100 if mean_before else None,
                     "p": sig.p_value if sig else None,
                     "significant": ("yes" if sig.significant else "no") if sig else "-"})
    return pd.DataFrame(rows)
