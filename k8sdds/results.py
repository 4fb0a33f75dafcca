"""The run directory: manifest.json, results.csv and the raw logs of every repeat.

Every write is atomic (temp file + rename), so a killed run leaves either the old or the new
file, never half of one.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import secrets
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

SCHEMA_VERSION = 1
MANIFEST = "manifest.json"
RESULTS = "results.csv"
SECRETS = "credentials"  # keys and certificates of TLS / DDS Security tests (mode 0700)

# the tidy table: one measured value per row; further test parameters follow these
COLUMNS = ["run_id", "test", "repeat", "backend", "datapath", "path", "engine", "transport",
           "data_len", "multicast", "num_subscribers", "best_effort", "batch_size",
           "latency_test", "role", "node", "kind", "t", "metric", "value", "unit"]
EXTRA_COLUMNS = ["row", "placement", "discovery", "duration", "pub_rate", "send_queue_size",
                 "secure", "streams"]


def atomic_write(path: Path, data: str | bytes, mode: int | None = None) -> None:
    """Replace `path` with `data` in one step; readable as the umask allows, or with `mode`
    (0o600 for secrets)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes 0600, which is already right for secrets; results are for reading
        os.fchmod(fd, mode if mode is not None else 0o666 & ~_umask())
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w",
                       **({} if isinstance(data, bytes) else {"newline": ""})) as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def rows_to_csv(rows: Iterable[Mapping[str, Any]], header: bool) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS + EXTRA_COLUMNS, extrasaction="ignore",
                            lineterminator="\n")
    if header:
        writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(v) for k, v in row.items()})
    return buf.getvalue()


def _cell(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e15 else repr(value)
    return value


class RunDir:
    """One run directory and its files."""

    def __init__(self, path: Path):
        self.path = Path(path)

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    @property
    def results_path(self) -> Path:
        return self.path / RESULTS

    @classmethod
    def create(cls, out: Path, run_id: str | None = None) -> RunDir:
        run = cls(Path(out) / (run_id or new_run_id()))
        run.path.mkdir(parents=True, exist_ok=False)
        return run

    def repeat_dir(self, test: int, repeat: int) -> Path:
        return self.path / f"test-{test}" / f"rep-{repeat}"

    # ---- manifest --------------------------------------------------------------------
    def read_manifest(self) -> dict:
        return json.loads(self.manifest_path.read_text())

    def write_manifest(self, manifest: Mapping[str, Any]) -> None:
        atomic_write(self.manifest_path, json.dumps(manifest, indent=2, sort_keys=False) + "\n")

    def copy_schedule(self, schedule: Path) -> dict:
        """Keep a copy of the schedule beside the results; return its manifest entry."""
        target = self.path / "schedule.csv"
        shutil.copyfile(schedule, target)
        return {"path": str(Path(schedule).resolve()), "copy": target.name,
                "sha256": sha256(target)}

    # ---- results -----------------------------------------------------------------------
    def append_results(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Add rows to results.csv in one atomic step (a file from an older k8sdds, with
        fewer columns, is rewritten with today's header first)."""
        old = self.results_path.read_text() if self.results_path.exists() else ""
        header = ",".join(COLUMNS + EXTRA_COLUMNS)
        if old and old.split("\n", 1)[0] != header:
            old = rows_to_csv(list(csv.DictReader(io.StringIO(old))), header=True)
        atomic_write(self.results_path, old + rows_to_csv(rows, header=not old))

    def keep_results(self, keep) -> int:
        """Keep only the rows of results.csv for which `keep(row)` is true (atomically);
        return how many were dropped."""
        if not self.results_path.exists():
            return 0
        with open(self.results_path, newline="") as fh:
            rows = list(csv.DictReader(fh))
        kept = [r for r in rows if keep(r)]
        if len(kept) != len(rows):
            atomic_write(self.results_path, rows_to_csv(kept, header=True))
        return len(rows) - len(kept)

    def write_results(self, rows: Sequence[Mapping[str, Any]]) -> None:
        atomic_write(self.results_path, rows_to_csv(rows, header=True))
