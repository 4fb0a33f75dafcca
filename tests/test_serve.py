"""`k8sdds serve` (first part of issue 20): runs imported into a real database, SQLite and a
PostgreSQL server started in a temporary directory on a Unix socket, with the same tests;
the HTTP API served by the real `k8sdds serve` process and called over HTTP."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

from k8sdds.reparse import reparse
from k8sdds.serve import store

from .conftest import fake_run

PG_BIN = Path("/usr/lib/postgresql/15/bin")


def _pg_missing() -> str | None:
    if not (PG_BIN / "initdb").exists():
        return "needs Debian's postgresql (make test installs it)"
    if os.geteuid() != 0:
        return "starts PostgreSQL as its postgres user: needs root"
    return None


@pytest.fixture(scope="module")
def postgres():
    """A PostgreSQL server of the test's own: a data directory and a Unix socket under a
    temporary directory, no TCP port."""
    reason = _pg_missing()
    if reason:
        pytest.skip(reason)
    import tempfile

    d = Path(tempfile.mkdtemp(prefix="k8sdds-pg-"))  # pytest's are root's alone (0700)
    data, sock = d / "data", d / "sock"
    sock.mkdir()
    shutil.chown(d, "postgres")
    shutil.chown(sock, "postgres")
    as_pg = ["runuser", "-u", "postgres", "--"]
    subprocess.run([*as_pg, str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U",
                    "postgres"], check=True, capture_output=True)
    subprocess.run([*as_pg, str(PG_BIN / "pg_ctl"), "-D", str(data), "-w", "-l",
                    str(d / "log"), "-o", f"-k {sock} -c listen_addresses=''", "start"],
                   check=True, capture_output=True)
    try:
        subprocess.run([*as_pg, str(PG_BIN / "createdb"), "-h", str(sock), "k8sdds"],
                       check=True, capture_output=True)
        yield f"postgresql+psycopg://postgres@/k8sdds?host={sock}"
    finally:
        subprocess.run([*as_pg, str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast",
                        "stop"], capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


# PostgreSQL is a real server of its own, started as its postgres user (root): `make test`
# runs it, `make check` (no root) leaves it out (marker service)
POSTGRESQL = pytest.param("postgresql", marks=pytest.mark.service)


@pytest.fixture(params=["sqlite", POSTGRESQL])
def db_url(request, tmp_path):
    if request.param == "sqlite":
        return store.default_url(tmp_path)
    return request.getfixturevalue("postgres")


def _runs(folder: Path, n: int = 3) -> list[Path]:
    out = []
    for i in range(n):
        run = fake_run(folder, f"2026010{i + 1}-000000-{i:04x}", repeats=2)
        reparse(run.path)
        out.append(run.path)
    return out


def _clear(url: str) -> None:
    """An empty schema for the next test (the PostgreSQL server is shared)."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.begin() as conn:
        for table in ("results", "run_tests", "runs", "tasks", "alembic_version"):
            conn.execute(text(f"DROP TABLE IF EXISTS {table}"))
    engine.dispose()


def test_a_task_queued_before_revision_3_keeps_what_it_asked(db_url):
    """Revision 0003 folds a task's options and schedule into the one request text the
    service now keeps; a task that no longer checks is failed, with the reason, not lost."""
    from sqlalchemy import create_engine, inspect, text

    _clear(db_url)
    engine = create_engine(db_url)
    store.migrate(engine, "0002")
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO tasks (kind, status, target, schedule, options, created) VALUES "
            "('schedule', 'queued', 'emulated:k8sdds', :s, :o, CURRENT_TIMESTAMP), "
            "('schedule', 'queued', 'emulated:k8sdds', :s, :bad, CURRENT_TIMESTAMP)"),
            {"s": "dataLen\n1024\n", "o": '{"backend": "emulated", "duration": 7}',
             "bad": '{"backend": "emulated", "no_such_option": 1}'})
    store.migrate(engine)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT id, status, message, request FROM tasks "
                                 "ORDER BY id")).all()
        columns = {c["name"] for c in inspect(conn).get_columns("tasks")}
    engine.dispose()
    assert "options" not in columns and "schedule" not in columns
    asked = json.loads(rows[0].request)
    assert rows[0].status == "queued"
    assert asked["schedule_text"] == "dataLen\n1024\n" and asked["flags"] == {"duration": 7}
    assert asked["backend"] == "emulated" and asked["out"] == "."
    assert rows[1].status == "failed" and "no_such_option" in rows[1].message


