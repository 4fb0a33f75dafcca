"""`k8sdds serve` under load: time to import 100 runs (16 tests x 3 repeats each, the rows
of real ddsperf output) into the database, then API latency p50/p99 for listing runs and for
fetching one run's results, under 50 concurrent clients, against the real `k8sdds serve`
process. SQLite by default; --db for another database (PostgreSQL: see tests/test_serve.py
for a server of one's own).

Usage: .venv/bin/python benchmarks/serve.py [--runs 100] [--clients 50] [--requests 2000]
                                            [--db URL]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from k8sdds.reparse import reparse  # noqa: E402
from tests.conftest import fake_run  # noqa: E402


def make_runs(folder: Path, count: int, tests: int = 16, repeats: int = 3) -> int:
    """`count` run directories: a real parsed run, its rows spread over `tests` tests."""
    seed = fake_run(folder / "seed", "20260101-000000-0000", repeats=repeats)
    reparse(seed.path)
    df = pd.read_csv(seed.path / "results.csv", dtype=str, keep_default_na=False)
    first = df[df.test == df.test.iloc[0]]
    big = pd.concat([first.assign(test=str(t)) for t in range(1, tests + 1)])
    for i in range(count):
        run_id = f"20260201-{i // 3600:02d}{i // 60 % 60:02d}{i % 60:02d}-{i:04x}"
        target = folder / "logs" / run_id
        shutil.copytree(seed.path, target)
        manifest = json.loads((target / "manifest.json").read_text())
        manifest["run_id"] = run_id
        manifest["created"] = f"2026-02-01T00:{i // 60 % 60:02d}:{i % 60:02d}+00:00"
        (target / "manifest.json").write_text(json.dumps(manifest))
        big.assign(run_id=run_id).to_csv(target / "results.csv", index=False)
    return len(big)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed(url: str) -> float:
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as r:
        r.read()
    return (time.perf_counter() - start) * 1000


def percentiles(ms: list[float]) -> str:
    q = statistics.quantiles(ms, n=100)
    return f"p50 {q[49]:7.1f} ms  p99 {q[98]:7.1f} ms  ({len(ms)} requests)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--db")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="k8sdds-serve-bench-") as work:
        work = Path(work)
        rows = make_runs(work, args.runs)
        db = args.db or f"sqlite:///{work / 'k8sdds.db'}"
        cmd = [sys.executable, "-m", "k8sdds", "serve", "--db", db, "--out", str(work / "logs")]
        start = time.monotonic()
        subprocess.run([*cmd, "--import"], check=True, capture_output=True, cwd=ROOT)
        imported = time.monotonic() - start
        port = free_port()
        server = subprocess.Popen([*cmd, "--listen", f"127.0.0.1:{port}"], cwd=ROOT,
                                  stderr=subprocess.DEVNULL,
                                  env={**os.environ, "PYTHONPATH": str(ROOT)})
        base = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    runs = json.loads(urllib.request.urlopen(f"{base}/api/runs?limit=1000",
                                                             timeout=5).read())
                    break
                except OSError:
                    if time.monotonic() > deadline:
                        sys.exit("k8sdds serve did not answer")
                    time.sleep(0.2)
            ids = [r["run_id"] for r in runs]
            print(f"database: {db.split(':')[0]}; {len(ids)} runs x {rows} result rows "
                  f"(16 tests x 3 repeats)")
            print(f"import of {args.runs} runs: {imported:.1f} s")
            for name, urls in (
                    ("list runs (GET /api/runs)", [f"{base}/api/runs"] * args.requests),
                    ("list runs filtered (datapath, payload)",
                     [f"{base}/api/runs?datapath=flannel-hostgw&payload=1024"] * args.requests),
                    ("one run's results (JSON, about 0.5 MB)",
                     [f"{base}/api/runs/{ids[i % len(ids)]}/results"
                      for i in range(args.requests)])):
                for clients in (1, args.clients):
                    chosen = urls if clients > 1 else urls[:200]
                    with ThreadPoolExecutor(clients) as pool:
                        ms = list(pool.map(timed, chosen))
                    print(f"{name:42} {clients:2d} clients: {percentiles(ms)}")
        finally:
            server.terminate()
            server.wait(timeout=10)


if __name__ == "__main__":
    main()
