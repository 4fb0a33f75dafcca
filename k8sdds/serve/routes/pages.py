"""The web page of `k8sdds serve`, a router of its own beside the API's: server-rendered HTML
(Jinja2) with a little JavaScript on the tasks page (submit, and follow progress live), no
asset from the network. Each page is a plain function of its request, reading the
service's parts from `app.state` (`common.Service`). A visitor without the token is sent to
the login form by the router's dependency (`signed_in`), before a page does any work: no
query of the store, no run folder read. The login form itself is the `public` router's."""

from __future__ import annotations

import hmac
from pathlib import Path

from fastapi import APIRouter, Depends, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates

from k8sdds.errors import UserError
from k8sdds.serve import store
from k8sdds.serve.access import COOKIE, allowed, served
from k8sdds.serve.limits import MAX_PAYLOAD
from k8sdds.serve.routes.common import compared, service

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).resolve().parent.parent /
                                          "templates"))
PLOTS = ("throughput.png", "latency.png", "overhead.png")  # what `k8sdds run` draws



def signed_in(request: Request) -> None:
    """The pages' token check, run before anything of a page: a visitor without the token
    is sent to the login form (303 See Other)."""
    if not allowed(request, service(request).token):
        raise HTTPException(303, "sign in first: /login", headers={"Location": "/login"})


router = APIRouter(include_in_schema=False, dependencies=[Depends(signed_in)])
public = APIRouter(include_in_schema=False)  # the login form: for a visitor without the token


def run_answer(folder: Path, out: Path) -> list[str]:
    """The run's answer, as `k8sdds run` printed it (what each datapath costs against host),
    from its results; none for a run outside --out or without results it can read."""
    from k8sdds.analysis import answer, tables
    from k8sdds.analysis.load import load

    if not served(folder / "results.csv", out):
        return []
    try:
        runs = load([folder])
        return answer.of_runs(runs, tables.throughput(runs), tables.latency(runs))[1]
    except (UserError, OSError, ValueError, KeyError):
        return []


def _page(request: Request, name: str, title: str, **values) -> HTMLResponse:
    """Page `name` rendered (the router checked the token)."""
    return TEMPLATES.TemplateResponse(request, name, {"title": title, **values})


@public.get("/login", response_class=HTMLResponse)
def login(request: Request, token_given: str | None = Query(None, alias="token")):
    token = service(request).token
    if token is None:
        return RedirectResponse("/", 303)
    if token_given is not None and hmac.compare_digest(token_given.encode(),
                                                       token.encode()):
        response = RedirectResponse("/", 303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict")
        return response
    return TEMPLATES.TemplateResponse(request, "login.html", {
        "title": "Token", "error": "not the token" if token_given else ""},
        status_code=401 if token_given else 200)


@router.get("/", response_class=HTMLResponse)
def runs(request: Request, datapath: str | None = None, engine_name: str | None = Query(
         None, alias="engine"), transport: str | None = None, payload: str | None = None):
    svc = service(request)
    # ASCII digits only ('²' is a digit to str.isdigit, not to int), and a size a
    # payload can have: anything else filters nothing
    size = int(payload) if payload and payload.isascii() and payload.isdecimal() and \
        len(payload) <= 10 and int(payload) <= MAX_PAYLOAD else None
    f = store.RunFilter(datapath or None, engine_name or None, transport or None, size)
    return _page(request, "runs.html", "Runs", runs=store.list_runs(svc.db, f), f=f,
                 filtered=any((datapath, engine_name, transport, payload)),
                 refused=sorted(svc.refused().items()))


@router.get("/runs/{run_id}", response_class=HTMLResponse)
def run(request: Request, run_id: str):
    svc = service(request)
    found = store.run(svc.db, run_id) if store.RUN_ID.match(run_id) else None
    if found is None:
        raise HTTPException(404, f"no run {run_id[:80]!r}")
    folder = Path(found["path"])
    report = served(folder / "report.html", svc.out)
    plots = [p for p in PLOTS if served(folder / p, svc.out)]
    from k8sdds import fingerprint

    return _page(request, "run.html", f"Run {run_id}", run=found, report=report,
                 summary=store.summary(svc.db, run_id),
                 answer=run_answer(folder, svc.out), plots=plots,
                 fingerprints=fingerprint.rows(
                     (found["manifest"] or {}).get("fingerprints") or {}))


@router.get("/runs/{run_id}/plots/{name}")
def plot(request: Request, run_id: str, name: str):
    svc = service(request)
    found = store.run(svc.db, run_id) if store.RUN_ID.match(run_id) else None
    path = Path(found["path"]) / name if found and name in PLOTS else None
    if path is None or not served(path, svc.out):
        raise HTTPException(404, f"run {run_id[:80]!r} has no plot {name[:40]!r}")
    return FileResponse(path, media_type="image/png")


@router.get("/runs/{run_id}/report")
def report(request: Request, run_id: str):
    svc = service(request)
    found = store.run(svc.db, run_id) if store.RUN_ID.match(run_id) else None
    path = Path(found["path"]) / "report.html" if found else None
    if path is None or not served(path, svc.out):
        raise HTTPException(404, f"run {run_id[:80]!r} has no report")
    return FileResponse(path, media_type="text/html")


@router.get("/compare", response_class=HTMLResponse)
def compare(request: Request, a: str | None = None, b: str | None = None,
            force: bool = False):
    from k8sdds.analysis import comparable

    svc = service(request)
    ids = [r["run_id"] for r in store.list_runs(svc.db, store.RunFilter(limit=1000))]
    rows, error, refused, differ = [], "", False, ()
    if a and b:
        try:  # as /api/compare and the CLI: the same finding, loading and rule
            admitted, rows = compared(svc, a, b, comparable.DEFAULT_METRICS, force)
            differ = admitted.differences + admitted.fingerprints + admitted.controller
        except comparable.CompareRefused as exc:
            error, refused = str(exc), True
        except HTTPException as exc:
            error = str(exc.detail)
    return _page(request, "compare.html", "Compare two runs", runs=ids, a=a, b=b,
                 rows=rows, error=error, refused=refused, differ=differ, force=force)


@router.get("/history", response_class=HTMLResponse)
def history_page(request: Request, metric: str = "throughput_mbps"):
    """Each test's mean per run, oldest first, and its change points (`k8sdds history`)."""
    from k8sdds.analysis import cells, history
    from k8sdds.serve import series

    svc = service(request)

    names = [m.name for m in cells.METRICS]
    metric = metric if metric in names else "throughput_mbps"
    tests, found, error = [], [], ""
    try:
        runs = series.runs_of(svc.db, metric)
        hist = history.series(runs, metric)
        found = history.changes(hist, runs.manifests) if not hist.empty else []
        tests = [(test, g.to_dict("records")) for test, g in hist.groupby("test")]
    except UserError as exc:
        error = str(exc)
    return _page(request, "history.html", "History", metrics=names, metric=metric,
                 tests=tests, changes=[c.said() for c in found], error=error)


@router.get("/tasks", response_class=HTMLResponse)
def tasks(request: Request):
    return _page(request, "tasks.html", "Tasks")


@router.get("/nodes", response_class=HTMLResponse)
def nodes_page(request: Request):
    return _page(request, "nodes.html", "Nodes online", nodes=service(request).nodes())