def test_a_latency_stored_before_revision_4_becomes_the_round_trip(db_url, tmp_path):
    """Revision 0004: a run added when ddsperf's latencies were stored as printed (half a
    round trip) is migrated to the round trip, in the typed value and in the row; throughput
    and the network engines' figures (whole round trips already) are left as they were."""
    from sqlalchemy import create_engine, text

    _clear(db_url)
    engine = create_engine(db_url)
    store.migrate(engine, "0003")
    old = [("ddsperf", "latency_us_p50", 40.5), ("ddsperf", "throughput_mbps", 90.0),
           ("ping", "latency_us_p50", 31.0), ("rtiperftest", "latency_us_mean", 1137.0)]
    with engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO runs (run_id, backend, engine, datapaths, transports, path, imported, "
            "n_values, manifest) VALUES ('20260101-000000-abcd', 'emulated', 'ddsperf', "
            "'host', 'udp', '/x', CURRENT_TIMESTAMP, 4, '{}')"))
        for i, (eng, metric, value) in enumerate(old):
            row = {"engine": eng, "metric": metric, "value": f"{value:g}", "kind": "summary"}
            conn.execute(text(
                "INSERT INTO results (run_id, test, repeat, datapath, engine, transport, "
                "data_len, role, kind, metric, value, unit, row) VALUES "
                "('20260101-000000-abcd', :i, 1, 'host', :e, 'udp', 64, 'pub', 'summary', "
                ":m, :v, 'us', :r)"), {"i": i, "e": eng, "m": metric, "v": value,
                                       "r": json.dumps(row)})
    store.migrate(engine)
    with engine.connect() as conn:
        got = conn.execute(text("SELECT value, row FROM results ORDER BY test")).all()
    engine.dispose()
    values = [g.value for g in got]
    rows = [g.row if isinstance(g.row, dict) else json.loads(g.row) for g in got]
    assert values == [81.0, 90.0, 31.0, 2274.0]
    assert [r["value"] for r in rows] == ["81", "90", "31", "2274"]
    # the throughput row is not touched (reading it fills its empty definition)
    assert [r.get("definition") for r in rows] == ["round trip", None, "round trip",
                                                   "round trip"]


def test_a_manifest_stored_before_revision_5_names_its_cpu_count_as_today(db_url):
    """Revision 0005: a stored manifest of schema version 2 (its fingerprints' `cpus`) is
    upgraded as a run directory's is when read; one that is no manifest is left as it was."""
    from sqlalchemy import create_engine, text

    _clear(db_url)
    engine = create_engine(db_url)
    store.migrate(engine, "0004")
    v2 = {"schema_version": 2, "run_id": "20260101-000000-abcd", "backend": "emulated",
          "tests": [], "fingerprints": {"host": {"node1": {"cpus": 2, "kernel": "6.18"}}}}
    with engine.begin() as conn:
        for run_id, manifest in (("20260101-000000-abcd", v2), ("20260102-000000-abcd", {})):
            conn.execute(text(
                "INSERT INTO runs (run_id, backend, engine, datapaths, transports, path, "
                "imported, n_values, manifest) VALUES (:r, 'emulated', 'ddsperf', 'host', "
                "'udp', '/x', CURRENT_TIMESTAMP, 0, :m)"), {"r": run_id,
                                                             "m": json.dumps(manifest)})
    store.migrate(engine)
    with engine.connect() as conn:
        got = [g.manifest if isinstance(g.manifest, dict) else json.loads(g.manifest)
               for g in conn.execute(text("SELECT manifest FROM runs ORDER BY run_id"))]
    engine.dispose()
    assert got[0]["schema_version"] == 3
    assert got[0]["fingerprints"] == {"host": {"node1": {"cpu_count": 2, "kernel": "6.18"}}}
    assert got[1] == {}


def test_runs_are_imported_once_and_read_back_as_written(db_url, tmp_path):
    _clear(db_url)
    paths = _runs(tmp_path / "logs")
    engine = store.open_db(db_url)
    store.open_db(db_url)  # migrating twice changes nothing
    first = store.add_runs(engine, tmp_path / "logs")
    assert sorted(first.added) == sorted(p.name for p in paths) and not first.refused
    again = store.add_runs(engine, tmp_path / "logs")
    assert again.added == () and sorted(again.present) == sorted(first.added)
    for path in paths:
        written = pd.read_csv(path / "results.csv", dtype=str, keep_default_na=False)
        back = store.run_results(engine, path.name)
        assert len(back) == len(written) > 0  # each value exactly once
        assert back == written.to_dict("records")
    listed = store.list_runs(engine, store.RunFilter())
    assert [r["run_id"] for r in listed] == sorted((p.name for p in paths), reverse=True)
    assert all(r["values"] == len(pd.read_csv(tmp_path / "logs" / r["run_id"] /
                                              "results.csv")) for r in listed)
    assert store.list_runs(engine, store.RunFilter(datapath="weave")) == []
    assert len(store.list_runs(engine, store.RunFilter(datapath="flannel-hostgw",
                                                       payload=1024))) == 3
    assert store.list_runs(engine, store.RunFilter(payload=77)) == []
    assert len(store.list_runs(engine, store.RunFilter(limit=2))) == 2
    engine.dispose()


def test_a_damaged_run_is_refused_by_name_and_the_others_are_added(db_url, tmp_path):
    _clear(db_url)
    good, bad = _runs(tmp_path / "logs", 2)
    (bad / "manifest.json").write_text("{not json")
    engine = store.open_db(db_url)
    done = store.add_runs(engine, tmp_path / "logs")
    assert done.added == (good.name,)
    assert done.refused[0][0] == str(bad) and "manifest.json" in done.refused[0][1]
    assert store.run(engine, bad.name) is None
    engine.dispose()


