"""Middlewares side by side on one datapath: DDS (ddsperf, RTI Perftest), Zenoh (peer, routed)
and MQTT (by QoS), their throughput and p50/p99 round trip against payload. Pure: tables in,
a table and sentences out (the figure is plots.middlewares)."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from k8sdds import perftest
from k8sdds.analysis.tables import base, payload
from k8sdds.results.manifest import RepeatKey

# the engines that are middlewares (the others measure the network itself), as their
# records say
MIDDLEWARES = perftest.middlewares()
# what tells one middleware line from another: kept apart by the payload sweep
KEYS = ("datapath", "data_len", "engine", "topology", "mqtt_qos", "best_effort", "transport")
# the roles every message goes through, on a node of their own (placement.OWN_NODE)
HUBS = perftest.hubs()


# per engine, as its record says: (named by its QoS level, named by its topology)
LINE_FACTS = perftest.line_facts()


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


def table(thr: pd.DataFrame, lat: pd.DataFrame, via: Mapping[str, str] | None = None
          ) -> pd.DataFrame:
    """datapath, data_len, middleware -> throughput_mbps (mean per subscriber), p50_us, p99_us,
    and `via`: the node of its broker or router (`hubs`), "" peer to peer; empty unless two
    middlewares (engines) or more were measured: one engine's QoS settings side by side are
    the report's reliability figure, not this."""
    keys = ["datapath", "data_len", "middleware", "engine"]
    t, lt = _sweep(thr), _sweep(lat)
    parts = []
    if not t.empty:
        parts.append(t[keys + ["mean"]].rename(columns={"mean": "throughput_mbps"}))
    if not lt.empty:
        parts.append(lt[keys + ["p50", "p99"]].rename(columns={"p50": "p50_us",
                                                                "p99": "p99_us"}))
    if not parts:
        return pd.DataFrame()
    out = parts[0] if len(parts) == 1 else parts[0].merge(parts[1], on=keys, how="outer")
    for column in ("throughput_mbps", "p50_us", "p99_us"):
        if column not in out:
            out[column] = float("nan")
    if out["engine"].nunique() < 2:
        return pd.DataFrame()
    out["via"] = out["middleware"].map(lambda mw: (via or {}).get(mw, ""))
    return out.sort_values(keys).reset_index(drop=True)


def _num(v: float) -> str:
    """A figure as people write it: whole from 100 up, else three significant digits."""
    return f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"


def sentences(tab: pd.DataFrame) -> list[str]:
    """One line per datapath and payload that two middlewares (engines) or more measured:
    which moves the most and which answers first, with the others' figures."""
    out = []
    if tab.empty:
        return out
    for (dp, size), g in tab.groupby(["datapath", "data_len"], sort=True):
        g = g.assign(middleware=[f"{mw} via {v}" if v else mw
                                 for mw, v in zip(g["middleware"], g["via"], strict=True)])
        parts = []
        for column, best, unit, verb in (("throughput_mbps", "idxmax", "Mb/s", "moves the most"),
                                         ("p50_us", "idxmin", "µs p50", "answers first")):
            m = g.dropna(subset=[column])
            if m["engine"].nunique() < 2:
                continue
            top = m.loc[getattr(m[column], best)()]
            rest = ", ".join(f"{r['middleware']} {_num(r[column])}"
                             for _, r in m.sort_values(column, ascending=best == "idxmin")
                             .iterrows() if r["middleware"] != top["middleware"])
            parts.append(f"{top['middleware']} {verb} ({_num(top[column])} {unit}; {rest})")
        if parts:
            out.append(f"{dp}, {payload(int(size))}: " + "; ".join(parts) + ".")
    return out
