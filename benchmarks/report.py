#!/usr/bin/env python3
"""Report generation time for 10 runs x 16 tests x 3 repeats (goal < 10 s).

The data is real: one emulated run of the K8sDDS schedule (16 tests, 3 repeats, `host`), then
nine copies of it relabelled as other datapaths, so the report has 10 runs to combine.

Usage: .venv/bin/python benchmarks/report.py [--source RUN_DIR] [--duration 2]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from common import k8sdds  # benchmarks/common.py

ROOT = Path(__file__).resolve().parent.parent
LABELS = ["host", "flannel-hostgw", "kube-router", "flannel-vxlan", "calico-vxlan", "weave",
          "weave-encrypted", "flannel-wireguard", "calico-ipip", "host"]


def source_run(tmp: Path, duration: float) -> Path:
    return Path(k8sdds("run", "--sch", str(ROOT / "schedules" / "k8sdds.csv"), "--datapath",
                       "host", "--repeats", "3", "--duration", f"{duration:g}", "--out",
                       str(tmp), "--no-plot", "--testbed", "kdrep")["run_dir"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, help="a run of the K8sDDS schedule with 3 repeats")
    ap.add_argument("--duration", type=float, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        src = args.source or source_run(tmp / "src", args.duration)
        runs = []
        for i, label in enumerate(LABELS):
            dst = tmp / "runs" / f"{src.name[:-4]}{i:04x}"
            shutil.copytree(src, dst)
            df = pd.read_csv(dst / "results.csv")
            df["run_id"], df["datapath"] = dst.name, label
            df.to_csv(dst / "results.csv", index=False)
            manifest = json.loads((dst / "manifest.json").read_text())
            manifest["run_id"], manifest["datapaths"] = dst.name, [label]
            (dst / "manifest.json").write_text(json.dumps(manifest))
            runs.append(dst)
        repeats = sum(len(json.loads((r / "manifest.json").read_text())["repeats"])
                      for r in runs)
        rows = sum(len(pd.read_csv(r / "results.csv")) for r in runs)
        t0 = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "k8sdds", "report", *map(str, runs),
                               "--out", str(tmp / "report")], capture_output=True, text=True)
        wall = time.monotonic() - t0
        if proc.returncode != 0:
            sys.exit(proc.stderr)
        size = (tmp / "report" / "report.html").stat().st_size
    print(f"## Report generation\n\n{len(runs)} runs, {repeats} repeats, {rows} result rows: "
          f"`k8sdds report` took **{wall:.1f} s** (goal < 10 s, process start included); "
          f"report.html {size / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