def test_a_bad_database_url_is_a_clear_error(tmp_path):
    from k8sdds.errors import UserError

    with pytest.raises(UserError, match=r"database postgresql\+psycopg://u:\*\*\*@"):
        store.open_db("postgresql+psycopg://u:secret@/nodb?host=" + str(tmp_path))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str, token: str | None = None, data: bytes | None = None):
    request = urllib.request.Request(url, data=data, headers={
        **({"Authorization": f"Bearer {token}"} if token else {}),
        **({"Content-Type": "application/json"} if data else {})})
    try:
        # generous: on a loaded machine the first import loads pandas in the server
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@contextlib.contextmanager
def _serve(db_url: str, folder: Path) -> Iterator[tuple[str, str, Path]]:
    """The real `k8sdds serve` on a free loopback port, with a token, over two runs, which
    it adds only when asked (--watch 0: the tests of --add-runs and POST /api/imports)."""
    _clear(db_url)
    _runs(folder / "logs", 2)
    token_file = folder / "token"
    token_file.write_text("t0ken-of-the-test-0123456789\n")
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)}
    proc = subprocess.Popen([sys.executable, "-m", "k8sdds", "serve", "--db", db_url,
                             "--listen", f"127.0.0.1:{port}", "--out", str(folder / "logs"),
                             "--token-file", str(token_file), "--watch", "0"], env=env,
                            stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_listening(proc, port)
        yield base, "t0ken-of-the-test-0123456789", folder / "logs"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _wait_listening(proc: subprocess.Popen, port: int) -> None:
    """Until the started `k8sdds serve` listens on `port` (it fails the test if it exits)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            assert proc.poll() is None, proc.stderr.read()
            assert time.monotonic() < deadline, "k8sdds serve did not listen"
            time.sleep(0.1)  # a server starting: nothing to wait on but its port


@pytest.fixture
def service(db_url, tmp_path):
    """A service of the test's own."""
    with _serve(db_url, tmp_path) as made:
        yield made


@pytest.fixture(scope="module", params=["sqlite", POSTGRESQL])
def shared_service(request, tmp_path_factory):
    """One service per database for the requests that must change nothing (each is
    refused with a 4xx): started once, not once per request."""
    folder = tmp_path_factory.mktemp("serve")
    url = (store.default_url(folder) if request.param == "sqlite"
           else request.getfixturevalue("postgres"))
    with _serve(url, folder) as made:
        yield made


def test_the_api_adds_lists_and_returns_results_with_the_token(service):
    base, token, logs = service
    runs = sorted(p.name for p in logs.iterdir() if p.is_dir())
    assert _get(f"{base}/api/runs")[0] == 401  # no token: nothing
    assert _get(f"{base}/api/runs", "wrong-token-wrong-token")[0] == 401
    for run in runs:
        assert _get(f"{base}/api/imports", token, json.dumps({"run": run}).encode()) == (
            201, json.dumps({"run": run, "added": True}, separators=(",", ":")))
    status, body = _get(f"{base}/api/imports", token, json.dumps({"run": runs[0]}).encode())
    assert status == 200 and json.loads(body)["added"] is False  # never twice
    status, body = _get(f"{base}/api/runs?datapath=flannel-hostgw&payload=1024", token)
    assert status == 200 and [r["run_id"] for r in json.loads(body)] == runs[::-1]
    status, body = _get(f"{base}/api/runs/{runs[0]}/results?format=csv", token)
    assert status == 200 and body == (logs / runs[0] / "results.csv").read_text()
    status, body = _get(f"{base}/api/runs/{runs[0]}/results", token)
    assert status == 200 and len(json.loads(body)) == body.count('"metric"')
    assert _get(f"{base}/openapi.json")[0] == 200


@pytest.mark.parametrize("path,data,code", [
    ("/api/runs/..%2F..%2Fetc%2Fpasswd", None, 404),
    ("/api/runs/%2e%2e/results", None, 404),
    ("/api/runs/nosuchrun", None, 404),
    ("/api/runs?payload=-1", None, 422),
    ("/api/runs?limit=100000", None, 422),
    ("/api/runs/x/results?format=xml", None, 422),
    ("/api/imports", b'{"run": "../../etc"}', 404),
    ("/api/imports", b'{"run": "a", "extra": 1}', 422),
    ("/api/imports", b"not json", 422),
    ("/api/tasks/abc", None, 422),
    ("/api/tasks/999", None, 404),
    ("/api/tasks/999/cancel", b"{}", 409),
    ("/api/tasks/999/resume", b"{}", 409),
    ("/api/tasks", b'{"schedule": 5}', 422),
    ("/api/tasks", b'{"schedule": "dataLen\\n1024\\n", "options": {"kubeconfig": "x"}}', 422),
    ("/api/tasks", b"\xff\xfe", 422),
    ("/api/compare?a=nosuch&b=nosuch", None, 404),
    ("/api/history?metric=DROP%20TABLE", None, 422),
    ("/runs/..%2F..%2Fetc", None, 404),
    ("/runs/nosuch/report", None, 404),
])
def test_hostile_requests_get_4xx(shared_service, path, data, code):
    base, token, _ = shared_service
    status, body = _get(base + path, token, data)
    assert status == code, body
    assert "Traceback" not in body


@pytest.mark.parametrize("path,field", [("/api/imports", "run"), ("/api/tasks", "schedule")])
def test_an_oversized_body_gets_413(service, path, field):
    """On a service of its own: a fresh server reads the 2 MiB body before it answers, where
    a warm one answers 413 while the client still sends (a broken pipe on the client)."""
    base, token, _ = service
    status, body = _get(base + path, token,
                        b'{"' + field.encode() + b'": "' + b"a" * (2 << 20) + b'"}')
    assert status == 413, body
    assert "Traceback" not in body


def test_listening_beyond_loopback_needs_a_token(tmp_path):
    done = subprocess.run([sys.executable, "-m", "k8sdds", "serve", "--listen", "0.0.0.0:8080",
                           "--out", str(tmp_path)], capture_output=True, text=True,
                          timeout=60, env={**os.environ,
                                           "PYTHONPATH": str(Path(__file__).parent.parent)})
    assert done.returncode == 2 and "needs --token-file" in done.stderr
    done = subprocess.run([sys.executable, "-m", "k8sdds", "serve", "--listen", "nowhere",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "is not ADDRESS:PORT" in " ".join(done.stderr.split())


def test_pages_need_the_token_too_and_login_sets_it(shared_service):
    base, token, _ = shared_service
    status, body = _get(f"{base}/")  # redirected to the login form
    assert status == 200 and 'name="token"' in body and "<table" not in body
    status, body = _get(f"{base}/login?token=wrong-token-wrong-token")
    assert status == 401 and "not the token" in body
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor())
    with opener.open(f"{base}/login?token={token}", timeout=10) as response:
        assert response.status == 200 and '<table id="runs">' in response.read().decode()
    with opener.open(f"{base}/api/tasks", timeout=10) as response:  # the cookie serves
        assert response.status == 200


def test_a_body_of_unknown_length_is_refused(shared_service):
    import http.client

    base, token, _ = shared_service
    host, port = base.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=10)
    conn.request("POST", "/api/tasks", body=iter([b'{"schedule": "', b"x" * 1000, b'"}']),
                 headers={"Authorization": f"Bearer {token}",
                          "Content-Type": "application/json"}, encode_chunked=True)
    response = conn.getresponse()
    assert response.status == 411 and b"Content-Length" in response.read()
    conn.close()


# the flags of `k8sdds run` and `k8sdds baseline` a task may set, written out
RUN_FLAGS = {"datapath": "--datapath", "duration": "--duration", "repeats": "--repeats",
             "from_i": "--fromI", "to_i": "--toI", "latency_test": "--latencyTest",
             "transport": "--transport", "secure": "--secure", "peers": "--peers",
             "send_queue_size": "--sendQueueSize", "no_print": "--noPrint", "order": "--order",
             "strict": "--strict", "engine": "--engine"}
BASELINE_FLAGS = {"datapath": "--datapath", "paths": "--paths", "engines": "--engines",
                  "dds": "--dds", "duration": "--duration", "repeats": "--repeats"}


def test_every_task_option_is_a_flag_of_run_or_baseline():
    """A task's fields are the flags of `k8sdds run` and `baseline` (and every backend's), as
    the commands show them: one declaration for both."""
    from dataclasses import fields

    from typer.main import get_command

    from k8sdds.cli import app
    from k8sdds.deployment import BACKENDS
    from k8sdds.serve.options import TaskOptions

    command = get_command(app)
    shown = {name: {opt for p in command.commands[name].params for opt in p.opts}
             for name in ("run", "baseline")}
    assert set(RUN_FLAGS.values()) <= shown["run"]
    assert set(BASELINE_FLAGS.values()) <= shown["baseline"]
    own = {f.name for kind in BACKENDS.values() for f in fields(kind.options)}
    assert set(TaskOptions.model_fields) == {"backend"} | set(RUN_FLAGS) | set(
        BASELINE_FLAGS) | own


def test_a_task_asks_for_its_run_as_the_command_line_does(tmp_path):
    """The same flags on the command line and in a task make the same request; the request
    file the service hands its child reads back as it was written."""
    from dataclasses import replace

    from k8sdds import request
    from k8sdds.errors import UserError
    from k8sdds.run_flags import Matrix, ScheduleFlags
    from k8sdds.serve.options import TaskOptions

    every = TaskOptions(datapath="host", transport="udp", repeats=2, duration=1.0,
                        profile="rpi3b", testbed="x", nodes=3, from_i=1, to_i=4,
                        latency_test=True, peers=True, send_queue_size=10, order="rounds",
                        testbed_spec="/s.yaml", no_calibrate=True)
    asked = every.request("a,b\n1,2\n")
    assert asked.flags == ScheduleFlags(datapath="host", transport="udp", repeats=2,
                                        duration=1.0, from_i=1, to_i=4, latency_test=True,
                                        peers=True, send_queue_size=10, order="rounds")
    assert asked.flags.defaults().discovery == "peers"
    assert str(asked.backend_options["testbed_spec"]) == "/s.yaml"
    with pytest.raises(UserError, match="from_i, to_i, latency_test, transport, peers, "
                       "send_queue_size, order: not an option of a baseline task"):
        every.request("", "baseline")
    baseline = TaskOptions(engines="ping", paths="node-node", dds=False, repeats=3)
    assert baseline.request("", "baseline").matrix == Matrix(
        engines="ping", paths="node-node", dds=False, repeats=3)
    with pytest.raises(UserError, match="paths, engines, dds: not an option of a schedule"):
        baseline.request("a\n1\n")
    for req in (replace(asked, out=tmp_path), baseline.request("", "baseline"),
                request.RunRequest(resume=tmp_path / "run")):
        assert request.loads(request.dumps(req), "r.json") == req


@pytest.mark.parametrize("change, said", [
    ({"flags": {"repeats": 0}}, "flags: repeats = 0 is not allowed; allowed: a whole number "
                                "from 1 to 1000"),
    ({"flags": {"repeats": "3"}}, "flags: repeats = '3' is not allowed"),
    ({"flags": {"repeats": True}}, "flags: repeats = True is not allowed"),
    ({"flags": {"duration": float("nan")}}, "flags: duration = nan is not allowed"),
    ({"flags": {"shell": "rm -rf /"}}, "flags: 'shell' is not an option here"),
    ({"matrix": {"dds": "yes"}}, "matrix: dds = 'yes' is not allowed; allowed: true or false"),
    ({"backend_options": {"kubeconfig": "relative"}}, "kubeconfig = 'relative' is not "
                                                      "allowed; allowed: an absolute path"),
    ({"backend_options": {"nodes": 1}}, "nodes = 1 is not allowed"),
    ({"backend_options": {"privileged": True}}, "privileged: no backend has such an option"),
    ({"format": 2}, "not a run request of format 1"),
    ({"out": 3}, "out must be text"),
])
def test_a_request_file_is_checked_again_on_read(change, said):
    import json

    from k8sdds import request
    from k8sdds.errors import UserError

    good = json.loads(request.dumps(request.RunRequest(schedule_text="a\n1\n")))
    with pytest.raises(UserError, match=re.escape(said)):
        request.loads(json.dumps({**good, **change}), "r.json")


def test_run_takes_a_request_file_and_nothing_else_with_it(tmp_path):
    from .cli_support import invoke

    bad = tmp_path / "r.json"
    bad.write_text('{"format": 1, "flags": {"repeats": 0}}')
    done = invoke("run", "--request", str(bad), "--out", str(tmp_path / "out"))
    assert done.returncode == 2 and f"{bad}: flags: repeats = 0 is not allowed" in " ".join(
        done.stderr.split()), done.stderr
    done = invoke("run", "--request", str(bad), "--repeats", "2")
    assert done.returncode == 2 and "give no other run option with it" in done.stderr
    assert not (tmp_path / "out").exists()


def test_task_options_take_the_bounds_of_the_flags():
    from pydantic import ValidationError

    from k8sdds.serve.options import TaskOptions

    for bad in ({"nodes": 1}, {"nodes": 65}, {"pod_timeout": 0}, {"image": "--privileged"},
                {"kubeconfig": "relative/path"}):
        with pytest.raises(ValidationError):
            TaskOptions(**bad)


def test_a_task_is_checked_as_k8sdds_run_checks_it(tmp_path):
    """At submit, with the chosen backend's own limits: what the run would refuse later is
    refused now, saying why (nothing is queued)."""
    from sqlalchemy import select

    from k8sdds.errors import UserError
    from k8sdds.serve.options import TaskOptions
    from k8sdds.serve.schema import tasks
    from k8sdds.serve.store import default_url, open_db
    from k8sdds.serve.tasks import Worker

    engine = open_db(default_url(tmp_path))
    worker = Worker(engine, tmp_path)
    head = "dataLen,multicast,numSubscribers,bestEffort,batchSize\n"
    for options, said in (
            ({"testbed_spec": "/nonexistent/spec.yaml"}, "no such testbed spec"),
            ({"kubeconfig": "/k"}, "--kubeconfig is an option of --backend kubernetes"),
            ({"datapath": "cilium"}, "datapath: 'cilium' is not one of"),
            ({"transport": "carrier-pigeon"}, "transport: 'carrier-pigeon' is not one of")):
        with pytest.raises(UserError, match=said):
            worker.submit(head + "1024,false,1,false,0\n", TaskOptions(**options))
    with engine.connect() as conn:
        assert conn.execute(select(tasks)).all() == []


@pytest.mark.parametrize("code, said, cancelled, status, message", [
    (0, {"run_dir": "/r/x", "repeats": 3, "failed": []}, False, "done", ""),
    (0, {"run_dir": "/r/x", "repeats": 3, "failed": ["test-1/rep-1: it crashed"]}, False,
     "done", "1 of 3 repeats failed"),
    (1, {"error": "no space left", "kind": "RunStopped", "exit": 1}, False, "stopped",
     "no space left"),
    (130, {}, False, "stopped", "tail"),
    (130, {}, True, "cancelled", "cancelled"),
    (1, {"error": "ddsperf is not installed", "kind": "EngineUnavailable", "exit": 1}, False,
     "failed", "ddsperf is not installed"),
    (-9, {}, False, "failed", "tail"),
])
def test_how_a_task_ended_is_read_from_the_childs_outcome(code, said, cancelled, status,
                                                           message):
    from k8sdds.serve.tasks import ending

    assert ending(code, said, cancelled, "tail") == (status, message)


def test_progress_comes_from_the_childs_events():
    from k8sdds.serve.tasks import progress_of

    assert progress_of('{"event": "start", "run_id": "r1", "done": 2, "total": 9}') == {
        "run_id": "r1", "done": 2, "total": 9}
    assert progress_of('{"event": "repeat", "done": 3, "total": 9}') == {"done": 3, "total": 9}
    for junk in ('{"event": "step", "description": "x"}', "not json", "[1]",
                 '{"event": "repeat", "done": "3"}'):
        assert progress_of(junk) == {}


def test_a_task_and_the_command_line_take_one_set_of_bounds(tmp_path):
    """repeats 1 to 1000 and duration 1 to 86,400 s, as the schedule's columns: a task
    refuses what `k8sdds run` refuses, and takes what it takes."""
    from pydantic import ValidationError

    from k8sdds.serve.options import TaskOptions

    from .cli_support import invoke

    TaskOptions(repeats=1000, duration=1.0)
    TaskOptions(repeats=1, duration=86400.0)
    sch = Path(__file__).parent.parent / "schedules" / "quick.csv"
    for field, value in (("repeats", 1001), ("repeats", 0), ("duration", 0.5),
                         ("duration", 86401.0)):
        with pytest.raises(ValidationError):
            TaskOptions(**{field: value})
        done = invoke("run", "--sch", str(sch), f"--{field}", str(value), "--out",
                      str(tmp_path / "out"), env={"K8SDDS_STATE_DIR": str(tmp_path / "s")})
        assert done.returncode == 2 and f"'--{field}'" in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


def _copy_run(logs: Path, source: str, name: str, change, manifest_change=None) -> Path:
    """A copy of a run directory under a new run id, its results.csv's rows changed (and
    its manifest, by `manifest_change`)."""
    import csv
    import io
    import shutil

    target = logs / name
    shutil.copytree(logs / source, target)
    manifest = json.loads((target / "manifest.json").read_text())
    manifest["run_id"] = name
    if manifest_change:
        manifest_change(manifest)
    (target / "manifest.json").write_text(json.dumps(manifest))
    rows = list(csv.DictReader(io.StringIO((target / "results.csv").read_text())))
    for row in rows:
        row["run_id"] = name
    change(rows)
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    (target / "results.csv").write_text(text.getvalue())
    return target


def test_impossible_values_huge_numbers_and_linked_reports_never_answer_500(service, db_url,
                                                                           tmp_path):
    """An imported run holding inf, nan, a number no column holds or an engine or datapath
    k8sdds does not have is refused (422, the reason); a database that already holds an
    infinite value still answers its history; a page's query with a digit int() refuses or a
    huge number is no filter; a report.html that is a link out of the run folder is not
    served."""
    from sqlalchemy import create_engine, update

    from k8sdds.serve.schema import results

    base, token, logs = service
    runs = sorted(p.name for p in logs.iterdir() if p.is_dir())

    def first_summary(rows, field, value):
        row = next(r for r in rows if r["kind"] == "summary" and r["metric"] ==
                   "throughput_mbps")
        row[field] = value

    for i, (field, value, said) in enumerate((
            ("value", "inf", "not a finite number"), ("value", "nan", "not a finite number"),
            ("value", "-3.5", "negative"),
            ("data_len", "99999999999999999999", "larger than any test has"),
            ("engine", "=cmd|' /C calc'!A0", "not one k8sdds has"),
            ("datapath", "<script>alert(1)</script>", "not one k8sdds has"),
            ("backend", "=HYPERLINK(\"x\")", "not one k8sdds has"),
            ("unit", "<b>Mb/s</b>", "not a unit"))):
        name = f"20260201-00000{i}-beef"
        _copy_run(logs, runs[0], name, lambda rows, f=field, v=value: first_summary(rows, f, v))
        status, body = _get(f"{base}/api/imports", token, json.dumps({"run": name}).encode())
        assert status == 422 and said in body and "results.csv, line " in body, body
    # the manifest's backend and datapaths, which the runs page and /metrics show
    for i, (field, value) in enumerate((("backend", "<img src=x>"),
                                        ("datapaths", ["host", "weave\nx{a=\"b\"}"]))):
        name = f"20260202-00000{i}-beef"
        _copy_run(logs, runs[0], name, lambda rows: None,
                  lambda m, f=field, v=value: m.__setitem__(f, v))
        status, body = _get(f"{base}/api/imports", token, json.dumps({"run": name}).encode())
        assert status == 422 and "manifest.json" in body and "not one k8sdds has" in body, body
    # a database written before the rule: an infinite value in it
    for run in runs:
        assert _get(f"{base}/api/imports", token, json.dumps({"run": run}).encode())[0] == 201
    engine = create_engine(db_url)
    with engine.begin() as conn:
        conn.execute(update(results).where(results.c.run_id == runs[0],
                                           results.c.metric == "throughput_mbps")
                     .values(value=float("inf")))
    engine.dispose()
    status, body = _get(f"{base}/api/history?metric=throughput_mbps", token)
    assert status == 200 and None in [r["mean"] for r in json.loads(body)], body
    for query in ("99999999999999999999", "%C2%B2", "1e3"):
        status, body = _get(f"{base}/?payload={query}", token)
        assert status == 200 and "Traceback" not in body, (query, body[:300])
    outside = tmp_path / "outside.html"
    outside.write_text("<p>a file outside the run folder</p>")
    (logs / runs[1] / "report.html").symlink_to(outside)
    status, body = _get(f"{base}/runs/{runs[1]}/report", token)
    assert status == 404 and "outside the run folder" not in body


def test_an_http_version_other_than_1_x_is_answered_505(shared_service):
    base, token, _ = shared_service
    host, port = base.removeprefix("http://").split(":")
    for version, code in (("HTTP/9.9", b" 505 "), ("HTTP/1.1", b" 200 ")):
        with socket.create_connection((host, int(port)), timeout=10) as s:
            s.sendall(f"GET /api/runs {version}\r\nHost: x\r\nAuthorization: Bearer {token}"
                      "\r\nConnection: close\r\n\r\n".encode())
            answer = s.recv(4096)
        assert code in answer.split(b"\r\n")[0], answer


@pytest.mark.service  # seconds of waiting on purpose: make test, not make check
@pytest.mark.exclusive  # a wall-clock bound (p99 under 1 s): alone, not beside other tests
def test_slow_clients_cannot_starve_the_others(tmp_path):
    """20 clients that never finish their headers, and one that stops mid-body, beside 20
    normal requests, on a service serving 8 requests at once: every normal request is
    answered at once (p99 said), the slow ones are closed after --read-timeout, and the
    server logs no traceback."""
    _clear(store.default_url(tmp_path))
    (tmp_path / "logs").mkdir()
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "k8sdds", "serve", "--listen",
                             f"127.0.0.1:{port}", "--out", str(tmp_path / "logs"),
                             "--max-connections", "8", "--read-timeout", "2"],
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
                            stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_listening(proc, port)
        slow = []
        for _ in range(20):
            s = socket.create_connection(("127.0.0.1", port), timeout=10)
            s.sendall(b"GET /api/runs HTTP/1.1\r\nHost: x\r\n")  # and never the rest
            slow.append(s)
        body = socket.create_connection(("127.0.0.1", port), timeout=10)
        body.sendall(b'POST /api/imports HTTP/1.1\r\nHost: x\r\nContent-Type: '
                     b'application/json\r\nContent-Length: 100\r\n\r\n{"run": ')
        slow.append(body)
        took = []
        for _ in range(20):
            start = time.monotonic()
            status, _ = _get(f"{base}/api/runs")
            took.append(time.monotonic() - start)
            assert status == 200
        took.sort()
        p99 = took[int(0.99 * (len(took) - 1))]
        print(f"normal requests beside 21 slow clients: p99 {p99 * 1000:.0f} ms")
        assert p99 < 1.0
        # 8 requests at once are served; the 9th is answered 503 at once
        import asyncio

        async def many():
            async def one():
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(b"GET /api/history?metric=throughput_mbps HTTP/1.1\r\n"
                             b"Host: x\r\nConnection: close\r\n\r\n")
                await writer.drain()
                line = await reader.readline()
                writer.close()
                return line.split()[1]
            return await asyncio.gather(*(one() for _ in range(40)))

        codes = asyncio.run(many())
        assert set(codes) <= {b"200", b"503"} and b"200" in codes
        for s in slow:  # each waits until the server closes it, past --read-timeout
            assert s.recv(4096) == b""  # closed by the server (the 10 s socket timeout
            s.close()                   # would fail the test instead)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    errors = proc.stderr.read()
    assert "Traceback" not in errors, errors
    assert "no whole request within 2 s: closed" in errors


