"""`k8sdds serve`'s task queue with real runs on the emulated backend (root, namespaces):
schedules submitted over HTTP run one at a time on their testbed, end in the database, and a
service killed with SIGKILL mid-run resumes the run in flight when started again, with every
value exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from .emulated_support import missing
from .test_serve import _clear, _free_port, _get, postgres  # noqa: F401 - a fixture

REASON = missing()
pytestmark = [pytest.mark.emulated,
              pytest.mark.skipif(REASON is not None, reason=REASON or "")]
ROW = "1024,false,1,false,0\n"
TESTBED = f"sv{os.getpid() % 1000}"  # a testbed of the test's own
HEADER = "dataLen,multicast,numSubscribers,bestEffort,batchSize\n"


class Service:
    """The real `k8sdds serve` process (started again on the same database and folder)."""

    def __init__(self, db: str, out: Path):
        self.db, self.out, self.proc = db, out, None
        self.port = _free_port()
        self.base = f"http://127.0.0.1:{self.port}"

    def env(self) -> dict:
        """The service's environment: its testbeds' state (and locks) in the test's folder."""
        return {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent),
                "K8SDDS_STATE_DIR": str(self.out.parent / "state")}

    def start(self) -> Service:
        env = self.env()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "k8sdds", "serve", "--db", self.db, "--listen",
             f"127.0.0.1:{self.port}", "--out", str(self.out)], env=env,
            stderr=open(self.out.parent / "serve.log", "ab"))
        deadline = time.monotonic() + 30
        while True:
            try:
                if _get(f"{self.base}/api/tasks")[0] == 200:
                    return self
            except OSError:
                pass  # not listening yet
            assert self.proc.poll() is None and time.monotonic() < deadline, \
                (self.out.parent / "serve.log").read_text()
            time.sleep(0.2)  # a server starting: nothing to wait on but its answer

    def task(self, task_id: int) -> dict:
        status, body = _get(f"{self.base}/api/tasks/{task_id}")
        assert status == 200, body
        return json.loads(body)

    def submit(self, schedule: str, **options) -> dict:
        status, body = _get(f"{self.base}/api/tasks", data=json.dumps(
            {"schedule": schedule, "options": {"testbed": TESTBED, **options}}).encode())
        assert status == 201, body
        return json.loads(body)

    def wait(self, task_id: int, until, timeout: float = 300) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            task = self.task(task_id)
            if until(task):
                return task
            assert time.monotonic() < deadline, task
            time.sleep(0.5)  # a run in another process: its state is polled over HTTP

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=30)


@pytest.fixture(params=["sqlite", "postgresql"])
def service(request, tmp_path):
    from k8sdds.serve.store import default_url

    db = (default_url(tmp_path) if request.param == "sqlite"
          else request.getfixturevalue("postgres"))
    _clear(db)
    (tmp_path / "logs").mkdir()
    s = Service(db, tmp_path / "logs")
    try:
        yield s.start()
    finally:
        s.stop()


def _results_once(service: Service, task: dict) -> pd.DataFrame:
    """The run's results.csv, checked against the database: every row exactly once."""
    run = service.out / "tasks" / f"task-{task['id']}" / task["run_id"]
    written = pd.read_csv(run / "results.csv", dtype=str, keep_default_na=False)
    status, body = _get(f"{service.base}/api/runs/{task['run_id']}/results")
    assert status == 200
    assert json.loads(body) == written.to_dict("records")
    keys = ["test", "repeat", "role", "node", "kind", "t", "metric"]  # role `node`: a node
    assert not written.duplicated(keys).any()
    return written


def test_submitted_schedules_run_one_at_a_time_and_land_in_the_database(service):
    first = service.submit(HEADER + ROW, duration=2, datapath="host")
    second = service.submit(HEADER + ROW, duration=2, datapath="host")
    assert first["status"] == "queued" and first["target"] == f"emulated:{TESTBED}"
    running = service.wait(first["id"], lambda t: t["status"] != "queued")
    assert running["status"] == "running"
    assert service.task(second["id"])["status"] == "queued"  # the same testbed: it waits
    done = service.wait(first["id"], lambda t: t["status"] not in ("queued", "running"))
    assert done["status"] == "done" and done["done"] == done["total"] == 1, done
    df = _results_once(service, done)
    thr = df[(df.kind == "summary") & (df.metric == "throughput_mbps")]
    assert len(thr) == 1 and float(thr.value.iloc[0]) > 1
    # the child was handed the request itself, and ran what it says
    folder = service.out / "tasks" / f"task-{first['id']}"
    asked = json.loads((folder / "request.json").read_text())
    assert asked["flags"] == {"datapath": "host", "duration": 2}
    assert asked["schedule_text"] == HEADER + ROW and asked["out"] == "."
    manifest = json.loads((folder / done["run_id"] / "manifest.json").read_text())
    assert f"--request={folder / 'request.json'}" in manifest["command_line"]
    done = service.wait(second["id"], lambda t: t["status"] not in ("queued", "running"))
    assert done["status"] == "done" and done["run_id"] != first.get("run_id")
    status, body = _get(f"{service.base}/api/runs?datapath=host")
    assert len(json.loads(body)) == 2


