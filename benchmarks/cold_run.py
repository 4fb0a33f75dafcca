"""A cold `bash .ci/run`, as on a fresh machine, without touching this machine's own cache: a
clean clone of HEAD in a scratch folder, every cache the builds and the tests use pointed into
it (K8SDDS_CACHE, K8SDDS_ENGINE_BIN, K8SDDS_K8S_BIN, GOPATH, GOCACHE: the Go modules are
downloaded again, every Go, Rust and C++ program and both ARM disks built again), its log kept
and its timeline (`.ci/phase`: each phase and each build, wall and CPU) printed at the end.
What stays the machine's: the Debian packages already installed and cargo's registry of
downloaded crates (~/.cargo). The scratch cache is removed after, unless --keep.

Usage (root; about an hour on 2 cores and about 30 GB of disk; nothing else running):
    python3 benchmarks/cold_run.py [--out DIR] [--keep]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NEEDED_GB = 30


def scratch_env(cache: Path) -> dict[str, str]:
    """The environment of a run whose every cache is under `cache` (empty)."""
    return {**os.environ, "K8SDDS_CACHE": str(cache), "K8SDDS_ENGINE_BIN": str(cache / "bin"),
            "K8SDDS_K8S_BIN": str(cache / "bin"), "GOPATH": str(cache / "go"),
            "GOCACHE": str(cache / "gocache"), "CI": "true"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=Path("cold-run"),
                        help="where the log goes [./cold-run]")
    parser.add_argument("--keep", action="store_true", help="keep the scratch cache and clone")
    args = parser.parse_args()
    if os.geteuid() != 0:
        sys.exit("cold_run: run as root (make test builds the ARM disks and namespaces)")
    base = Path(tempfile.mkdtemp(prefix="k8sdds-cold.", dir="/var/tmp"))
    free = shutil.disk_usage(base).free / 1e9
    if free < NEEDED_GB:
        shutil.rmtree(base)
        sys.exit(f"cold_run: {free:.0f} GB free in /var/tmp, a cold cache takes about "
                 f"{NEEDED_GB} GB")
    clone, cache = base / "clone", base / "cache"
    cache.mkdir()
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "ci-run.log"
    print(f"cold_run: a clean clone of {ROOT} in {clone}, its caches in {cache}; log {log}",
          flush=True)
    started = time.monotonic()
    with open(log, "w") as out:
        status = subprocess.run(["bash", ".ci/run"], cwd=clone, env=scratch_env(cache),
                                stdout=out, stderr=subprocess.STDOUT).returncode
    wall = time.monotonic() - started
    tail = log.read_text(errors="replace").splitlines()
    at = max((i for i, line in enumerate(tail) if line.startswith("timeline of make test")),
             default=len(tail) - 40)
    print("\n".join(tail[at:]))
    print(f"cold_run: bash .ci/run exit {status} in {int(wall // 60)} min {wall % 60:04.1f} s")
    if args.keep:
        print(f"cold_run: kept {base}")
    else:
        shutil.rmtree(base, ignore_errors=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
