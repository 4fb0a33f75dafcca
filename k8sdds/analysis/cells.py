"""A run's cells: per test (its parameters) and measured metric, the mean over the repeats,
its 95 % interval and the number of repeats behind it. One figure per cell is what travels
out of k8sdds: the CI benchmark formats, OpenMetrics, the service's /metrics."""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from k8sdds.analysis import verdict
from k8sdds.analysis.load import MEASURING, PARAMS, ROUND_TRIPS, repeat_values
from k8sdds.analysis.stats import summarize
from k8sdds.parsers.latency import ROUND_TRIP, is_latency
from k8sdds.results import schema


@dataclass(frozen=True)
class Metric:
    """A measured metric a cell carries: the roles whose summaries measure it."""

    name: str
    roles: str | tuple[str, ...]

    @property
    def rise_is_better(self) -> bool | None:
        return verdict.rise_is_better(self.name)


# what is exported, in this order; a percentile is each repeat's, then the mean over repeats
# (never a percentile of percentiles' samples pooled across repeats)
METRICS: tuple[Metric, ...] = (
    Metric("throughput_mbps", MEASURING), Metric("samples_per_s", MEASURING),
    Metric("lost", MEASURING), Metric("latency_us_p50", ROUND_TRIPS),
    Metric("latency_us_p90", ROUND_TRIPS), Metric("latency_us_p99", ROUND_TRIPS))
BY_NAME = {m.name: m for m in METRICS}


def roles(metric: str) -> str | tuple[str, ...]:
    """The roles whose summary rows measure `metric` ("": every role's, averaged)."""
    if metric in BY_NAME:
        return BY_NAME[metric].roles
    return ROUND_TRIPS if metric.startswith("latency_us_") else MEASURING if metric == \
        "received" else ""


COLUMNS = ["run_id", *PARAMS, "metric", "unit", "repeats", "mean", "ci_low", "ci_high"]


def unit(metric: str, units: dict[str, str]) -> str:
    """A cell's unit as it travels out: a latency's says it is a round trip ("us round
    trip"), so that a figure read elsewhere means one thing."""
    got = units.get(metric, "")
    return f"{got} {ROUND_TRIP}" if is_latency(metric) and got else got


def cells(results: pd.DataFrame, only: str | None = None) -> pd.DataFrame:
    """One row per run, test and metric of METRICS (or the metric `only`) found in
    `results` (a results table): the mean over repeats with its 95 % interval (NaN with one
    repeat) and `repeats`."""
    rows = []
    units = (results[results["kind"] == "summary"].groupby("metric")["unit"].first()
             .to_dict())
    for metric in (m for m in METRICS if only in (None, m.name)):
        values = repeat_values(results, metric.name, metric.roles)
        if values.empty:
            continue
        for key, group in values.groupby(["run_id", *PARAMS], dropna=False):
            s = summarize(group["value"].tolist())
            rows.append({**dict(zip(["run_id", *PARAMS], key, strict=True)),
                         "metric": metric.name, "unit": unit(metric.name, units),
                         "repeats": s.n, "mean": s.mean, "ci_low": s.ci_low,
                         "ci_high": s.ci_high})
    return pd.DataFrame(rows, columns=COLUMNS)


# the parameters a cell's name always shows, then the others where they are not the
# schedule's default (so that a name is the same in every run of the same test)
SHOWN = ("datapath", "engine", "transport", "data_len")
DEFAULTS = {"path": None, "multicast": False, "num_subscribers": 1, "best_effort": False,
            "batch_size": 0, "latency_test": False, "placement": "cross-node",
            "secure": False, "streams": 1, "topology": "", "mqtt_qos": -1,
            "load": "", "load_len": 0}


def name(cell: dict) -> str:
    """A cell's test as a stable name: `flannel-vxlan ddsperf udp 1024 B`, then what is not
    the default (`best_effort`, `num_subscribers=2`, ...), then the path."""
    words = [str(cell["datapath"]), str(cell["engine"]), str(cell["transport"]),
             f"{int(cell['data_len'])} B"]
    for param in PARAMS:
        if param in SHOWN or param == "path":
            continue
        value = cell[param]
        if value == DEFAULTS.get(param, value):
            continue
        words.append(param if value is True else f"{param}={value}")
    return " ".join(words) + f" ({cell['path']})"


assert set(DEFAULTS) | set(SHOWN) == set(schema.PARAMS), "every parameter named or defaulted"
