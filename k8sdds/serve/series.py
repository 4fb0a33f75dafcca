"""A metric's results across every run of the service's database, as the analysis reads runs
(`Runs`): what `k8sdds history --db` and the service's history page lay out in time order
and search for change points."""

from __future__ import annotations

from sqlalchemy import Engine
from sqlalchemy.exc import SQLAlchemyError

from k8sdds.errors import UserError
from k8sdds.serve import store


def runs_of(db: Engine, metric: str, where: str = "the database"):
    """Every run's summary rows of `metric`, with the runs' manifests; UserError where the
    database is not one `k8sdds serve` made or holds no such row."""
    from k8sdds.analysis import load

    try:
        rows = store.summaries_of(db, (metric,))
        manifests = store.manifests(db)
    except SQLAlchemyError as exc:
        raise UserError(f"{where}: not a database `k8sdds serve` made "
                        f"({' '.join(str(exc).split())[:200]})") from None
    if not rows:
        raise UserError(f"{where}: no run with {metric}")
    return load.Runs(load.table_of(rows), manifests)