@pytest.mark.service
def test_an_oversized_head_gets_414_or_431_and_a_client_gone_mid_body_one_line(tmp_path):
    """As HTTP servers answer them: a 100 KB request target 414, 32 KB of header fields 431;
    a client that sends half its body and leaves: one line in the log, no traceback."""
    _clear(store.default_url(tmp_path))
    (tmp_path / "logs").mkdir()
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "k8sdds", "serve", "--listen",
                             f"127.0.0.1:{port}", "--out", str(tmp_path / "logs")],
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
                            stderr=subprocess.PIPE, text=True)

    def ask(head: bytes, body: bytes = b"", close: bool = False) -> bytes:
        with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
            s.sendall(head + body)
            if close:
                return b""
            return s.recv(4096).split(b"\r\n")[0]

    try:
        _wait_listening(proc, port)
        long_target = b"GET /api/runs?datapath=" + b"x" * 100_000 + b" HTTP/1.1\r\n"
        assert b" 414 " in ask(long_target + b"Host: x\r\nConnection: close\r\n\r\n")
        many = b"".join(b"X-Pad-%d: %s\r\n" % (i, b"y" * 1000) for i in range(32))
        assert b" 431 " in ask(b"GET /api/runs HTTP/1.1\r\nHost: x\r\n" + many +
                               b"Connection: close\r\n\r\n")
        assert b" 200 " in ask(b"GET /api/runs HTTP/1.1\r\nHost: x\r\nConnection: close"
                               b"\r\n\r\n")  # a head within the bounds
        ask(b"POST /api/tasks HTTP/1.1\r\nHost: x\r\nContent-Type: text/csv\r\n"
            b"Content-Length: 1000\r\n\r\n", b"dataLen,multicast", close=True)
        time.sleep(1)  # the server noticing the closed connection: nothing to wait on
        assert b" 200 " in ask(b"GET /api/runs HTTP/1.1\r\nHost: x\r\nConnection: close"
                               b"\r\n\r\n")  # still serving
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    errors = proc.stderr.read()
    assert "Traceback" not in errors and "ClientDisconnect" not in errors, errors
    assert errors.count("gone before its whole request body arrived") == 1, errors


