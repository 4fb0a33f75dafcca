"""The API's routers read alone: each route a plain function of the service's parts
(`routes.common.Service`), here on a real SQLite database and real ddsperf logs, without the
app around it (the HTTP side is in test_serve.py and under schemathesis)."""

from __future__ import annotations

import pytest
from fastapi import HTTPException

from k8sdds.reparse import reparse
from k8sdds.serve import store
from k8sdds.serve.routes import runs
from k8sdds.serve.routes.common import Service

from .conftest import fake_run


@pytest.fixture
def svc(tmp_path):
    out = tmp_path / "logs"
    for i, repeats in ((1, 1), (2, 1)):
        run = fake_run(out, f"2026010{i}-000000-{i:04x}", repeats=repeats)
        reparse(run.path)
    engine = store.open_db(store.default_url(tmp_path))
    return Service(engine, out, None, None, lambda: [])


def test_the_runs_router_adds_lists_and_compares_without_an_app(svc):
    assert runs.add(runs.ImportRequest(run="20260101-000000-0001"), svc) == {
        "run": "20260101-000000-0001", "added": True}
    runs.add(runs.ImportRequest(run="20260102-000000-0002"), svc)
    assert runs.one_run("20260101-000000-0001", svc)["run_id"] == "20260101-000000-0001"
    with pytest.raises(HTTPException) as missing:
        runs.one_run("20260103-000000-0003", svc)
    assert missing.value.status_code == 404
    done = runs.compare_runs("20260101-000000-0001", "20260102-000000-0002",
                             ["throughput_mbps"], force=False, same_fingerprint=False, svc=svc)
    [row] = done["rows"]
    # one repeat a side: the change is shown, no verdict, and no NaN reaches the JSON
    assert row["verdict"] == "no verdict (one repeat)" and row["significant"] is None
    assert row["baseline_pm_pct"] is None and row["n_baseline"] == 1


def test_the_documents_csv_body_says_what_the_service_refuses():
    """POST /api/tasks as text/csv: the OpenAPI document refuses the empty body and a body
    without the schedule's header line, and takes the shipped schedules as they are."""
    import re
    from pathlib import Path

    from sqlalchemy import create_engine

    from k8sdds.serve.api import create_app

    doc = create_app(create_engine("sqlite://"), Path("/nonexistent")).openapi()
    schema = doc["paths"]["/api/tasks"]["post"]["requestBody"]["content"]["text/csv"]["schema"]
    assert schema["type"] == "string" and schema["minLength"] == 1
    pattern = re.compile(schema["pattern"])
    assert not pattern.search("") and not pattern.search("1024,false,1,false,0\n")
    for shipped in (Path(__file__).parent.parent / "schedules").glob("*.csv"):
        assert pattern.search(shipped.read_text()), shipped.name


def _asgi_get(app, target: str, headers: tuple[tuple[bytes, bytes], ...] = ()):
    """GET `target` of an ASGI `app` in this process: (status, response headers)."""
    import asyncio

    path, _, query = target.partition("?")
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
             "method": "GET", "scheme": "http", "path": path, "raw_path": path.encode(),
             "query_string": query.encode(), "root_path": "",
             "headers": [(b"host", b"testserver"), *headers],
             "client": ("127.0.0.1", 50000), "server": ("testserver", 80)}
    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    headers = {k.decode(): v.decode() for k, v in start["headers"]}
    return start["status"], headers | {"body": body.decode()}


def test_a_page_without_the_token_touches_neither_the_store_nor_the_run_folders(svc):
    """Every page of the web page checks the token first (the router's dependency): asked
    without it, no statement reaches the database and no file or folder under --out is
    opened or listed (Python's audit events, raised by the interpreter itself); the login
    form is the only page it gets."""
    import sys

    from sqlalchemy import event

    from k8sdds.serve.api import create_app

    for run_id in ("20260101-000000-0001", "20260102-000000-0002"):
        runs.add(runs.ImportRequest(run=run_id), svc)
    app = create_app(svc.db, svc.out, token="t0ken-of-the-test-0123456789")
    statements: list[str] = []
    touched: list[str] = []
    watching = [False]
    out = str(svc.out.resolve())

    def count(conn, cursor, statement, *args) -> None:
        statements.append(statement)

    def audit(name: str, args: tuple) -> None:
        if watching[0] and name in ("open", "os.listdir", "os.scandir") and args and \
                str(args[0]).startswith(out):
            touched.append(f"{name} {args[0]}")

    event.listen(svc.db, "before_cursor_execute", count)
    sys.addaudithook(audit)  # cannot be removed: it watches only while `watching`
    pages = ["/", "/runs/20260101-000000-0001", "/runs/20260101-000000-0001/plots/"
             "throughput.png", "/runs/20260101-000000-0001/report",
             "/compare?a=20260101-000000-0001&b=20260102-000000-0002", "/history", "/tasks",
             "/nodes"]
    try:
        watching[0] = True
        for page in pages:
            status, headers = _asgi_get(app, page)
            assert (status, headers.get("location")) == (303, "/login"), page
        assert statements == [] and touched == []
        assert _asgi_get(app, "/login")[0] == 200
        # with the token (the login cookie), the same pages do their work
        cookie = ((b"cookie", b"k8sdds_token=t0ken-of-the-test-0123456789"),)
        assert _asgi_get(app, "/compare?a=20260101-000000-0001&b=20260102-000000-0002",
                         cookie)[0] == 200
        assert statements and touched
    finally:
        watching[0] = False
        event.remove(svc.db, "before_cursor_execute", count)


def test_the_api_and_the_page_compare_alike_and_answer_the_same_errors(svc):
    """/api/compare and the page's /compare go through one helper (routes.common.compared):
    a run the database lacks, a run whose directory is gone and a good pair are answered
    with the same reason by both, the API with its status."""
    import html
    import json

    from k8sdds.serve.api import create_app

    for run_id in ("20260101-000000-0001", "20260102-000000-0002"):
        runs.add(runs.ImportRequest(run=run_id), svc)
    app = create_app(svc.db, svc.out)
    (svc.out / "20260102-000000-0002" / "manifest.json").rename(svc.out / "kept.json")
    for b, status in (("20260103-000000-0003", 404), ("20260102-000000-0002", 410)):
        query = f"a=20260101-000000-0001&b={b}"
        got, api = _asgi_get(app, f"/api/compare?{query}")
        said = json.loads(api["body"])["detail"]
        assert got == status and b in said, (got, said)
        page_status, page = _asgi_get(app, f"/compare?{query}")
        assert page_status == 200 and said in html.unescape(page["body"]), said
    (svc.out / "kept.json").rename(svc.out / "20260102-000000-0002" / "manifest.json")
    query = "a=20260101-000000-0001&b=20260102-000000-0002"
    got, api = _asgi_get(app, f"/api/compare?{query}")
    assert got == 200 and json.loads(api["body"])["rows"]
    assert 'id="compare"' in _asgi_get(app, f"/compare?{query}")[1]["body"]
