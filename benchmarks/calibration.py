#!/usr/bin/env python3
"""Is the calibration reproducible? `k8sdds testbed calibrate` several times in one sitting,
one after the other, each into a file of its own (the installed calibration is left alone):
each sitting's budget, the ratio it measured at that budget, its time, and how far the
budgets lie from their mean (goal: within ±10 %) and the ratios from the target (±0.03).
Run as root, with no other testbed busy.

Usage: .venv/bin/python benchmarks/calibration.py [--sittings 2] [--profile rpi3b]
       [--rounds 3] [--repeats 3] [--duration 5] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL = 0.10  # each budget within ±10 % of the sittings' mean
RATIO_GOAL = 0.03  # each ratio measured at its budget within ±0.03 of the target


def sitting(args: argparse.Namespace, output: Path) -> dict:
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "k8sdds", "testbed", "calibrate", "--profile", args.profile,
         "--rounds", str(args.rounds), "--repeats", str(args.repeats), "--duration",
         str(args.duration), "--output", str(output), "--json"],
        capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"k8sdds testbed calibrate failed: {proc.stderr}")
    return {**json.loads(proc.stdout), "seconds": time.monotonic() - started}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sittings", type=int, default=2)
    parser.add_argument("--profile", default="rpi3b")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--duration", type=float, default=5)
    parser.add_argument("--keep", type=Path, help="keep each sitting's calibration file here")
    args = parser.parse_args()
    made = []
    with tempfile.TemporaryDirectory(prefix="k8sdds-calibrations-") as tmp:
        where = args.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        for i in range(args.sittings):
            made.append(sitting(args, where / f"sitting-{i + 1}.json"))
            c = made[-1]
            print(f"sitting {i + 1}: {c['cpu']:.4f} CPU, 1 KiB at {c['ratio']:.3f} of the "
                  f"link-bound {c['link_mbps']:.1f} Mbit/s (target {c['target_ratio']:.3f}), "
                  f"{c['seconds']:.0f} s", flush=True)
    budgets = [c["cpu"] for c in made]
    mean = statistics.fmean(budgets)
    far = max(abs(b / mean - 1) for b in budgets)
    print(f"budgets {', '.join(f'{b:.4f}' for b in budgets)}: mean {mean:.4f}, the farthest "
          f"{far * 100:.1f} % from it ({'within' if far <= GOAL else 'outside'} ±"
          f"{GOAL * 100:.0f} %)")
    off = max(abs(c["ratio"] - c["target_ratio"]) for c in made)
    ratios = ", ".join(f"{c['ratio']:.3f}" for c in made)
    print(f"ratios {ratios}: the farthest "
          f"{off:.3f} from the target {made[0]['target_ratio']:.3f} "
          f"({'within' if off <= RATIO_GOAL else 'outside'} ±{RATIO_GOAL})")
    for i, c in enumerate(made, 1):
        for note in c.get("notes", []):
            print(f"sitting {i}: {note}")
    print(f"machine: {made[0]['machine']}")


if __name__ == "__main__":
    main()
