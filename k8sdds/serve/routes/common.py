"""What the API's routers share: the service's parts, read from `app.state` (so a route is a
plain function of its request, not a closure of `create_app`), the token check, the error
documents, the typed parameters, and a comparison of two runs (`compared`: the API's
/api/compare and the page's /compare find, load, admit and compare alike)."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from fastapi import HTTPException, Request
from fastapi import Path as PathParam
from pydantic import BaseModel, BeforeValidator, StringConstraints
from sqlalchemy import Engine

from k8sdds.serve import store
from k8sdds.serve.access import allowed
from k8sdds.serve.tasks import Worker

MAX_BODY = 1 << 20  # bytes
MAX_ID = (1 << 31) - 1  # the database's integer column (PostgreSQL's is 32 bits)
MAX_OFFSET = 1 << 31


@dataclass(frozen=True)
class Service:
    """The parts every route reads: the database, the run folder, the token (None: none
    asked), the task queue (None: this service runs no tasks), the nodes online, and the run
    directories of the folder not added, with why (the watcher's)."""

    db: Engine
    out: Path
    token: str | None
    worker: Worker | None
    nodes: Callable[[], list[dict]]
    refused: Callable[[], dict[str, str]] = dict


def service(request: Request) -> Service:
    return request.app.state.service


def authorized(request: Request) -> None:
    if not allowed(request, service(request).token):  # the header, or the page's cookie
        raise HTTPException(401, "a valid token is needed (Authorization: Bearer ...)")


def queue(request: Request) -> Worker:
    worker = service(request).worker
    if worker is None:
        raise HTTPException(503, "this service runs no tasks")
    return worker


def run_path(svc: Service, run_id: str) -> Path:
    """The directory of run `run_id`: 404 where the database has no such run, 410 where its
    directory is gone."""
    found = store.run(svc.db, run_id_of(run_id))
    if found is None:
        raise HTTPException(404, f"no run {run_id[:80]!r}")
    path = Path(found["path"])
    if not (path / "manifest.json").is_file():
        raise HTTPException(410, f"run {run_id}: its directory {path} is gone")
    return path


def compared(svc: Service, a: str, b: str, metrics, force: bool,
             same_fingerprint: bool = False):
    """Run `b` against run `a` as `k8sdds compare` does (k8sdds.analysis.comparable's rule,
    then analysis.compare): (what differs, the rows). A missing run is 404, a gone one 410,
    a run that cannot be read 422; runs the rule refuses raise its CompareRefused (the API
    answers 422, the page offers `force`)."""
    from k8sdds.analysis import comparable, compare
    from k8sdds.analysis.load import load
    from k8sdds.errors import UserError

    paths = run_path(svc, a), run_path(svc, b)
    try:
        runs = load([paths[0]]), load([paths[1]])
        admitted = comparable.admit(*runs, (a, b), force, same_fingerprint,
                                    comparable.QUERY_OPTIONS)
        return admitted, compare.compare(*runs, metrics)
    except comparable.CompareRefused:
        raise
    except (UserError, OSError) as exc:
        raise HTTPException(422, str(exc)) from None


def run_id_of(run_id: str) -> str:
    if not store.RUN_ID.match(run_id):
        raise HTTPException(404, f"no run {run_id[:80]!r}")
    return run_id


class Problem(BaseModel):
    """What every error answers: why, in words (a request's validation errors as a list)."""

    detail: str | list[dict]


DESCRIBED = {400: "A body that is not JSON", 401: "No valid token", 404: "Not found",
             409: "Not in a state that allows it",
             410: "The run directory is gone", 411: "A body with no Content-Length",
             413: "Request body too large", 422: "The request is not valid",
             503: "This service runs no tasks"}
COMMON = (401, 413, 422)


def errors(*codes: int) -> dict:
    """The OpenAPI responses of these error codes."""
    return {code: {"model": Problem, "description": DESCRIBED[code]} for code in codes}


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
