"""The HTTP API of `k8sdds serve` (FastAPI; OpenAPI at /openapi.json): tasks (submit,
list, show, cancel, resume), runs listed with filters, one run, its results as JSON or CSV,
compare, a metric's history, runs added from the run folder, the nodes online. Every call
checks the token when one is set; a request body must say its length and stay under 1 MiB;
a run id is checked against the form k8sdds gives them before it reaches the database."""

from __future__ import annotations

import datetime as dt
import functools
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Literal

from fastapi import Depends, FastAPI, HTTPException, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, BeforeValidator, ConfigDict, StringConstraints
from sqlalchemy import Engine

from k8sdds.errors import RunDirError, UserError
from k8sdds.serve import store
from k8sdds.serve.limits import MAX_PAYLOAD
from k8sdds.serve.options import TaskOptions
from k8sdds.serve.pages import add_pages, allowed
from k8sdds.serve.tasks import Worker, get_task, list_tasks

MAX_BODY = 1 << 20  # bytes
MAX_ID = (1 << 31) - 1  # the database's integer column (PostgreSQL's is 32 bits)
MAX_OFFSET = 1 << 31


class Problem(BaseModel):
    """What every error answers: why, in words (a request's validation errors as a list)."""

    detail: str | list[dict]


def _errors(*codes: int) -> dict:
    return {code: {"model": Problem, "description": DESCRIBED[code]} for code in codes}


DESCRIBED = {400: "A body that is not JSON", 401: "No valid token", 404: "Not found",
             409: "Not in a state that allows it",
             410: "The run directory is gone", 411: "A body with no Content-Length",
             413: "Request body too large", 422: "The request is not valid",
             503: "This service runs no tasks"}
COMMON = (401, 413, 422)


def _iso(value: object) -> object:
    """A date-time as ISO 8601 text: a bare number (which pydantic would read as seconds
    since 1970) is refused, as the OpenAPI document's `date-time` says."""
    if isinstance(value, (int, float)) or (isinstance(value, str) and re.fullmatch(
            r"\s*[+-]?\d+(\.\d*)?\s*", value)):
        raise ValueError("a date-time in ISO 8601 (2026-01-31T12:00:00Z), not a number")
    return value


IsoTime = Annotated[dt.datetime, BeforeValidator(_iso)]
Metric = Annotated[str, StringConstraints(pattern=r"^[a-z0-9_]{1,64}$")]
MAX_METRICS = 16
# a datapath's, an engine's or a transport's name as a filter: what k8sdds names them with
# (no control character reaches the database)
Name = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.:+-]{1,64}$")]
TaskId = Annotated[int, PathParam(ge=1, le=MAX_ID)]


class ImportRequest(BaseModel):
    """A run directory to add, by its name under the service's run folder."""

    model_config = ConfigDict(extra="forbid")
    run: str


