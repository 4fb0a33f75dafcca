"""k8sdds' own middleware clients against each middleware's reference tool, as last measured
on one path: so that a report with Zenoh or MQTT figures says how they stand against the
middleware's own programs, and that a gap between middlewares is the middlewares'. Data
(`references.csv`, written from `benchmarks/reference_tools.py`'s table), not prose.

Each row: one middleware line (as `middlewares.label` names it), payload and metric, the
means of k8sdds' figure and of the reference tool's over interleaved pairs, their ratio and
the 95 % interval of that ratio (relative half-width), on the path and date of `measured`.
Pure but for reading the file."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pandas as pd

DATA = Path(__file__).with_name("references.csv")
METRICS = {"throughput_mbps": "Mb/s", "latency_us_p50": "p50 round trip (µs)"}


@dataclass(frozen=True)
class Reference:
    middleware: str  # "zenoh (peer)", "mqtt QoS 1"
    data_len: int
    metric: str  # a key of METRICS
    k8sdds: float
    reference: float
    tool: str  # the reference programs: "z_pub_thr/z_sub_thr"
    half: float  # the ratio's 95 % interval, relative half-width
    pairs: int
    measured: str  # date, testbed, datapath, machine

    @property
    def ratio(self) -> float:
        return self.k8sdds / self.reference


@cache
def rows() -> tuple[Reference, ...]:
    with DATA.open(newline="") as f:
        return tuple(Reference(r["middleware"], int(r["data_len"]), r["metric"],
                               float(r["k8sdds"]), float(r["reference"]), r["tool"],
                               float(r["half"]), int(r["pairs"]), r["measured"])
                     for r in csv.DictReader(f))


def table(middlewares: set[str]) -> pd.DataFrame:
    """The rows of the middleware lines a report shows, as its table: middleware, payload,
    metric, k8sdds, reference tool, its figure, ratio with its interval."""
    got = [r for r in rows() if r.middleware in middlewares]
    return pd.DataFrame([{
        "middleware": r.middleware, "payload (B)": r.data_len, "metric": METRICS[r.metric],
        "k8sdds": r.k8sdds, "reference tool": r.tool, "its figure": r.reference,
        "k8sdds / tool": f"{r.ratio:.2f} ± {r.half * r.ratio:.2f}"} for r in got])


def measured(middlewares: set[str]) -> str:
    """Where and when the rows a report shows were measured (one sitting)."""
    return "; ".join(sorted({r.measured for r in rows() if r.middleware in middlewares}))
