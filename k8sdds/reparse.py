"""`k8sdds parse`: rebuild results.csv of a run from its raw logs (idempotent)."""

from __future__ import annotations

from pathlib import Path

from k8sdds import records
from k8sdds.errors import UserError
from k8sdds.model import Test
from k8sdds.perftest import ENGINES
from k8sdds.results import MANIFEST, RunDir


def reparse(run_dir: Path) -> int:
    """Parse every repeat recorded in the manifest; return the number of rows written."""
    run = RunDir(run_dir)
    try:
        manifest = run.read_manifest()
    except FileNotFoundError:
        raise UserError(f"{run_dir}: no {MANIFEST}; not a run directory") from None
    except ValueError as exc:
        raise UserError(f"{run_dir / MANIFEST}: not valid JSON ({exc})") from None
    tests = {t["number"]: Test(**t) for t in manifest.get("tests", [])}
    rows = []
    for key, entry in manifest.get("repeats", {}).items():
        test_part, rep_part = key.split("/")
        test = tests[int(test_part.split("-")[1])]
        rep = int(rep_part.split("-")[1])
        roles = list(ENGINES[test.engine].roles(test))
        parsed = records.parse_logs(test, run.repeat_dir(test.number, rep), roles)
        rows += records.rows(manifest.get("run_id", run.run_id), manifest.get("backend", ""),
                             test, rep, entry.get("placement", {}), parsed)
    run.write_results(rows)
    return len(rows)