class TaskRequest(BaseModel):
    """A schedule (the CSV text `k8sdds run --sch` reads) and the run's options; or a
    baseline (`k8sdds baseline`: its options, no schedule)."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal["schedule", "baseline"] = "schedule"
    schedule: str = ""
    options: TaskOptions = TaskOptions()


def create_app(engine: Engine, out: Path, token: str | None = None,
               worker: Worker | None = None,
               nodes: Callable[[], list[dict]] = lambda: []) -> FastAPI:
    app = FastAPI(title="k8sdds", summary="DDS benchmark runs and their results")
    add_pages(app, engine, token, nodes, out)

    @app.middleware("http")
    async def allow_header(request: Request, call_next):
        """A 405 names every method the path has (FastAPI names only one route's)."""
        response = await call_next(request)
        if response.status_code == 405:
            from starlette.routing import Match

            methods = sorted({m for route in app.router.routes
                              if getattr(route, "methods", None)
                              and route.matches(request.scope)[0] != Match.NONE
                              for m in route.methods} - {"HEAD"})
            if methods:
                response.headers["Allow"] = ", ".join(methods)
        return response

    @app.middleware("http")
    async def http_version(request: Request, call_next):
        """HTTP/1.0 and 1.1 only: another version is answered 505, not as if it were 1.1."""
        if request.scope.get("http_version") not in ("1.0", "1.1"):
            return JSONResponse({"detail": "HTTP version "
                                 f"{str(request.scope.get('http_version'))[:8]} is not "
                                 "supported: use HTTP/1.1"}, 505)
        return await call_next(request)

    @app.middleware("http")
    async def limit_body(request: Request, call_next):
        length = request.headers.get("content-length")
        if length is None and request.method in ("POST", "PUT", "PATCH"):
            if request.headers.get("transfer-encoding"):  # a stream of unknown size
                return JSONResponse({"detail": "give the body's Content-Length"}, 411)
        elif length is not None and (not length.isdigit() or int(length) > MAX_BODY):
            return JSONResponse({"detail": f"request body over {MAX_BODY} bytes"}, 413)
        return await call_next(request)

    def authorized(request: Request) -> None:
        if not allowed(request, token):  # the header, or the web page's login cookie
            raise HTTPException(401, "a valid token is needed (Authorization: Bearer ...)")

    def run_id_of(run_id: str) -> str:
        if not store.RUN_ID.match(run_id):
            raise HTTPException(404, f"no run {run_id[:80]!r}")
        return run_id

    @app.get("/api/runs", dependencies=[Depends(authorized)], responses=_errors(*COMMON))
    def list_runs(datapath: Name | None = None, engine_name: Name | None = Query(
                      None, alias="engine"), transport: Name | None = None,
                  payload: int | None = Query(None, ge=0, le=MAX_PAYLOAD),
                  since: IsoTime | None = None, until: IsoTime | None = None,
                  limit: int = Query(100, ge=1, le=1000),
                  offset: int = Query(0, ge=0, le=MAX_OFFSET)):
        """Runs, newest first; `datapath`, `engine`, `transport` and `payload` (bytes) match
        a run when any of its results does."""
        return JSONResponse(store.list_runs(engine, store.RunFilter(
            datapath, engine_name, transport, payload, since, until, limit, offset)))

    @app.get("/api/runs/{run_id}", dependencies=[Depends(authorized)],
             responses=_errors(*COMMON, 404))
    def one_run(run_id: str):
        found = store.run(engine, run_id_of(run_id))
        if found is None:
            raise HTTPException(404, f"no run {run_id!r}")
        return found

    @app.get("/api/runs/{run_id}/results", dependencies=[Depends(authorized)],
             responses={**_errors(*COMMON, 404), 200: {"content": {
                 "application/json": {"schema": {"type": "array", "items": {
                     "type": "object"}}},
                 "text/csv": {"schema": {"type": "string"}}}}})
    def results(run_id: str, format: str = Query("json", pattern="^(json|csv)$")):
        """The run's results table, as `results.csv` has it (format=csv) or as rows."""
        if store.run(engine, run_id_of(run_id)) is None:
            raise HTTPException(404, f"no run {run_id!r}")
        return Response(results_body(run_id, format), media_type=(
            "application/json" if format == "json" else "text/csv"))

    @functools.lru_cache(maxsize=64)
    def results_body(run_id: str, format: str) -> bytes:
        """A run's results, encoded once: a run never changes after it is added."""
        import json

        from k8sdds.results.table import rows_to_csv

        rows = store.run_results(engine, run_id)
        if format == "json":
            return json.dumps(rows, separators=(",", ":")).encode()
        return rows_to_csv(rows, header=True).encode()

    def run_path(run_id: str) -> Path:
        found = store.run(engine, run_id_of(run_id))
        if found is None:
            raise HTTPException(404, f"no run {run_id!r}")
        path = Path(found["path"])
        if not (path / "manifest.json").is_file():
            raise HTTPException(410, f"run {run_id}: its directory {path} is gone")
        return path

    @app.get("/api/compare", dependencies=[Depends(authorized)],
             responses=_errors(*COMMON, 404, 410))
    def compare_runs(a: str, b: str, metric: list[Metric] = Query(
            ["throughput_mbps", "latency_us_p50"], max_length=MAX_METRICS)):
        """Run `b` against run `a`, per test and metric (at most 16): ratio, change and
        significance, as `k8sdds compare` gives them."""
        import json

        from k8sdds.analysis import compare

        try:
            rows = compare.compare(run_path(a), run_path(b), metric)
        except UserError as exc:
            raise HTTPException(422, str(exc)) from None
        plain = json.loads(json.dumps(rows, default=lambda v: v.item()))  # numpy scalars
        return {"baseline": a, "contender": b, "rows": plain}

    @app.get("/api/history", dependencies=[Depends(authorized)], responses=_errors(*COMMON))
    def metric_history(metric: str = Query("throughput_mbps", pattern=r"^[a-z0-9_]{1,64}$"),
                       datapath: Name | None = None,
                       engine_name: Name | None = Query(None, alias="engine"),
                       transport: Name | None = None,
                       payload: int | None = Query(None, ge=0, le=MAX_PAYLOAD),
                       since: IsoTime | None = None, until: IsoTime | None = None,
                       limit: int = Query(1000, ge=1, le=10000)):
        """A metric across runs, oldest first: per run, the mean of its repeats' values."""
        return store.history(engine, metric, store.RunFilter(
            datapath, engine_name, transport, payload, since, until, limit))

    @app.post("/api/imports", dependencies=[Depends(authorized)], status_code=201,
              responses={**_errors(*COMMON, 400, 404, 411), 200: {
                  "description": "The run was there already: not added twice"}})
    def add(body: ImportRequest):
        """Add the run directory `<run folder>/<run>`, once (200 when it was there)."""
        name = run_id_of(body.run)
        path = out / name
        if not (path / "manifest.json").is_file():
            raise HTTPException(404, f"no run directory {name!r} in {out}")
        try:
            added = store.add_run(engine, path)
        except (RunDirError, UserError) as exc:
            raise HTTPException(422, str(exc)) from None
        if not added:
            return JSONResponse({"run": name, "added": False}, 200)
        return {"run": name, "added": True}

    def queue() -> Worker:
        if worker is None:
            raise HTTPException(503, "this service runs no tasks")
        return worker

    @app.post("/api/tasks", dependencies=[Depends(authorized)], status_code=201,
              responses=_errors(*COMMON, 411, 503), openapi_extra={"requestBody": {
                  "required": True, "content": {
                      "application/json": {"schema": {
                          "$ref": "#/components/schemas/TaskRequest"}},
                      "text/csv": {"schema": {"type": "string"}}}}})
    async def submit(request: Request):
        """Queue a schedule: a JSON body {"schedule": CSV text, "options": {...}}, or the CSV
        itself (Content-Type text/csv) with the default options. The schedule is checked as
        `k8sdds run` checks it: a mistake is a 422 with the same message."""
        from pydantic import ValidationError

        raw = await request.body()
        if len(raw) > MAX_BODY:
            raise HTTPException(413, f"request body over {MAX_BODY} bytes")
        try:
            text = raw.decode()
            if request.headers.get("content-type", "").startswith("text/csv"):
                body = TaskRequest(schedule=text)
            else:
                body = TaskRequest.model_validate_json(raw)
        except (UnicodeDecodeError, ValidationError) as exc:
            raise HTTPException(422, " ".join(str(exc).split())[:1000]) from None
        try:
            task_id = queue().submit(body.schedule, body.options, body.kind)
        except UserError as exc:
            raise HTTPException(422, str(exc)) from None
        return get_task(engine, task_id)

    @app.get("/api/tasks", dependencies=[Depends(authorized)], responses=_errors(*COMMON))
    def tasks_list():
        """Every task, newest first: status, progress (repeats done of total), ETA."""
        return list_tasks(engine)

    @app.get("/api/tasks/{task_id}", dependencies=[Depends(authorized)],
             responses=_errors(*COMMON, 404))
    def task(task_id: TaskId):
        found = get_task(engine, task_id)
        if found is None:
            raise HTTPException(404, f"no task {task_id}")
        return found

    @app.post("/api/tasks/{task_id}/cancel", dependencies=[Depends(authorized)],
              responses=_errors(*COMMON, 409, 411, 503))
    def cancel(task_id: TaskId):
        """A clean stop (as Ctrl-C): the run keeps what it measured and can be resumed."""
        if not queue().cancel(task_id):
            raise HTTPException(409, f"task {task_id} is not queued or running")
        return get_task(engine, task_id)

    @app.post("/api/tasks/{task_id}/resume", dependencies=[Depends(authorized)],
              responses=_errors(*COMMON, 409, 411, 503))
    def resume(task_id: TaskId):
        """Queue a cancelled or failed task again; its run continues where it stopped."""
        if not queue().resume(task_id):
            raise HTTPException(409, f"task {task_id} is not cancelled or failed")
        return get_task(engine, task_id)

    @app.get("/api/nodes", dependencies=[Depends(authorized)], responses=_errors(*COMMON))
    def nodes_online():
        """The nodes up now: emulated testbeds, the cluster's nodes (--kubeconfig: Ready and
        the kubelet's last heartbeat), the inventory's hosts that answer (--inventory)."""
        return nodes()

    def openapi() -> dict:
        """The generated document, with the task body's schema (read by hand in `submit`,
        so FastAPI does not see it) among the components."""
        if app.openapi_schema is None:
            from fastapi.openapi.utils import get_openapi

            doc = get_openapi(title=app.title, version=app.version, summary=app.summary,
                              routes=app.routes)
            body = TaskRequest.model_json_schema(ref_template="#/components/schemas/{model}")
            schemas = doc.setdefault("components", {}).setdefault("schemas", {})
            schemas.update(body.pop("$defs", {}))
            schemas["TaskRequest"] = body
            app.openapi_schema = doc
        return app.openapi_schema

    app.openapi = openapi
    return app
