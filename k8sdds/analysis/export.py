"""A run's cells (k8sdds.analysis.cells) in the formats other tools read:
github-action-benchmark's custom JSON, and OpenMetrics / the Prometheus text format through
prometheus-client's own exposition (never written by hand).

Labels stay bounded: one series per cell and statistic, labelled with what identifies the
test (its name, datapath, engine, transport, payload) and the metric; never with a run id or
a time, so a new run of the same schedule updates the same series instead of adding new
ones. Which run the figures come from is one info series (`k8sdds_run_info`). A label's
value comes from a run's results, which are evidence read from disk: each is printable text
of at most LABEL_MAX characters (`label`), whatever a results table holds; prometheus-client
escapes the rest."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator

import pandas as pd

from k8sdds.analysis import cells as cell_table

# github-action-benchmark reads one direction a file: `tool: customBiggerIsBetter` or
# `customSmallerIsBetter`; a metric with no known direction goes in neither
DIRECTIONS = {"github-bigger": True, "github-smaller": False}
LABELS = ("test", "datapath", "engine", "transport", "payload_bytes", "metric", "unit")
LABEL_MAX = 200  # characters of a label's value; a longer one is cut, ending in "..."


def label(value: object) -> str:
    """A label's value from a results table: each character that is not printable (a line
    end, a control character) as "?", and at most LABEL_MAX characters."""
    text = "".join(ch if ch.isprintable() else "?" for ch in str(value))
    return text if len(text) <= LABEL_MAX else text[:LABEL_MAX - 3] + "..."
STATISTICS = (("mean", "the mean over the repeats"),
              ("ci_low", "the low end of the mean's 95 % interval (Student's t)"),
              ("ci_high", "the high end of the mean's 95 % interval (Student's t)"),
              ("repeats", "the repeats behind the mean"))


def github_benchmark(cells: pd.DataFrame, bigger: bool) -> str:
    """github-action-benchmark's custom format: a JSON list of {name, unit, value, range,
    extra}, the cells whose metric is better when it rises (`bigger`) or falls. `range` is
    the 95 % interval's half width ("± 1.2"), left out with one repeat (no interval)."""
    out = []
    for cell in cells.to_dict("records"):
        if cell_table.BY_NAME[cell["metric"]].rise_is_better is not bigger:
            continue
        entry = {"name": f"{cell_table.name(cell)}: {cell['metric']}", "unit": cell["unit"],
                 "value": round(float(cell["mean"]), 6)}
        if not math.isnan(cell["ci_high"]):
            entry["range"] = f"± {round((cell['ci_high'] - cell['ci_low']) / 2, 6):g}"
        entry["extra"] = (f"{cell['repeats']} repeat{'s' if cell['repeats'] != 1 else ''}; "
                          f"run {cell['run_id']}")
        out.append(entry)
    return json.dumps(out, indent=1) + "\n"


def families(cells: pd.DataFrame, runs: Iterable[tuple[str, str]] = ()) -> Iterator:
    """prometheus-client metric families of `cells`: k8sdds_cell_mean, _ci_low, _ci_high and
    _repeats (the interval's two only where there is one), k8sdds_cell_run_started_seconds
    where `cells` has a `started_s` column (the start of the run behind each cell), and
    k8sdds_run_info for each (run id, backend) of `runs`."""
    from prometheus_client.core import GaugeMetricFamily, InfoMetricFamily

    records = cells.to_dict("records")
    stats = STATISTICS + ((("run_started_seconds", "when the run behind the figures "
                            "started (seconds since the epoch)"),)
                          if "started_s" in cells else ())
    for stat, doc in stats:
        family = GaugeMetricFamily(f"k8sdds_cell_{stat}", f"Per test and metric: {doc}.",
                                   labels=LABELS)
        column = "started_s" if stat == "run_started_seconds" else stat
        for cell in records:
            value = float(cell[column]) if cell[column] is not None else math.nan
            if math.isnan(value):
                continue
            family.add_metric([label(v) for v in (
                cell_table.name(cell), cell["datapath"], cell["engine"], cell["transport"],
                int(cell["data_len"]), cell["metric"], cell["unit"])], value)
        yield family
    info = InfoMetricFamily("k8sdds_run", "A run the cells' figures come from.",
                            labels=("run_id", "backend"))
    for run_id, backend in runs:
        info.add_metric([label(run_id), label(backend)], {})
    yield info


class Cells:
    """A prometheus-client collector of fixed cells (a registry's `register`)."""

    def __init__(self, cells: pd.DataFrame, runs: Iterable[tuple[str, str]] = ()):
        self.cells, self.runs = cells, list(runs)

    def collect(self) -> Iterator:
        return families(self.cells, self.runs)


def openmetrics(cells: pd.DataFrame, runs: Iterable[tuple[str, str]]) -> str:
    """The OpenMetrics text of `cells` (ends with `# EOF`)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.openmetrics.exposition import generate_latest

    registry = CollectorRegistry()
    registry.register(Cells(cells, runs))
    return generate_latest(registry).decode()