def test_a_baseline_task_measures_the_network_between_nodes(service):
    status, body = _get(f"{service.base}/api/tasks", data=json.dumps({
        "kind": "baseline", "options": {"testbed": TESTBED, "datapath": "host",
                                        "engines": "ping", "paths": "node-node",
                                        "dds": False, "duration": 1}}).encode())
    assert status == 201, body
    task = json.loads(body)
    assert task["kind"] == "baseline"
    done = service.wait(task["id"], lambda t: t["status"] not in ("queued", "running"))
    assert done["status"] == "done", done
    df = _results_once(service, done)
    assert set(df.engine) == {"ping"} and "latency_us_p50" in set(df.metric)
    status, body = _get(f"{service.base}/api/tasks", data=json.dumps({
        "schedule": HEADER + ROW, "options": {"engines": "ping"}}).encode())
    assert status == 422 and "engines: not an option of a schedule task" in body


def test_a_run_that_cannot_start_is_failed_not_done(service, monkeypatch):
    """The child's own outcome says how it ended: a testbed another run holds fails the task
    with the child's reason (its exit status 1 was once recorded as done)."""
    from k8sdds.testbed.lock import TestbedLock

    monkeypatch.setenv("K8SDDS_STATE_DIR", service.env()["K8SDDS_STATE_DIR"])
    held = TestbedLock(TESTBED)
    held.acquire()
    try:
        task = service.submit(HEADER + ROW, datapath="host")
        done = service.wait(task["id"], lambda t: t["status"] not in ("queued", "running"))
    finally:
        held.release()
    assert done["status"] == "failed" and "in use by another run" in done["message"], done
    folder = service.out / "tasks" / f"task-{task['id']}"
    said = json.loads((folder / "outcome.json").read_text())
    assert said["kind"] == "TestbedError" and said["exit"] == 1


def test_a_bad_schedule_gets_the_clis_message(service, tmp_path):
    bad = HEADER + "-5,false,1,false,0\n"
    status, body = _get(f"{service.base}/api/tasks", data=json.dumps(
        {"schedule": bad}).encode())
    (tmp_path / "bad.csv").write_text(bad)
    cli = subprocess.run([sys.executable, "-m", "k8sdds", "run", "--sch",
                          str(tmp_path / "bad.csv")], capture_output=True, text=True)
    message = " ".join(cli.stderr.split()).split(f"{tmp_path / 'bad.csv'}, ", 1)[1]
    assert status == 422 and json.loads(body)["detail"] == "schedule, " + message
    for options, field in (({"repeats": 0}, "repeats"), ({"datapath": "--help"}, "datapath"),
                           ({"shell": "rm -rf /"}, "shell"), ({"backend": "docker"}, "backend")):
        status, body = _get(f"{service.base}/api/tasks", data=json.dumps(
            {"schedule": HEADER + ROW, "options": options}).encode())
        assert status == 422 and field in body, (options, body)
    assert json.loads(_get(f"{service.base}/api/tasks")[1]) == []  # nothing queued


def test_a_killed_service_resumes_the_run_in_flight(service):
    task = service.submit(HEADER + ROW * 3, duration=3, datapath="host")
    service.wait(task["id"], lambda t: t["done"] >= 1)
    service.proc.send_signal(signal.SIGKILL)
    service.proc.wait(timeout=10)
    folder = service.out / "tasks" / f"task-{task['id']}"
    deadline = time.monotonic() + 60
    while subprocess.run(["pgrep", "-f", f"--request={folder}/"],
                         capture_output=True).stdout:
        assert time.monotonic() < deadline, "the run outlived its service"
        time.sleep(0.2)  # the run stopping cleanly on SIGTERM (its parent died)
    service.start()
    done = service.wait(task["id"], lambda t: t["status"] not in ("queued", "running"))
    assert done["status"] == "done" and done["done"] == done["total"] == 3, done
    manifest = json.loads((folder / done["run_id"] / "manifest.json").read_text())
    assert manifest["resumed"], "the run was not resumed"
    df = _results_once(service, done)
    assert sorted(df[df.kind == "summary"].test.unique()) == ["1", "2", "3"]


@pytest.fixture
def browser(tmp_path):
    """Debian's chromium, headless, driven by its chromedriver (Selenium)."""
    import shutil

    if not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("needs Debian chromium and chromium-driver (make test installs them)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service as Driver

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update",
                 f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Driver(shutil.which("chromedriver")))
    try:
        yield driver
    finally:
        driver.quit()


