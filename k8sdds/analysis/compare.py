"""`k8sdds compare A B`: per test and metric, each side's mean over repeats with its interval
and n, the change and its verdict, judged over repeat values (Welch's t by default); and
`--fail-if` bounds that make it a CI gate, failing only on a significant change beyond a
bound and saying so, with an exit status of its own, where it cannot judge."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from k8sdds.analysis import verdict
from k8sdds.analysis.cells import roles
from k8sdds.analysis.load import PARAMS, Runs, load, repeat_values
from k8sdds.analysis.stats import Significance, significance, summarize
from k8sdds.errors import UserError

BOUND = re.compile(r"^(?P<metric>[a-z0-9_]+):(?P<pct>[+-]\d+(?:\.\d+)?)%$")


@dataclass(frozen=True)
class Bound:
    metric: str
    pct: float  # negative: fail on a drop beyond it; positive: on a rise beyond it


def parse_bound(text: str) -> Bound:
    m = BOUND.match(text.strip())
    if not m:
        raise UserError(f"--fail-if {text!r}: expected METRIC:+N% or METRIC:-N%, e.g. "
                        "throughput_mbps:-5%")
    return Bound(m["metric"], float(m["pct"]))


def _label(key: dict, params: list[str]) -> str:
    """A short name for a test: `flannel-vxlan tcp 4096 B 2 sub best-effort`."""
    words = {"data_len": "{} B", "num_subscribers": "{} sub", "batch_size": "batch {}"}
    flags = {"best_effort": ("best-effort", "reliable"), "latency_test": ("latency", "throughput"),
             "multicast": ("multicast", "unicast")}
    parts = []
    for p in params:
        v = key[p]
        if p in flags:
            parts.append(flags[p][0] if v else flags[p][1])
        else:
            parts.append(words.get(p, "{}").format(v))
    return " ".join(parts)


def _name(run: Path | Runs) -> str:
    return ", ".join(run.manifests) if isinstance(run, Runs) else str(run)


def _results(run: Path | Runs) -> pd.DataFrame:
    return (run if isinstance(run, Runs) else load([run])).results


def compared(baseline: Path | Runs, contender: Path | Runs) -> list[str]:
    """The parameters the comparison is about: each one the two runs hold at one value
    each, but different values ("datapath: host -> flannel-vxlan")."""
    a, b = _results(baseline), _results(contender)
    return [f"{p}: {a[p].iloc[0]} -> {b[p].iloc[0]}" for p in PARAMS
            if a[p].nunique() == 1 and b[p].nunique() == 1 and a[p].iloc[0] != b[p].iloc[0]]


def compare(baseline: Path | Runs, contender: Path | Runs, metrics: Sequence[str],
            test: str = "welch",
            ) -> list[dict]:
    """One row per test present in both runs and per metric: each side's mean over its
    repeats (a percentile: each repeat's, then the mean) with its 95 % interval and n, the
    change, and whether it is significant by `test` over the repeat values (never the
    per-second samples of a repeat: they share its machine's state); with fewer than two
    repeats a side, or too few for `test` to reach 0.05, no verdict (`significant` None)."""
    a, b = _results(baseline), _results(contender)
    # a parameter each run holds constant but at different values (say, the datapath) is
    # what is being compared, not part of what identifies a test
    params = [p for p in PARAMS if not (a[p].nunique() == 1 and b[p].nunique() == 1
                                        and a[p].iloc[0] != b[p].iloc[0])]
    shown = [p for p in params if a[p].nunique() > 1 or b[p].nunique() > 1] or ["data_len"]
    rows = []
    for metric in metrics:
        va = repeat_values(a, metric, roles(metric))
        vb = repeat_values(b, metric, roles(metric))
        if va.empty or vb.empty:
            continue
        for key, ga in va.groupby(params, dropna=False):
            key = dict(zip(params, key if isinstance(key, tuple) else (key,), strict=True))
            gb = vb.loc[(vb[params] == pd.Series(key)).all(axis=1)]
            if gb.empty:
                continue
            xa, xb = ga["value"].tolist(), gb["value"].tolist()
            sa, sb = summarize(xa), summarize(xb)
            sig = significance(xa, xb, test)
            ratio = sb.mean / sa.mean if sa.mean else float("nan")
            change = (ratio - 1) * 100
            rows.append({"test": _label(key, shown), "metric": metric,
                         "baseline": sa.mean, "contender": sb.mean,
                         "baseline_pm_pct": verdict.Side.of(sa).half_pct,
                         "contender_pm_pct": verdict.Side.of(sb).half_pct,
                         "ratio": ratio, "change_pct": change,
                         "n_baseline": len(xa), "n_contender": len(xb),
                         "p_value": sig.p_value if sig else None,
                         "significant": sig.significant if sig else None,
                         "verdict": said(metric, change, sig, test, len(xa), len(xb))})
    if not rows:
        raise UserError(f"{_name(baseline)} and {_name(contender)} have no test and metric "
                        f"in common (metrics: {', '.join(metrics)})")
    return rows


def said(metric: str, change: float, sig: Significance | None, test: str, n_a: int,
         n_b: int) -> str:
    """A row's verdict in words: better or worse where significant, "no significant change",
    or why there is no verdict."""
    if sig is None:
        if min(n_a, n_b) < 2:
            return f"{verdict.NO_VERDICT} (one repeat)"
        return f"{verdict.NO_VERDICT} ({test} needs more repeats)"
    if not sig.significant:
        return "no significant change"
    return verdict.word(metric, change, False)


@dataclass(frozen=True)
class Gate:
    """What `--fail-if` makes of a comparison: the bounds crossed by a significant change
    (exit 1), the rows it cannot judge (no verdict: exit 3 where nothing crossed), and the
    changes beyond a bound that are within noise (said, not failed)."""

    crossed: list[str]
    unjudged: list[str]
    noise: list[str]

    @property
    def status(self) -> int:
        return 1 if self.crossed else 3 if self.unjudged else 0


CANNOT_JUDGE = 3  # --fail-if's own exit status: no verdict on a bounded metric


def gate(rows: list[dict], bounds: Sequence[Bound]) -> Gate:
    """Each bound against each row of its metric: a change beyond the bound fails only where
    it is significant; a row without a verdict cannot be judged at all (its change, beyond
    the bound or not, says nothing without repeats)."""
    crossed, unjudged, noise = [], [], []
    for bound in bounds:
        matched = [r for r in rows if r["metric"] == bound.metric]
        if not matched:
            raise UserError(f"--fail-if {bound.metric}: no test has that metric in both "
                            "runs")
        for r in matched:
            change = r["change_pct"]
            beyond = (bound.pct < 0 and change < bound.pct) or (bound.pct > 0
                                                                and change > bound.pct)
            line = (f"{r['test']}: {bound.metric} changed {change:+.1f} % "
                    f"(bound {bound.pct:+g} %)")
            if r["significant"] is None:
                unjudged.append(f"{line}: {r['verdict']}, n = {r['n_baseline']} and "
                                f"{r['n_contender']}")
            elif beyond and r["significant"]:
                crossed.append(f"{line}, significant (p = {r['p_value']:.3g})")
            elif beyond:
                noise.append(f"{line}, within noise (p = {r['p_value']:.3g})")
    return Gate(crossed, unjudged, noise)
