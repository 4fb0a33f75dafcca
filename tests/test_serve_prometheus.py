"""`k8sdds serve`'s /metrics scraped by Debian's real Prometheus server (a process of the
test's own on loopback, its data in the test's folder), the series read back through
Prometheus' HTTP query API: per test and metric the newest run's mean, interval and repeats,
the runs and the tasks by status; and the same endpoint read with prometheus-client's own
parsers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
from pathlib import Path

import pytest

from .conftest import run_with_throughput
from .test_serve import _free_port, _get, _wait_listening

PROMETHEUS = shutil.which("prometheus")
TOKEN = "t0ken-of-the-prometheus-test-0123"
pytestmark = [pytest.mark.service,
              pytest.mark.skipif(PROMETHEUS is None, reason="no prometheus (Debian's "
                                 "prometheus package: make test installs it)")]


@pytest.fixture
def served(tmp_path):
    """`k8sdds serve` over two runs of the same tests: an older one (throughput 100, 101,
    99 Mb/s) and a newer one (80, 81, 79), added by the service itself."""
    logs = tmp_path / "logs"
    logs.mkdir()
    older = run_with_throughput(tmp_path, "a", [100.0, 101.0, 99.0])
    time.sleep(1.1)  # the newer run starts a second later
    newer = run_with_throughput(tmp_path, "b", [80.0, 81.0, 79.0])
    older, newer = (Path(shutil.move(run, logs / run.name)) for run in (older, newer))
    (tmp_path / "token").write_text(TOKEN + "\n")
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "k8sdds", "serve", "--db", f"sqlite:///{tmp_path / 'db'}",
         "--listen", f"127.0.0.1:{port}", "--out", str(logs), "--token-file",
         str(tmp_path / "token"), "--watch", "0.2"],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
        stderr=subprocess.PIPE, text=True)
    try:
        _wait_listening(proc, port)
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while json.loads(_get(f"{base}/api/runs", TOKEN)[1]).__len__() < 2:
            assert time.monotonic() < deadline, "the service did not add both runs"
            time.sleep(0.2)  # the watcher adds them: no event to wait on
        yield base, older.name, newer.name
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_metrics_needs_the_token_and_reads_back_through_both_parsers(served):
    from prometheus_client.openmetrics.parser import text_string_to_metric_families as om
    from prometheus_client.parser import text_string_to_metric_families as text

    base, _, newer = served
    assert _get(f"{base}/metrics")[0] == 401
    status, body = _get(f"{base}/metrics", TOKEN)
    assert status == 200
    families = {f.name: f for f in text(body)}
    [mean] = [s for s in families["k8sdds_cell_mean"].samples
              if s.labels["metric"] == "throughput_mbps"]
    assert mean.value == pytest.approx(80)  # the newer run's, not an average of both
    assert "run_id" not in mean.labels
    [runs] = families["k8sdds_runs"].samples
    assert runs.value == 2
    assert {s.labels["status"]: s.value for s in families["k8sdds_tasks"].samples} == {
        "queued": 0, "running": 0, "done": 0, "stopped": 0, "failed": 0, "cancelled": 0}
    # OpenMetrics when asked for it
    import urllib.request

    request = urllib.request.Request(f"{base}/metrics", headers={
        "Authorization": f"Bearer {TOKEN}",
        "Accept": "application/openmetrics-text; version=1.0.0"})
    with urllib.request.urlopen(request, timeout=60) as response:
        assert response.headers["Content-Type"].startswith("application/openmetrics-text")
        families = {f.name: f for f in om(response.read().decode())}
    assert [s.labels for s in families["k8sdds_run"].samples] == [
        {"run_id": newer, "backend": "emulated"}]


def _query(prom: str, expr: str) -> list[dict]:
    status, body = _get(f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    assert status == 200, body
    answer = json.loads(body)
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def test_prometheus_scrapes_the_service_and_answers_its_queries(served, tmp_path):
    base, _, newer = served
    port = _free_port()
    (tmp_path / "token-prom").write_text(TOKEN)
    config = tmp_path / "prometheus.yml"
    config.write_text(f"""global:
  scrape_interval: 1s
scrape_configs:
  - job_name: k8sdds
    metrics_path: /metrics
    authorization:
      credentials_file: {tmp_path / 'token-prom'}
    static_configs:
      - targets: ["{base.removeprefix('http://')}"]
""")
    prom = subprocess.Popen(
        [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert prom.poll() is None, prom.stderr.read()[-3000:]
            try:
                found = _query(url, 'k8sdds_cell_mean{metric="throughput_mbps"}')
            except (OSError, AssertionError):
                found = []
            if found:
                break
            assert time.monotonic() < deadline, "Prometheus read no series from the service"
            time.sleep(0.5)  # until its first scrape: a server's schedule, no event to wait on
        [series] = found
        labels = series["metric"]
        assert labels["datapath"] == "flannel-hostgw" and labels["payload_bytes"] == "1024"
        assert labels["job"] == "k8sdds" and "run_id" not in labels
        assert float(series["value"][1]) == pytest.approx(80)
        # 80 ± t(0.975, 2) * 1 / sqrt(3)
        [low] = _query(url, 'k8sdds_cell_ci_low{metric="throughput_mbps"}')
        assert float(low["value"][1]) == pytest.approx(80 - 2.484, abs=0.001)
        [repeats] = _query(url, 'k8sdds_cell_repeats{metric="throughput_mbps"}')
        assert float(repeats["value"][1]) == 3
        [info] = _query(url, "k8sdds_run_info")
        assert info["metric"]["run_id"] == newer
        [runs] = _query(url, "k8sdds_runs")
        assert float(runs["value"][1]) == 2
        assert len(_query(url, "k8sdds_tasks")) == 6
        # bounded: every series of the service's, counted by Prometheus itself
        [count] = _query(url, 'count({job="k8sdds", __name__=~"k8sdds_.*"})')
        print("series scraped from k8sdds serve:", count["value"][1])
        assert float(count["value"][1]) < 100
    finally:
        prom.terminate()
        prom.wait(timeout=30)
