"""The tidy results table (results.csv): its columns (from the one spec, schema.py) and its
CSV form."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from typing import Any

from k8sdds.results.schema import NAMES
from k8sdds.results.upgrade import upgrade_row

# one measured value per row; the test parameters added since the first release follow these
COLUMNS = NAMES[:NAMES.index("unit") + 1]
EXTRA_COLUMNS = NAMES[NAMES.index("unit") + 1:]
HEADER = ",".join(NAMES)


def rows_to_csv(rows: Iterable[Mapping[str, Any]], header: bool) -> str:
    """CSV text of rows; a key that is no column is an error (a new field is never dropped
    unseen: it gets its column in schema.py)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=NAMES, extrasaction="raise", lineterminator="\n")
    if header:
        writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(v) for k, v in row.items()})
    return buf.getvalue()


def csv_to_rows(text: str) -> list[dict[str, str]]:
    """The rows of results.csv text as k8sdds writes them now: a latency an older k8sdds
    wrote as its engine printed it is a round trip (`upgrade.upgrade_row`)."""
    return [upgrade_row(row) for row in csv.DictReader(io.StringIO(text, newline=""))]


def _cell(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e15 else repr(value)
    return value