def test_the_web_page_lists_shows_compares_and_runs_a_schedule(tmp_path, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from k8sdds.reparse import reparse
    from k8sdds.serve.store import default_url

    from .conftest import fake_run

    (tmp_path / "logs").mkdir()
    service = Service(default_url(tmp_path), tmp_path / "logs")
    try:
        service.start()
        ids = []
        for i in range(2):
            run = fake_run(tmp_path / "logs", f"2026010{i + 1}-000000-{i:04x}", repeats=2)
            reparse(run.path)
            assert _get(f"{service.base}/api/imports", data=json.dumps(
                {"run": run.path.name}).encode())[0] == 201
            ids.append(run.path.name)
        browser.get(service.base + "/")
        listed = [a.text for a in browser.find_elements(By.CSS_SELECTOR, "#runs a")]
        assert listed == ids[::-1]
        browser.find_element(By.LINK_TEXT, ids[0]).click()
        cells = browser.find_elements(By.CSS_SELECTOR, "#summary tr")
        assert len(cells) > 1 and "throughput_mbps" in browser.page_source
        browser.get(f"{service.base}/compare?a={ids[0]}&b={ids[1]}")
        assert len(browser.find_elements(By.CSS_SELECTOR, "#compare tr")) > 1
        # the two runs are one log twice, 2 repeats each: no change, and said so
        assert {c.text for c in browser.find_elements(By.CSS_SELECTOR, "#compare td.verdict")
                } == {"no significant change"}
        # a run made on another kernel: refused as `k8sdds compare` refuses it, until forced
        other = fake_run(tmp_path / "logs", "20260103-000000-0003", repeats=2)
        reparse(other.path)
        manifest = json.loads((other.path / "manifest.json").read_text())
        manifest["environment"] = {**(manifest.get("environment") or {}),
                                   "kernel": "9.9.9-other"}
        (other.path / "manifest.json").write_text(json.dumps(manifest))
        assert _get(f"{service.base}/api/imports", data=json.dumps(
            {"run": other.path.name}).encode())[0] == 201
        browser.get(f"{service.base}/compare?a={ids[0]}&b={other.path.name}")
        refused = browser.find_element(By.ID, "refused").text
        assert "were not made alike" in refused and "9.9.9-other" in refused, refused
        assert not browser.find_elements(By.CSS_SELECTOR, "#compare tr")
        browser.find_element(By.ID, "force").click()
        assert len(browser.find_elements(By.CSS_SELECTOR, "#compare tr")) > 1
        assert "9.9.9-other" in browser.find_element(By.CSS_SELECTOR, "p.warning").text
        browser.get(service.base + "/tasks")
        schedule = browser.find_element(By.ID, "schedule")
        schedule.clear()
        schedule.send_keys(HEADER + ROW)
        for field, value in (("duration", "2"), ("testbed", TESTBED)):
            box = browser.find_element(By.ID, field)
            box.clear()
            box.send_keys(value)
        browser.find_element(By.ID, "go").click()
        # the page follows the task by itself (its script asks the API every second and
        # redraws the table: an element read may be gone the next moment)
        from selenium.common.exceptions import (
            NoSuchElementException,
            StaleElementReferenceException,
        )

        seen = set()

        def finished(d):
            text = d.find_element(By.ID, "task-1").text
            seen.update(w for w in ("queued", "running") if w in text)
            return text if " done " in f" {text} " else False

        row = WebDriverWait(browser, 240, poll_frequency=0.3, ignored_exceptions=[
            StaleElementReferenceException, NoSuchElementException]).until(finished)
        assert "1 of 1" in row and seen  # it was seen before it ended, then done
        run_id = WebDriverWait(browser, 10, ignored_exceptions=[
            StaleElementReferenceException, NoSuchElementException]).until(
            lambda d: d.find_element(By.CSS_SELECTOR, "#task-1 a").text)
        browser.get(f"{service.base}/runs/{run_id}")
        assert "host" in browser.find_element(By.ID, "summary").text
        browser.get(service.base + "/nodes")
        assert browser.find_element(By.ID, "nodes")
        logs = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
        assert not logs, logs
    finally:
        service.stop()


def test_nodes_online_are_the_testbeds_nodes_while_it_is_up(tmp_path):
    from k8sdds.serve.store import default_url

    name = f"sn{os.getpid() % 1000}"
    (tmp_path / "logs").mkdir()
    service = Service(default_url(tmp_path), tmp_path / "logs")
    env = service.env()
    up = subprocess.run([sys.executable, "-m", "k8sdds", "testbed", "up", "--testbed", name,
                         "--nodes", "3"], capture_output=True, text=True, env=env, timeout=120)
    assert up.returncode == 0, up.stderr
    try:
        service.start()
        status, body = _get(f"{service.base}/api/nodes")
        mine = [n for n in json.loads(body) if n["where"] == name]
        assert status == 200 and len(mine) == 3
        assert all(n["state"] == "up" and n["last_seen"] for n in mine)
        subprocess.run([sys.executable, "-m", "k8sdds", "testbed", "down", "--testbed", name],
                       capture_output=True, env=env, timeout=120, check=True)
        mine = [n for n in json.loads(_get(f"{service.base}/api/nodes")[1])
                if n["where"] == name]
        assert mine == []
    finally:
        service.stop()
        subprocess.run([sys.executable, "-m", "k8sdds", "testbed", "down", "--testbed", name],
                       capture_output=True, env=env, timeout=120)
