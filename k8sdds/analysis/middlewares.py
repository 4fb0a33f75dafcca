"""Middlewares side by side on one datapath: DDS (ddsperf, RTI Perftest), Zenoh (peer, routed)
and MQTT (by QoS), their throughput and p50/p99 round trip against payload. Pure: tables in,
a table and sentences out (the figure is plots.middlewares)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from k8sdds import engines
from k8sdds.analysis import verdict
from k8sdds.analysis.tables import base, payload
from k8sdds.analysis.verdict import Side
from k8sdds.results.manifest import RepeatKey

# the engines that are middlewares (the others measure the network itself), as their
# records say
MIDDLEWARES = engines.middlewares()
# what tells one middleware line from another: kept apart by the payload sweep
KEYS = ("datapath", "data_len", "engine", "topology", "mqtt_qos", "best_effort", "transport")
# the roles every message goes through, on a node of their own (placement.OWN_NODE)
HUBS = engines.hubs()


# per engine, as its record says: (named by its QoS level, named by its topology)
LINE_FACTS = engines.line_facts()


def label(row: pd.Series) -> str:
    """A middleware line's name: `zenoh (routed)`, `mqtt QoS 1`, `ddsperf`, `ddsperf tcp best
    effort`..."""
    engine = row["engine"]
    by_qos, by_topology = LINE_FACTS.get(engine, (False, False))
    if by_qos:  # the QoS level says the reliability (bestEffort: 0, else 1)
        qos = int(row["mqtt_qos"]) if int(row["mqtt_qos"]) >= 0 else (
            0 if row["best_effort"] else 1)
        return f"{engine} QoS {qos}"
    name = engine
    if by_topology:
        name += f" ({row['topology'] or 'peer'})"
    elif row["transport"] != "udp":
        name += f" {row['transport']}"
    return name + (" best effort" if row["best_effort"] else "")


def hubs(manifests: Mapping[str, dict]) -> dict[str, str]:
    """Middleware line -> the node(s) its broker or router ran on, from the runs' placements
    (the answer names them: where the traffic went through)."""
    found: dict[str, set[str]] = {}
    for manifest in manifests.values():
        tests = {t.get("number"): t for t in manifest.get("tests") or []}
        for key, entry in (manifest.get("repeats") or {}).items():
            placed = entry.get("placement") or {}
            role = next((r for r in HUBS if r in placed), None)
            test = tests.get(RepeatKey.parse(key).test)
            if role and test:
                line = label(pd.Series({"topology": "", "mqtt_qos": -1, **test}))
                found.setdefault(line, set()).add(placed[role])
    return {line: "/".join(sorted(nodes)) for line, nodes in found.items()}


def _sweep(table: pd.DataFrame) -> pd.DataFrame:
    if table.empty:
        return table
    t = table[table["engine"].isin(MIDDLEWARES)]
    if t.empty:
        return t
    t = base(t, keep=KEYS)
    return t.assign(middleware=t.apply(label, axis=1))


# each figure of a middleware line: (its column, and the columns of its mean and 95 %
# interval over repeats in tables.throughput or tables.latency); a round trip is each
# repeat's percentile, then over the repeats, as the answer reads it
FIGURES = {"throughput_mbps": ("mean", "ci_low", "ci_high"),
           "p50_us": ("p50_mean", "p50_ci_low", "p50_ci_high"),
           "p99_us": ("p99_mean", "p99_ci_low", "p99_ci_high")}


def table(thr: pd.DataFrame, lat: pd.DataFrame, via: Mapping[str, str] | None = None
          ) -> pd.DataFrame:
    """datapath, data_len, middleware -> throughput_mbps (mean per subscriber over repeats),
    p50_us, p99_us (each repeat's percentile, mean over repeats), each with its 95 %
    interval (`*_low`, `*_high`; NaN with one repeat), `repeats` (the fewest behind the
    line's figures) and `via`: the node of its broker or router (`hubs`), "" peer to peer;
    empty unless two middlewares (engines) or more were measured: one engine's QoS settings
    side by side are the report's reliability figure, not this."""
    keys = ["datapath", "data_len", "middleware", "engine"]
    parts = []
    for source, columns in ((_sweep(thr), ["throughput_mbps"]),
                            (_sweep(lat), ["p50_us", "p99_us"])):
        if source.empty:
            continue
        named = {}
        for column in columns:
            mean, low, high = FIGURES[column]
            named |= {mean: column, low: f"{column}_low", high: f"{column}_high"}
        part = source[keys + list(named) + ["repeats"]].rename(columns=named)
        parts.append(part.rename(columns={"repeats": f"repeats_{columns[0]}"}))
    if not parts:
        return pd.DataFrame()
    out = parts[0] if len(parts) == 1 else parts[0].merge(parts[1], on=keys, how="outer")
    for column in FIGURES:
        for name in (column, f"{column}_low", f"{column}_high"):
            if name not in out:
                out[name] = float("nan")
    if out["engine"].nunique() < 2:
        return pd.DataFrame()
    counts = out[[c for c in out if c.startswith("repeats_")]]
    out = out.drop(columns=list(counts)).assign(repeats=counts.min(axis=1).astype(int))
    out["via"] = out["middleware"].map(lambda mw: (via or {}).get(mw, ""))
    return out.sort_values(keys).reset_index(drop=True)


def _num(v: float) -> str:
    """A figure as people write it: whole from 100 up, else three significant digits."""
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


def _figure(row: pd.Series, column: str) -> str:
    """'900 ± 12' (the half width of its 95 % interval), or '900' with one repeat."""
    low, high = row[f"{column}_low"], row[f"{column}_high"]
    if pd.isna(low) or pd.isna(high):
        return _num(row[column])
    return f"{_num(row[column])} ± {_num((high - low) / 2)}"


def _side(row: pd.Series, column: str) -> Side:
    return Side(row[column], row[f"{column}_low"], row[f"{column}_high"], int(row["repeats"]))


# (column, whether more is better, unit, what the first one does, the quantity in words)
RANKED = (("throughput_mbps", True, "Mb/s", "moves the most", "throughput"),
          ("p50_us", False, "µs p50", "answers first", "p50 round trip"))


def _ranked(m: pd.DataFrame, column: str, more: bool, unit: str, verb: str,
            what: str) -> str:
    """The first middleware by `column`, said only where its interval is apart from the
    second's; else within noise; with one repeat, the figures and no ranking word."""
    m = m.sort_values(column, ascending=not more)
    top, second = m.iloc[0], m.iloc[1]
    first = f"{_figure(top, column)} {unit}"
    rest = ", ".join(f"{r['middleware']} {_figure(r, column)}" for _, r in m.iloc[1:].iterrows())
    noise = verdict.noise(_side(top, column), _side(second, column))
    if noise is None:
        return (f"{what} ({verdict.NO_VERDICT}, one repeat): {top['middleware']} {first}, "
                f"{rest}")
    if noise:
        return (f"{what} {verdict.WITHIN} between {top['middleware']} and "
                f"{second['middleware']} ({first}; {rest})")
    return f"{top['middleware']} {verb} ({first}; {rest})"


def sentences(tab: pd.DataFrame) -> list[str]:
    """One line per datapath and payload that two middlewares (engines) or more measured:
    which moves the most and which answers first, where the intervals over repeats say so,
    with the others' figures."""
    out = []
    if tab.empty:
        return out
    for (dp, size), g in tab.groupby(["datapath", "data_len"], sort=True):
        g = g.assign(middleware=[f"{mw} via {v}" if v else mw
                                 for mw, v in zip(g["middleware"], g["via"], strict=True)])
        parts = [_ranked(m, column, *said) for column, *said in RANKED
                 if (m := g.dropna(subset=[column]))["engine"].nunique() >= 2]
        if parts:
            out.append(f"{dp}, {payload(int(size))}: " + "; ".join(parts) + ".")
    return out
