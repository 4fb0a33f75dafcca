"""The web page of `k8sdds serve`: server-rendered HTML (Jinja2) with a little JavaScript on
the tasks page (submit, and follow progress live). No asset from the network."""

from __future__ import annotations

import hmac
from collections.abc import Callable
from pathlib import Path

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from fastapi.templating import Jinja2Templates
from sqlalchemy import Engine

from k8sdds.errors import UserError
from k8sdds.serve import store
from k8sdds.serve.limits import MAX_PAYLOAD

TEMPLATES = Jinja2Templates(directory=str(Path(__file__).resolve().parent / "templates"))
COOKIE = "k8sdds_token"


def allowed(request: Request, token: str | None) -> bool:
    """No token set, or the request brings it (the login cookie, or a Bearer header)."""
    if token is None:
        return True
    header = request.headers.get("authorization", "").encode()
    cookie = request.cookies.get(COOKIE, "").encode()
    return (hmac.compare_digest(header, f"Bearer {token}".encode())
            or hmac.compare_digest(cookie, token.encode()))


def served(path: Path, out: Path) -> bool:
    """A file a page may hand out: a regular file, no link on the way from the run folder
    (`out`) to it, inside that folder."""
    try:
        inside = path.resolve().is_relative_to(Path(out).resolve())
    except OSError:
        return False
    return (inside and not path.is_symlink() and not path.parent.is_symlink()
            and path.is_file())


PLOTS = ("throughput.png", "latency.png", "overhead.png")  # what `k8sdds run` draws


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


def add_pages(app: FastAPI, engine: Engine, token: str | None,
              nodes: Callable[[], list[dict]], out: Path = Path("logs"),
              refused: Callable[[], dict[str, str]] = dict) -> None:
    def page(request: Request, name: str, title: str, **values) -> HTMLResponse:
        if not allowed(request, token):
            return RedirectResponse("/login", 303)
        return TEMPLATES.TemplateResponse(request, name, {"title": title, **values})

    @app.get("/login", response_class=HTMLResponse, include_in_schema=False)
    def login(request: Request, token_given: str | None = Query(None, alias="token")):
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

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    def runs(request: Request, datapath: str | None = None, engine_name: str | None = Query(
             None, alias="engine"), transport: str | None = None, payload: str | None = None):
        # ASCII digits only ('²' is a digit to str.isdigit, not to int), and a size a
        # payload can have: anything else filters nothing
        size = int(payload) if payload and payload.isascii() and payload.isdecimal() and \
            len(payload) <= 10 and int(payload) <= MAX_PAYLOAD else None
        f = store.RunFilter(datapath or None, engine_name or None, transport or None, size)
        return page(request, "runs.html", "Runs", runs=store.list_runs(engine, f), f=f,
                    filtered=any((datapath, engine_name, transport, payload)),
                    refused=sorted(refused().items()))

    @app.get("/runs/{run_id}", response_class=HTMLResponse, include_in_schema=False)
    def run(request: Request, run_id: str):
        found = store.run(engine, run_id) if store.RUN_ID.match(run_id) else None
        if found is None:
            raise HTTPException(404, f"no run {run_id[:80]!r}")
        folder = Path(found["path"])
        report = served(folder / "report.html", out)
        plots = [p for p in PLOTS if served(folder / p, out)]
        from k8sdds import fingerprint

        return page(request, "run.html", f"Run {run_id}", run=found, report=report,
                    summary=store.summary(engine, run_id), answer=run_answer(folder, out),
                    plots=plots, fingerprints=fingerprint.rows(
                        (found["manifest"] or {}).get("fingerprints") or {}))

    @app.get("/runs/{run_id}/plots/{name}", include_in_schema=False)
    def plot(request: Request, run_id: str, name: str):
        if not allowed(request, token):
            return RedirectResponse("/login", 303)
        found = store.run(engine, run_id) if store.RUN_ID.match(run_id) else None
        path = Path(found["path"]) / name if found and name in PLOTS else None
        if path is None or not served(path, out):
            raise HTTPException(404, f"run {run_id[:80]!r} has no plot {name[:40]!r}")
        return FileResponse(path, media_type="image/png")

    @app.get("/runs/{run_id}/report", include_in_schema=False)
    def report(request: Request, run_id: str):
        if not allowed(request, token):
            return RedirectResponse("/login", 303)
        found = store.run(engine, run_id) if store.RUN_ID.match(run_id) else None
        path = Path(found["path"]) / "report.html" if found else None
        if path is None or not served(path, out):
            raise HTTPException(404, f"run {run_id[:80]!r} has no report")
        return FileResponse(path, media_type="text/html")

    @app.get("/compare", response_class=HTMLResponse, include_in_schema=False)
    def compare(request: Request, a: str | None = None, b: str | None = None,
                force: bool = False):
        from k8sdds.analysis import comparable
        from k8sdds.analysis import compare as comparing
        from k8sdds.analysis.load import load

        ids = [r["run_id"] for r in store.list_runs(engine, store.RunFilter(limit=1000))]
        rows, error, refused, differ = [], "", False, ()
        if a and b:
            paths = [store.run(engine, x) if store.RUN_ID.match(x) else None for x in (a, b)]
            if None in paths:
                error = "no such run"
            else:
                try:  # compare's rule, as the CLI and the API apply it
                    runs = load([Path(paths[0]["path"])]), load([Path(paths[1]["path"])])
                    admitted = comparable.admit(*runs, (a, b), force,
                                                options=comparable.QUERY_OPTIONS)
                    differ = admitted.differences + admitted.fingerprints
                    rows = comparing.compare(*runs, comparable.DEFAULT_METRICS)
                except comparable.CompareRefused as exc:
                    error, refused = str(exc), True
                except (UserError, OSError) as exc:
                    error = str(exc)
        return page(request, "compare.html", "Compare two runs", runs=ids, a=a, b=b,
                    rows=rows, error=error, refused=refused, differ=differ, force=force)

    @app.get("/history", response_class=HTMLResponse, include_in_schema=False)
    def history_page(request: Request, metric: str = "throughput_mbps"):
        """Each test's mean per run, oldest first, and its change points (`k8sdds history`)."""
        from k8sdds.analysis import cells, history
        from k8sdds.serve import series

        names = [m.name for m in cells.METRICS]
        metric = metric if metric in names else "throughput_mbps"
        tests, found, error = [], [], ""
        try:
            runs = series.runs_of(engine, metric)
            hist = history.series(runs, metric)
            found = history.changes(hist, runs.manifests) if not hist.empty else []
            tests = [(test, g.to_dict("records")) for test, g in hist.groupby("test")]
        except UserError as exc:
            error = str(exc)
        return page(request, "history.html", "History", metrics=names, metric=metric,
                    tests=tests, changes=[c.said() for c in found], error=error)

    @app.get("/tasks", response_class=HTMLResponse, include_in_schema=False)
    def tasks(request: Request):
        return page(request, "tasks.html", "Tasks")

    @app.get("/nodes", response_class=HTMLResponse, include_in_schema=False)
    def nodes_page(request: Request):
        return page(request, "nodes.html", "Nodes online", nodes=nodes())
