"""GET /metrics: what the service holds, for Prometheus to scrape (prometheus-client's own
exposition, in the format the scraper's Accept header asks for: the Prometheus text format or
OpenMetrics). Per test and metric, the newest run's mean, its 95 % interval and repeats
(k8sdds.analysis.export: bounded labels, the run named by k8sdds_run_info and
k8sdds_cell_run_started_seconds, never as a label of the figures); the runs in the database;
the tasks by status."""

from __future__ import annotations

from collections.abc import Iterator

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from sqlalchemy import Engine

from k8sdds.serve import store
from k8sdds.serve.routes.common import COMMON, Service, authorized, errors, service
from k8sdds.serve.schema import STATUSES

router = APIRouter(dependencies=[Depends(authorized)])
TEXT = "text/plain; version=0.0.4; charset=utf-8"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"


def newest_cells(db: Engine):
    """Per test and metric, the cell of the newest run that has it (by the run's start; a
    run with no start counts as the oldest), with `started_s`."""
    import pandas as pd

    from k8sdds.analysis import cells, load

    rows = store.summaries_of(db, tuple(m.name for m in cells.METRICS))
    if not rows:
        return pd.DataFrame(columns=[*cells.COLUMNS, "started_s"]), []
    df = load.table_of(rows)
    table = cells.cells(df)
    per_run = df.groupby("run_id")[["started_s", "run_backend"]].first()
    table["started_s"] = table["run_id"].map(per_run["started_s"])
    newest = (table.sort_values(["started_s", "run_id"], na_position="first")
              .drop_duplicates([*load.PARAMS, "metric"], keep="last"))
    shown = sorted(newest["run_id"].unique())
    return newest, [(rid, str(per_run.loc[rid, "run_backend"])) for rid in shown]


class Served:
    """The collector /metrics renders: read from the database at each scrape."""

    def __init__(self, db: Engine):
        self.db = db

    def collect(self) -> Iterator:
        from prometheus_client.core import GaugeMetricFamily

        from k8sdds.analysis import export

        cells, runs = newest_cells(self.db)
        yield from export.families(cells, runs)
        n_runs, by_status = store.counts(self.db)
        yield GaugeMetricFamily("k8sdds_runs", "Runs in the service's database.",
                                value=n_runs)
        family = GaugeMetricFamily("k8sdds_tasks", "The service's tasks by status.",
                                   labels=("status",))
        for status in STATUSES:
            family.add_metric([status], by_status.get(status, 0))
        yield family


@router.get("/metrics", response_class=Response, responses={
    200: {"description": "The metrics, in the format the Accept header asks for",
          "content": {TEXT: {"schema": {"type": "string"}},
                      OPENMETRICS: {"schema": {"type": "string"}}}},
    **errors(*COMMON)})
def metrics(request: Request, svc: Service = Depends(service)):
    """Per test and metric the newest run's mean, interval and repeats; runs; tasks by
    status (docs/how-to/serve.md)."""
    from prometheus_client import CollectorRegistry
    from prometheus_client.exposition import choose_encoder

    registry = CollectorRegistry()
    registry.register(Served(svc.db))
    encode, content_type = choose_encoder(request.headers.get("accept", ""))
    return Response(encode(registry), media_type=content_type)