@pytest.mark.service
def test_the_service_adds_the_runs_in_out_by_itself(tmp_path):
    """`k8sdds serve` then no --add-runs (the user's path after `make demo`): the runs in
    --out at start are listed, one that appears later too, one still running once it
    ends; a damaged one is listed on the runs page with its reason, never a 500."""
    import shutil

    _clear(store.default_url(tmp_path))
    logs = tmp_path / "logs"
    first = _runs(logs, 2)
    damaged = logs / "20260109-000000-dead"
    damaged.mkdir()
    (damaged / "manifest.json").write_text("{not json")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "k8sdds", "serve", "--listen",
                             f"127.0.0.1:{port}", "--out", str(logs), "--watch", "0.2"],
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
                            stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"

    def listed(n: int) -> list[str]:
        deadline = time.monotonic() + 30
        while True:
            status, body = _get(f"{base}/api/runs")
            assert status == 200, body
            names = sorted(r["run_id"] for r in json.loads(body))
            if len(names) >= n or time.monotonic() > deadline:
                return names
            time.sleep(0.2)  # the watcher's next sweep: nothing to wait on from here

    try:
        _wait_listening(proc, port)
        assert listed(2) == sorted(p.name for p in first)
        later = fake_run(tmp_path / "more", "20260110-000000-beef", repeats=2).path
        reparse(later)
        running = json.loads((later / "manifest.json").read_text())
        (later / "manifest.json").write_text(json.dumps({**running, "status": "running"}))
        shutil.copytree(later, logs / later.name)
        time.sleep(1)  # five sweeps
        assert len(listed(2)) == 2  # still running: not yet
        (logs / later.name / "manifest.json").write_text(json.dumps(running))
        assert listed(3) == sorted([*(p.name for p in first), later.name])
        status, page = _get(f"{base}/")
        assert status == 200 and "Not added" in page and damaged.name in page
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    errors = proc.stderr.read()
    assert "Traceback" not in errors and errors.count(f"{damaged.name}") == 1, errors


