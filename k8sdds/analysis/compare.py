"""`k8sdds compare A B`: per test and metric, baseline, contender, ratio, significance; and
`--fail-if` bounds that make it a CI gate."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from k8sdds.analysis.load import (
    MEASURING,
    PARAMS,
    ROUND_TRIPS,
    Runs,
    intervals,
    load,
    pooled_quantile,
    repeat_values,
)
from k8sdds.analysis.stats import significance
from k8sdds.errors import UserError

PERCENTILE = re.compile(r"^latency_us_p(\d+)$")
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


def _roles(metric: str) -> str | tuple[str, ...]:
    if metric.startswith("latency_us_"):
        return ROUND_TRIPS
    if metric in ("throughput_mbps", "samples_per_s", "lost", "received"):
        return MEASURING
    return ""


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


# what must be the same for two runs to be compared (pyperf's spirit: a comparison across
# machines, kernels or engine versions measures those, not the change under test)
SAME = (("machine", lambda m: (m.get("environment") or {}).get("cpu_model"),),
        ("CPUs", lambda m: (m.get("environment") or {}).get("cpu_count"),),
        ("memory", lambda m: (m.get("environment") or {}).get("memory"),),
        ("kernel", lambda m: (m.get("environment") or {}).get("kernel"),),
        ("engine versions", lambda m: m.get("tools") or {},),
        ("backend", lambda m: m.get("backend"),),
        ("profiles", lambda m: sorted({str(n.get("profile")) for n in
                                       (m.get("cluster") or {}).get("nodes", [])}),))


def differences(baseline: dict, contender: dict) -> list[str]:
    """What differs between the two runs' manifests beyond the tests: one line each."""
    out = []
    for name, read in SAME:
        a, b = read(baseline), read(contender)
        if name == "engine versions":  # only the engines both runs used
            a, b = ({k: v for k, v in a.items() if k in b}, {k: v for k, v in b.items()
                                                              if k in a})
        if a != b:
            out.append(f"{name}: {_show(a)} against {_show(b)}")
    return out


def _show(value) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {v}" for k, v in value.items()) or "-"
    if isinstance(value, list):
        return ", ".join(value) or "-"
    return "-" if value is None else str(value)


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
    """One row per test present in both runs and per metric."""
    a, b = _results(baseline), _results(contender)
    # a parameter each run holds constant but at different values (say, the datapath) is
    # what is being compared, not part of what identifies a test
    params = [p for p in PARAMS if not (a[p].nunique() == 1 and b[p].nunique() == 1
                                        and a[p].iloc[0] != b[p].iloc[0])]
    shown = [p for p in params if a[p].nunique() > 1 or b[p].nunique() > 1] or ["data_len"]
    rows = []
    for metric in metrics:
        pct = PERCENTILE.match(metric)
        va = repeat_values(a, metric, _roles(metric))
        vb = repeat_values(b, metric, _roles(metric))
        if va.empty or vb.empty:
            continue
        ia, ib = (intervals(a), intervals(b)) if pct else (None, None)
        for key, ga in va.groupby(params, dropna=False):
            key = dict(zip(params, key if isinstance(key, tuple) else (key,), strict=True))
            gb = vb.loc[(vb[params] == pd.Series(key)).all(axis=1)]
            if gb.empty:
                continue
            if pct:
                q = int(pct[1]) / 10 ** len(pct[1])
                center_a = _pooled(ia, key, q, ga["value"].median())
                center_b = _pooled(ib, key, q, gb["value"].median())
            else:
                center_a, center_b = ga["value"].mean(), gb["value"].mean()
            basis, xa, xb = "repeats", ga["value"].tolist(), gb["value"].tolist()
            if len(xa) < 2 or len(xb) < 2:  # one repeat a side: the per-second samples
                basis = "intervals"
                xa, xb = _samples(a, metric, key), _samples(b, metric, key)
            sig = significance(xa, xb, test)
            ratio = center_b / center_a if center_a else float("nan")
            rows.append({"test": _label(key, shown), "metric": metric, "baseline": center_a,
                         "contender": center_b, "ratio": ratio,
                         "change_pct": (ratio - 1) * 100, "basis": basis,
                         "n_baseline": len(xa), "n_contender": len(xb),
                         "p_value": sig.p_value if sig else None,
                         "significant": sig.significant if sig else None})
    if not rows:
        raise UserError(f"{_name(baseline)} and {_name(contender)} have no test and metric "
                        f"in common (metrics: {', '.join(metrics)})")
    return rows


def _pooled(iv: pd.DataFrame, key: dict, q: float, fallback: float) -> float:
    if iv is None or iv.empty:
        return fallback
    sel = iv.loc[(iv[list(key)] == pd.Series(key)).all(axis=1)]
    return pooled_quantile(sel, q) if not sel.empty else fallback


def _samples(df: pd.DataFrame, metric: str, key: dict) -> list[float]:
    s = df[(df["kind"] == "sample") & (df["metric"] == metric)
           & df["role"].str.startswith(_roles(metric))]
    s = s.loc[(s[list(key)] == pd.Series(key)).all(axis=1)]
    return s["value"].tolist()


def crossed(rows: list[dict], bounds: Sequence[Bound]) -> list[str]:
    """The bounds a comparison crosses, one line each."""
    out = []
    for bound in bounds:
        matched = [r for r in rows if r["metric"] == bound.metric]
        if not matched:
            raise UserError(f"--fail-if {bound.metric}: no test has that metric in both "
                            "runs")
        for r in matched:
            change = r["change_pct"]
            if (bound.pct < 0 and change < bound.pct) or (bound.pct > 0 and change > bound.pct):
                out.append(f"{r['test']}: {bound.metric} changed {change:+.1f} % "
                           f"(bound {bound.pct:+g} %)")
    return out
