"""The runs: listed with filters, one run, its results as JSON or CSV, two compared, a
metric's history, and a run directory of the run folder added."""

from __future__ import annotations

import functools
import math

from fastapi import APIRouter, Depends, HTTPException, Query
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict
from sqlalchemy import Engine

from k8sdds.analysis.comparable import DEFAULT_METRICS
from k8sdds.errors import RunDirError, UserError
from k8sdds.serve import store
from k8sdds.serve.limits import MAX_PAYLOAD
from k8sdds.serve.routes.common import (
    COMMON,
    MAX_METRICS,
    MAX_OFFSET,
    IsoTime,
    Metric,
    Name,
    Service,
    authorized,
    compared,
    errors,
    run_id_of,
    service,
)

router = APIRouter(dependencies=[Depends(authorized)])


class ImportRequest(BaseModel):
    """A run directory to add, by its name under the service's run folder."""

    model_config = ConfigDict(extra="forbid")
    run: str


@router.get("/api/runs", responses=errors(*COMMON))
def list_runs(datapath: Name | None = None, engine_name: Name | None = Query(
                  None, alias="engine"), transport: Name | None = None,
              payload: int | None = Query(None, ge=0, le=MAX_PAYLOAD),
              since: IsoTime | None = None, until: IsoTime | None = None,
              limit: int = Query(100, ge=1, le=1000),
              offset: int = Query(0, ge=0, le=MAX_OFFSET),
              svc: Service = Depends(service)):
    """Runs, newest first; `datapath`, `engine`, `transport` and `payload` (bytes) match
    a run when any of its results does."""
    return JSONResponse(store.list_runs(svc.db, store.RunFilter(
        datapath, engine_name, transport, payload, since, until, limit, offset)))


@router.get("/api/runs/{run_id}", responses=errors(*COMMON, 404))
def one_run(run_id: str, svc: Service = Depends(service)):
    found = store.run(svc.db, run_id_of(run_id))
    if found is None:
        raise HTTPException(404, f"no run {run_id!r}")
    return found


@router.get("/api/runs/{run_id}/results",
            responses={**errors(*COMMON, 404), 200: {"content": {
                "application/json": {"schema": {"type": "array", "items": {
                    "type": "object"}}},
                "text/csv": {"schema": {"type": "string"}}}}})
def results(run_id: str, format: str = Query("json", pattern="^(json|csv)$"),
            svc: Service = Depends(service)):
    """The run's results table, as `results.csv` has it (format=csv) or as rows."""
    if store.run(svc.db, run_id_of(run_id)) is None:
        raise HTTPException(404, f"no run {run_id!r}")
    return Response(results_body(svc.db, run_id, format), media_type=(
        "application/json" if format == "json" else "text/csv"))


@functools.lru_cache(maxsize=64)
def results_body(db: Engine, run_id: str, format: str) -> bytes:
    """A run's results, encoded once: a run never changes after it is added."""
    import json

    from k8sdds.results.table import rows_to_csv

    rows = store.run_results(db, run_id)
    if format == "json":
        return json.dumps(rows, separators=(",", ":")).encode()
    return rows_to_csv(rows, header=True).encode()


def _plain(value):
    """A value of a comparison as JSON has it: numpy's as Python's, NaN as null."""
    value = value.item() if hasattr(value, "item") else value
    return None if isinstance(value, float) and not math.isfinite(value) else value


@router.get("/api/compare", responses=errors(*COMMON, 404, 410))
def compare_runs(a: str, b: str, metric: list[Metric] = Query(
        list(DEFAULT_METRICS), max_length=MAX_METRICS),
        force: bool = Query(False, description="Compare runs whose nodes differ in kernel, "
                            "CPU or CNI version, or in engine versions, backends or "
                            "profiles (`--force`)"),
        same_fingerprint: bool = Query(False, description="Refuse runs whose nodes' "
                                       "fingerprints differ (`--same-fingerprint`)"),
        svc: Service = Depends(service)):
    """Run `b` against run `a`, per test and metric (at most 16): each side's mean over its
    repeats with its interval and n, the change, significance and verdict (no verdict with
    one repeat a side), as `k8sdds compare` gives them; refused (422, the reason) where
    `k8sdds compare` refuses, by the same rule (k8sdds.analysis.comparable)."""
    from k8sdds.analysis.comparable import CompareRefused

    try:
        admitted, rows = compared(svc, a, b, metric, force, same_fingerprint)
    except CompareRefused as exc:
        raise HTTPException(422, str(exc)) from None
    return {"baseline": a, "contender": b,
            "differences": list(admitted.differences),
            "fingerprint_differences": list(admitted.fingerprints),
            "controller_differences": list(admitted.controller),
            "rows": [{k: _plain(v) for k, v in r.items()} for r in rows]}


@router.get("/api/history", responses=errors(*COMMON))
def metric_history(metric: str = Query("throughput_mbps", pattern=r"^[a-z0-9_]{1,64}$"),
                   datapath: Name | None = None,
                   engine_name: Name | None = Query(None, alias="engine"),
                   transport: Name | None = None,
                   payload: int | None = Query(None, ge=0, le=MAX_PAYLOAD),
                   since: IsoTime | None = None, until: IsoTime | None = None,
                   limit: int = Query(1000, ge=1, le=10000),
                   svc: Service = Depends(service)):
    """A metric across runs, oldest first: per run, the mean of its repeats' values."""
    return store.history(svc.db, metric, store.RunFilter(
        datapath, engine_name, transport, payload, since, until, limit))


@router.post("/api/imports", status_code=201,
             responses={**errors(*COMMON, 400, 404, 411), 200: {
                 "description": "The run was there already: not added twice"}})
def add(body: ImportRequest, svc: Service = Depends(service)):
    """Add the run directory `<run folder>/<run>`, once (200 when it was there)."""
    name = run_id_of(body.run)
    path = svc.out / name
    if not (path / "manifest.json").is_file():
        raise HTTPException(404, f"no run directory {name!r} in {svc.out}")
    try:
        added = store.add_run(svc.db, path)
    except (RunDirError, UserError) as exc:
        raise HTTPException(422, str(exc)) from None
    if not added:
        return JSONResponse({"run": name, "added": False}, 200)
    return {"run": name, "added": True}