def test_compare_refuses_what_the_cli_refuses_for_the_same_reason_unless_forced(service):
    """`/api/compare` applies compare's one rule (k8sdds.analysis.comparable): two runs made
    on different kernels are refused with the reason `k8sdds compare` gives, and compared
    with force=true, the difference said; by default the CLI's three metrics."""
    from .cli_support import invoke

    base, token, logs = service
    runs = sorted(p.name for p in logs.iterdir() if p.is_dir())
    other = _copy_run(logs, runs[1], "20260301-000000-cafe", lambda rows: None)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["environment"] = {**(manifest.get("environment") or {}), "kernel": "9.9.9-other"}
    (other / "manifest.json").write_text(json.dumps(manifest))
    for run in (runs[0], other.name):
        assert _get(f"{base}/api/imports", token, json.dumps({"run": run}).encode())[0] == 201
    status, body = _get(f"{base}/api/compare?a={runs[0]}&b={other.name}", token)
    assert status == 422, body
    said = json.loads(body)["detail"]
    assert "force=true compares them all the same" in said
    cli = invoke("compare", str(logs / runs[0]), str(other))
    assert cli.returncode == 2 and "--force compares them all the same" in cli.stderr

    def reason(text: str) -> str:  # the differences, as each caller words them
        return " ".join(text.split("were not made alike: ")[1].split(" (")[0].split())

    assert "9.9.9-other" in reason(said) and reason(said) == reason(cli.stderr)
    status, body = _get(f"{base}/api/compare?a={runs[0]}&b={other.name}&force=true", token)
    assert status == 200, body
    got = json.loads(body)
    assert any("9.9.9-other" in line for line in got["differences"])
    assert {r["metric"] for r in got["rows"]} == {"throughput_mbps", "latency_us_p50",
                                                  "latency_us_p99"}
