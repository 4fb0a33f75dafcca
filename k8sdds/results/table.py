"""The tidy results table (results.csv): its columns and its CSV form."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping
from typing import Any

# one measured value per row; further test parameters follow these
COLUMNS = ["run_id", "test", "repeat", "backend", "datapath", "path", "engine", "transport",
           "data_len", "multicast", "num_subscribers", "best_effort", "batch_size",
           "latency_test", "role", "node", "kind", "t", "metric", "value", "unit"]
EXTRA_COLUMNS = ["row", "placement", "discovery", "duration", "pub_rate", "send_queue_size",
                 "secure", "streams"]
HEADER = ",".join(COLUMNS + EXTRA_COLUMNS)


def rows_to_csv(rows: Iterable[Mapping[str, Any]], header: bool) -> str:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=COLUMNS + EXTRA_COLUMNS, extrasaction="ignore",
                            lineterminator="\n")
    if header:
        writer.writeheader()
    for row in rows:
        writer.writerow({k: _cell(v) for k, v in row.items()})
    return buf.getvalue()


def csv_to_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text, newline="")))


def _cell(value: Any) -> Any:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}" if abs(value) < 1e15 else repr(value)
    return value
