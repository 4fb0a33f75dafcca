"""The HTTP API of `k8sdds serve` (FastAPI; OpenAPI at /openapi.json): tasks (submit,
list, show, cancel, resume), runs listed with filters, one run, its results as JSON or CSV,
compare, a metric's history, runs added from the run folder, the nodes online. Every call
checks the token when one is set; a request body must say its length and stay under 1 MiB;
a run id is checked against the form k8sdds gives them before it reaches the database. This
module assembles the app: its middlewares and one router per resource, the web page's
among them (`serve/routes/`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy import Engine
from starlette.requests import ClientDisconnect

from k8sdds.serve.limits import MAX_HEADERS, MAX_TARGET
from k8sdds.serve.routes import ROUTERS
from k8sdds.serve.routes.common import MAX_BODY, Service
from k8sdds.serve.routes.tasks import TaskRequest
from k8sdds.serve.tasks import Worker

log = logging.getLogger("k8sdds.serve")


async def allow_header(request: Request, call_next):
    """A 405 names every method the path has (FastAPI names only one route's)."""
    response = await call_next(request)
    if response.status_code == 405:
        from starlette.routing import Match

        methods = sorted({m for route in request.app.router.routes
                          if getattr(route, "methods", None)
                          and route.matches(request.scope)[0] != Match.NONE
                          for m in route.methods} - {"HEAD"})
        if methods:
            response.headers["Allow"] = ", ".join(methods)
    return response


async def http_version(request: Request, call_next):
    """HTTP/1.0 and 1.1 only: another version is answered 505, not as if it were 1.1."""
    if request.scope.get("http_version") not in ("1.0", "1.1"):
        return JSONResponse({"detail": "HTTP version "
                             f"{str(request.scope.get('http_version'))[:8]} is not "
                             "supported: use HTTP/1.1"}, 505)
    return await call_next(request)


async def limit_head(request: Request, call_next):
    """A request target or header fields past an HTTP server's bounds: 414, 431."""
    target = len(request.scope.get("raw_path", b"")) + len(
        request.scope.get("query_string", b""))
    if target > MAX_TARGET:
        return JSONResponse({"detail": f"request target over {MAX_TARGET} bytes"}, 414)
    if sum(len(k) + len(v) for k, v in request.scope["headers"]) > MAX_HEADERS:
        return JSONResponse({"detail": f"header fields over {MAX_HEADERS} bytes"}, 431)
    return await call_next(request)


async def client_gone(request: Request, call_next):
    """A client that leaves before its whole body arrived: one line in the log, no
    traceback (no one is left to answer)."""
    try:
        return await call_next(request)
    except ClientDisconnect:
        client = request.client
        log.warning("%s: gone before its whole request body arrived",
                    f"{client.host}:{client.port}" if client else "a client")
        return Response(status_code=400)


async def limit_body(request: Request, call_next):
    length = request.headers.get("content-length")
    if length is None and request.method in ("POST", "PUT", "PATCH"):
        if request.headers.get("transfer-encoding"):  # a stream of unknown size
            return JSONResponse({"detail": "give the body's Content-Length"}, 411)
    elif length is not None and (not length.isdigit() or int(length) > MAX_BODY):
        return JSONResponse({"detail": f"request body over {MAX_BODY} bytes"}, 413)
    return await call_next(request)


MIDDLEWARES = (allow_header, http_version, limit_head, client_gone, limit_body)


def create_app(db: Engine, out: Path, token: str | None = None,
               worker: Worker | None = None,
               nodes: Callable[[], list[dict]] = lambda: [],
               refused: Callable[[], dict[str, str]] = dict) -> FastAPI:
    """The API and its pages; `refused`: the run directories of --out not added, with
    why (the watcher's)."""
    app = FastAPI(title="k8sdds", summary="DDS benchmark runs and their results")

    for middleware in MIDDLEWARES:  # the first listed runs innermost, as app.middleware
        app.middleware("http")(middleware)  # would add them one after the other
    app.state.service = Service(db, out, token, worker, nodes, refused)
    for router in ROUTERS:  # their routes themselves (each with the router's token check),
        # so that the 405's Allow header above sees every route of a path
        app.router.routes.extend(router.routes)

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
