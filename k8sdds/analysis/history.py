"""A metric across runs (a regression view, as asv and Orion draw it): each test's mean per
run in the order the runs were made, and the change points in that series found by Apache
Otava's e-divisive means with its significance test (`otava.analysis.compute_change_points`,
Hunter's algorithm: what Orion uses), not a last-run-against-the-rest t-test that flags noise
as often as it misses a slow drift. Each change says when, how much, whether it is a
regression (by the metric's direction: verdict.rise_is_better), and what else changed
between the two runs around it (their manifests: comparable.differences).

The search runs on the logarithm of the means where they are all positive: a network
figure's noise grows with its level (a share of it, not a fixed amount), and Otava's
Student's t-test assumes both segments equally noisy. On the raw means, a drop from a noisy
700 Mb/s to a steady 65 Mb/s over three runs each went unfound on a loaded machine; on
their logarithms both segments are about as noisy and it is found. A change's `before` and
`after` are still the plain means of the runs of its two segments, in the metric's unit.

Otava is used as a library: its package pins numpy 2.2 and scipy below 1.17 and pulls its
command line's clients (BigQuery, Slack, PostgreSQL); `otava.analysis` imports only numpy and
scipy, so `make install` installs it without those (`pip install --no-deps`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from k8sdds.analysis import cells as cell_table
from k8sdds.analysis import verdict
from k8sdds.analysis.load import Runs
from k8sdds.errors import UserError

MAX_PVALUE = 0.001  # Otava's default: a change point's t-test between its two segments
WINDOW = 50  # Otava's default window (runs) for its split step
OTAVA = "0.8.0"  # the version tested (Makefile's OTAVA)


def series(runs: Runs, metric: str = "throughput_mbps") -> pd.DataFrame:
    """Rows of (test, metric, run_id, created, mean, repeats, unit), oldest run first, for
    the tests of `metric` present in at least two runs; empty when there is no such history.
    A test is named as the exports name it (cells.name): the same test in every run."""
    table = cell_table.cells(runs.results, metric)
    if table.empty:
        return pd.DataFrame(columns=["test", "metric", "run_id", "created", "mean", "repeats",
                                     "unit"])
    created = {rid: str(m.get("created", "")) for rid, m in runs.manifests.items()}
    out = pd.DataFrame({"test": [cell_table.name(c) for c in table.to_dict("records")],
                        "metric": table["metric"].values, "run_id": table["run_id"].values,
                        "created": table["run_id"].map(created).values,
                        "mean": table["mean"].values, "repeats": table["repeats"].values,
                        "unit": table["unit"].values})
    counts = out.groupby("test")["run_id"].nunique()
    out = out[out["test"].isin(counts[counts >= 2].index)]
    return out.sort_values(["test", "created", "run_id"]).reset_index(drop=True)


@dataclass(frozen=True)
class ChangePoint:
    """A change point in one test's series: from the run `run_id` on, the mean moved."""

    test: str
    metric: str
    run_id: str  # the first run after the change
    created: str
    before: float  # the mean of the runs of the segment before it
    after: float  # and of the segment after it
    change_pct: float
    p_value: float
    regression: bool | None  # None: the metric has no better direction
    changed_with: tuple[str, ...]  # what else differs between the runs on either side

    def said(self) -> str:
        kind = {True: "regression", False: "improvement", None: "change"}[self.regression]
        line = (f"{self.test}: {self.metric} {self.before:.4g} -> {self.after:.4g} "
                f"({self.change_pct:+.1f} %, p = {self.p_value:.2g}) from run {self.run_id}"
                f" ({self.created[:19] or 'time unknown'}): {kind}")
        if self.changed_with:
            line += "; changed with it: " + "; ".join(self.changed_with)
        return line


def changes(hist: pd.DataFrame, manifests: dict[str, dict], max_pvalue: float = MAX_PVALUE
            ) -> list[ChangePoint]:
    """The change points of each test's series in `hist` (series()), oldest first per
    test."""
    try:
        from otava.analysis import compute_change_points
    except ImportError:
        raise UserError("change points need Apache Otava: pip install --no-deps "
                        f"apache-otava=={OTAVA} (`make install` does)") from None

    found = []
    for (test, metric), g in hist.groupby(["test", "metric"], sort=True):
        g = g.reset_index(drop=True)
        means = g["mean"].astype(float).to_numpy()
        points, _ = compute_change_points(searched(means).tolist(), window_len=WINDOW,
                                          max_pvalue=max_pvalue)
        edges = [0, *sorted(int(p.index) for p in points), len(means)]
        better = verdict.rise_is_better(metric)
        for point in points:
            i = int(point.index)
            k = edges.index(i)
            first, second = means[edges[k - 1]:i].mean(), means[i:edges[k + 1]].mean()
            pct = float((second / first - 1) * 100 if first  # from 0 (a loss appears): inf
                        else math.copysign(math.inf, second) if second else 0.0)
            before, now = g.loc[i - 1, "run_id"], g.loc[i, "run_id"]
            found.append(ChangePoint(
                test=test, metric=metric, run_id=now, created=g.loc[i, "created"],
                before=float(first), after=float(second), change_pct=pct,
                p_value=float(point.stats.pvalue),
                regression=None if better is None or pct == 0 else (pct > 0) != better,
                changed_with=tuple(_changed(manifests.get(before, {}),
                                            manifests.get(now, {})))))
    return found


def searched(means: np.ndarray) -> np.ndarray:
    """What the change points are searched in: the logarithms of `means` where they are all
    positive (relative noise, as a network figure's is), else the means as they are."""
    return np.log(means) if len(means) and (means > 0).all() else means


def _changed(before: dict, now: dict) -> list[str]:
    """What differs between two runs' manifests besides the tests: the machine, kernel,
    engines, backend and profiles (comparable.differences), then the nodes' fingerprints."""
    from k8sdds import fingerprint
    from k8sdds.analysis.comparable import differences

    return differences(before, now) + fingerprint.differences(
        before.get("fingerprints") or {}, now.get("fingerprints") or {})


def failing(found: list[ChangePoint], bound_pct: float) -> list[ChangePoint]:
    """The tests whose newest change point is a regression beyond `bound_pct` (%)."""
    newest: dict[tuple[str, str], ChangePoint] = {}
    for change in found:
        newest[(change.test, change.metric)] = change  # oldest first: the last one stays
    return [c for c in newest.values() if c.regression and abs(c.change_pct) > bound_pct]


def table(found: list[ChangePoint]) -> pd.DataFrame:
    """The changes as a table (the report's)."""
    return pd.DataFrame([{"test": c.test, "from run": c.run_id, "before": c.before,
                          "after": c.after, "change %": c.change_pct, "p": c.p_value,
                          "kind": {True: "regression", False: "improvement",
                                   None: "change"}[c.regression],
                          "changed with it": "; ".join(c.changed_with) or "-"}
                         for c in found])
