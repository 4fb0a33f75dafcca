"""What every benchmark does: run the k8sdds CLI as a user would and read its JSON outcome."""

from __future__ import annotations

import json
import subprocess
import sys


def k8sdds(*args: str) -> dict:
    """`python -m k8sdds ARGS --json`; exit with its message if it fails, print any failed
    repeats, return the outcome (run_dir, repeats, failed, wall_s, ...)."""
    proc = subprocess.run([sys.executable, "-m", "k8sdds", *args, "--json"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"k8sdds {args[0]} failed: {proc.stderr}")
    outcome = json.loads(proc.stdout)
    for failure in outcome.get("failed", []):
        print("failed:", failure, file=sys.stderr)
    return outcome
