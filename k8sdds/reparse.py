"""`k8sdds parse`: rebuild results.csv of a run from its raw logs (idempotent)."""

from __future__ import annotations

from pathlib import Path

from k8sdds import records
from k8sdds.engines import registry
from k8sdds.errors import UserError
from k8sdds.results import RunDir


def reparse(run_dir: Path, unread: list[str] | None = None) -> int:
    """Parse every repeat recorded in the manifest; return the number of rows written.
    `unread` gets one line per role whose log gave nothing ("test-i/rep-r role: why")."""
    run = RunDir(run_dir)
    manifest = run.read_manifest()
    engines = registry()
    rows = []
    for key in sorted(manifest.repeats):
        test = manifest.test(key.test)
        engine = engines.get(test.engine)
        if engine is None:
            raise UserError(f"{run_dir}: its manifest's test {test.number} ran engine "
                            f"{test.engine!r}, which this k8sdds does not know (it knows "
                            f"{', '.join(engines)}); nothing was rewritten")
        parsed = records.parse_logs(test, run.repeat_dir(key), list(engine.roles(test)),
                                    engine.parser)
        if unread is not None:
            unread += [f"{key} {role}: {p.failure}" for role, p in parsed.items()
                       if p.failure]
        dropped: list[str] = []
        rows += records.rows(manifest.run_id or run.run_id, manifest.backend, test,
                             key.repeat, manifest.repeats[key].placement, parsed,
                             records.node_arches(manifest.cluster), dropped=dropped)
        if unread is not None:
            unread += [f"{key}/{line}" for line in dropped]
    run.write_results(rows)
    return len(rows)
