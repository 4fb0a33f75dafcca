"""Rows of results an older k8sdds wrote, as k8sdds writes them now: runs written before the
one latency definition (k8sdds.parsers.latency) stored ddsperf's and Perftest's figures as
printed (half a round trip). `AS_PRINTED` has the factor each engine's old rows need, and
`upgrade_row` / `upgrade_frame` apply it to every latency row whose `definition` column is
not `ROUND_TRIP` (the column did not exist then), wherever results are read. Pure."""

from __future__ import annotations

from typing import Any

from k8sdds.parsers.latency import ROUND_TRIP, definition, is_latency

# the factor a row written before the `definition` column needs, by engine: those stored as
# printed (half a round trip); qperf's was already doubled at parse, the others are whole
AS_PRINTED: dict[str, float] = {"ddsperf": 2.0, "rtiperftest": 2.0}


def upgrade_row(row: dict[str, Any]) -> dict[str, Any]:
    """A results.csv row (text, as read) as k8sdds writes it now: a latency written before
    the one definition made a round trip (`AS_PRINTED`), and its `definition` filled in."""
    metric = row.get("metric") or ""
    if row.get("definition") is not None and (row["definition"] == ROUND_TRIP
                                              or not is_latency(metric)):
        return row
    row = {**row, "definition": definition(metric)}
    factor = AS_PRINTED.get(row.get("engine") or "", 1.0)
    if factor != 1.0 and is_latency(metric):
        try:
            row["value"] = f"{float(row['value']) * factor:.6g}"
        except (TypeError, ValueError):
            pass  # not a number: the reader's own check names it
    return row


def upgrade_frame(df: Any) -> Any:
    """`upgrade_row` over a results table read by pandas (value a float column)."""
    latency = df["metric"].astype(str).map(is_latency)
    old = latency & (df["definition"].astype(str) != ROUND_TRIP) if "definition" in df \
        else latency
    factor = df["engine"].astype(str).map(AS_PRINTED).fillna(1.0)
    df = df.copy()
    df.loc[old, "value"] = df.loc[old, "value"] * factor[old]
    df["definition"] = latency.map({True: ROUND_TRIP, False: ""})
    return df


__all__ = ["AS_PRINTED", "upgrade_frame", "upgrade_row"]
