"""The run directory: manifest.json, results.csv, schedule.csv and the raw logs of every
repeat (`test-<i>/rep-<r>/<role>.log`). Every write is atomic; every read goes through one
error path that names the file and what is wrong."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from k8sdds.errors import RunDirError
from k8sdds.results.files import append_lines, atomic_write, sha256, whole_lines
from k8sdds.results.manifest import ManifestError, RepeatKey, RunManifest
from k8sdds.results.table import HEADER, csv_to_rows, rows_to_csv

MANIFEST = "manifest.json"
RESULTS = "results.csv"
SCHEDULE = "schedule.csv"
SECRETS = "credentials"  # keys and certificates of TLS / DDS Security tests (mode 0700)


def new_run_id() -> str:
    return time.strftime("%Y%m%d-%H%M%S") + "-" + secrets.token_hex(2)


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

    @property
    def secrets_path(self) -> Path:
        return self.path / SECRETS

    @classmethod
    def create(cls, out: Path, run_id: str | None = None) -> RunDir:
        run = cls(Path(out) / (run_id or new_run_id()))
        run.path.mkdir(parents=True, exist_ok=False)
        return run

    def repeat_dir(self, key: RepeatKey) -> Path:
        return self.path / f"test-{key.test}" / f"rep-{key.repeat}"

    # ---- manifest --------------------------------------------------------------------
    def read_manifest(self) -> RunManifest:
        """The manifest, upgraded from whatever version wrote it; RunDirError otherwise."""
        from k8sdds.guarded import FileRefused, check_tree, read_text

        if not self.path.is_dir():
            raise RunDirError(f"{self.path}: not a run directory (it does not exist)")
        if not os.path.lexists(self.manifest_path):
            raise RunDirError(f"{self.path}: no {MANIFEST}; not a run directory")
        try:  # only regular files and directories: nothing read or written leads elsewhere
            check_tree(self.path)
            text = read_text(self.manifest_path, "manifest", follow=False)
        except FileRefused as exc:
            raise RunDirError(str(exc)) from None
        try:
            return RunManifest.from_dict(json.loads(text))
        except RecursionError:
            raise RunDirError(f"{self.manifest_path}: nested too deeply") from None
        except ValueError as exc:  # JSON syntax, or ManifestError
            what = "" if isinstance(exc, ManifestError) else "not valid JSON: "
            raise RunDirError(f"{self.manifest_path}: {what}{exc}") from None

    def read_results_text(self) -> str:
        """results.csv as text ("" when absent): a regular file, UTF-8, never through a
        link; whole lines only (a torn last line of a killed append is left out)."""
        from k8sdds.guarded import FileRefused, read_text

        if not os.path.lexists(self.results_path):
            return ""
        try:
            return whole_lines(read_text(self.results_path, "results", follow=False))
        except FileRefused as exc:
            raise RunDirError(str(exc)) from None

    def write_manifest(self, manifest: RunManifest) -> None:
        atomic_write(self.manifest_path, json.dumps(manifest.to_dict(), indent=2) + "\n")

    def copy_schedule(self, source: Path | str, text: str | None = None) -> dict:
        """Keep the schedule (the file at `source`, or `text` made for the run) beside the
        results; return its manifest entry."""
        target = self.path / SCHEDULE
        if text is None:
            shutil.copyfile(source, target)
            source = str(Path(source).resolve())
        else:
            atomic_write(target, text)
        return {"path": str(source), "copy": target.name, "sha256": sha256(target)}

    # ---- results -----------------------------------------------------------------------
    def append_results(self, rows: Sequence[Mapping[str, Any]]) -> None:
        """Add a repeat's rows to the end of results.csv, never rewriting what is there (a
        file from an older k8sdds, with fewer columns, is rewritten once with today's header
        first)."""
        first = self._first_line()
        if first is not None and first != HEADER:
            atomic_write(self.results_path,
                         rows_to_csv(csv_to_rows(self.read_results_text()), header=True))
        if rows or first is None:
            append_lines(self.results_path, rows_to_csv(rows, header=first is None))

    def _first_line(self) -> str | None:
        """results.csv's header line; None when there is no file, or nothing in it."""
        if not os.path.lexists(self.results_path):
            return None
        if self.results_path.is_symlink() or not self.results_path.is_file():
            raise RunDirError(f"{self.results_path}: not a regular file")
        with open(self.results_path, "rb") as fh:
            line = fh.readline(1 << 16)
        return line.decode(errors="replace").rstrip("\r\n") or None

    def keep_results(self, keep: Callable[[RepeatKey], bool]) -> int:
        """Keep only the rows of results.csv whose repeat `keep` accepts (atomically);
        return how many were dropped."""
        if not self.results_path.exists():
            return 0
        rows = csv_to_rows(self.read_results_text())
        kept = [r for r in rows if keep(RepeatKey(int(r["test"]), int(r["repeat"])))]
        if len(kept) != len(rows):
            atomic_write(self.results_path, rows_to_csv(kept, header=True))
        return len(rows) - len(kept)

    def write_results(self, rows: Sequence[Mapping[str, Any]]) -> None:
        atomic_write(self.results_path, rows_to_csv(rows, header=True))
