"""`k8sdds serve` against schemathesis, the OpenAPI fuzzer, as an outside checker: every
operation, the stateful phase included, `--checks all`, on SQLite and on PostgreSQL, with a
run in the database. Nothing may be found: no 5xx for any input, every status the API returns
declared with its body's schema, what the schema rejects rejected. Tasks that would run real
work are refused by the service's ceiling (`--max-task-seconds`), which is checked too."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .test_serve import _clear, _free_port, _get, _runs, _wait_listening, db_url, postgres  # noqa: F401

ROOT = Path(__file__).parent.parent
SCHEMATHESIS = shutil.which("schemathesis", path=str(Path(sys.executable).parent))
# a fuzzer's minutes against the real service: `make test` runs it, `make check` does not
pytestmark = [pytest.mark.service,
              pytest.mark.skipif(SCHEMATHESIS is None,
                                 reason="needs schemathesis (pip install -e '.[test]')")]
CEILING = 0.5  # seconds: every real schedule measures longer


@pytest.fixture
def service(db_url, tmp_path):  # noqa: F811 - the fixture of test_serve
    """The real `k8sdds serve` on a free loopback port, one run added to its database."""
    _clear(db_url)
    logs = tmp_path / "logs"
    [run] = _runs(logs, 1)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    added = subprocess.run([sys.executable, "-m", "k8sdds", "serve", "--db", db_url, "--out",
                            str(logs), "--add-runs"], env=env, capture_output=True, text=True,
                           timeout=120)
    assert added.returncode == 0 and "added 1 runs" in added.stdout, added.stderr
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "k8sdds", "serve", "--db", db_url,
                             "--listen", f"127.0.0.1:{port}", "--out", str(logs),
                             "--max-task-seconds", str(CEILING)], env=env,
                            stderr=subprocess.PIPE, text=True)
    try:
        _wait_listening(proc, port)
        yield f"http://127.0.0.1:{port}", logs, run.name
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_schemathesis_finds_nothing(service, tmp_path):
    base, logs, run_id = service
    before = sorted(p.name for p in logs.iterdir())
    done = subprocess.run(
        [SCHEMATHESIS, "--config-file", str(ROOT / "tests" / "schemathesis.toml"), "run",
         f"{base}/openapi.json", "--checks", "all", "--max-examples", "25", "--seed", "1",
         "--no-color"], capture_output=True, text=True, timeout=600, cwd=tmp_path,
        env={**os.environ, "K8SDDS_RUN_ID": run_id})
    out = done.stdout + done.stderr
    lines = out.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("API Operations:")), 0)
    summary = [line for line in lines[start:] if line.strip()]
    print("\n".join(summary), file=sys.stderr)  # its summary (seen with -s)
    assert done.returncode == 0, out[-6000:]
    assert "Stateful" in out and " passed" in out and "failures" not in out.lower(), out
    status, body = _get(f"{base}/api/tasks")
    assert status == 200
    assert [t for t in json.loads(body) if t["status"] in ("running", "done")] == []
    assert sorted(p.name for p in logs.iterdir()) == before  # no run was made
    status, _ = _get(f"{base}/api/runs/{run_id}")
    assert status == 200  # the run it had is still served


def test_a_task_over_the_ceiling_is_refused_with_the_reason(service):
    base, _, _ = service
    body = json.dumps({"schedule": "dataLen,multicast,numSubscribers,bestEffort,batchSize\n"
                                   "1024,false,1,false,0\n",
                       "options": {"duration": 2, "repeats": 3}}).encode()
    status, text = _get(f"{base}/api/tasks", data=body)
    assert status == 422, text
    assert ("the schedule would measure for 6 s (1 tests, their durations times their "
            f"repeats), over this service's ceiling of {CEILING:g} s") in text
    baseline = json.dumps({"kind": "baseline", "options": {
        "engines": "ping", "paths": "node-node", "datapath": "host", "dds": False,
        "duration": 1}}).encode()
    status, text = _get(f"{base}/api/tasks", data=baseline)
    assert status == 422 and "the baseline would measure for 1 s (1 tests" in text, text
    assert json.loads(_get(f"{base}/api/tasks")[1]) == []  # nothing queued
