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
