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
                             ["throughput_mbps"], svc)
    [row] = done["rows"]
    # one repeat a side: the change is shown, no verdict, and no NaN reaches the JSON
    assert row["verdict"] == "no verdict (one repeat)" and row["significant"] is None
    assert row["baseline_pm_pct"] is None and row["n_baseline"] == 1
