"""The one column spec of the results table: results.csv's columns and their order, their
types (what the reader makes of the text), the parameters that identify a test across runs,
and the values a run written before a column existed gets. results.csv, analysis and the
service's table are generated from it; `tests/test_results_schema.py` checks that every
parameter a `Test` records is here."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from k8sdds.model import Test


@dataclass(frozen=True)
class Column:
    name: str
    type: type  # str, int, float or bool (written "true"/"false")
    source: str  # run, repeat, test (a field of Test) or value (what was measured)
    param: bool = False  # identifies a test across runs (runs of several datapaths combine)
    old: Any = None  # what a run written before the column existed has (None: required)


SPEC: tuple[Column, ...] = (
    Column("run_id", str, "run"),
    Column("test", int, "repeat"),
    Column("repeat", int, "repeat"),
    Column("backend", str, "run"),
    Column("datapath", str, "test", param=True),
    Column("path", str, "test", param=True),
    Column("engine", str, "test", param=True),
    Column("transport", str, "test", param=True),
    Column("data_len", int, "test", param=True),
    Column("multicast", bool, "test", param=True),
    Column("num_subscribers", int, "test", param=True),
    Column("best_effort", bool, "test", param=True),
    Column("batch_size", int, "test", param=True),
    Column("latency_test", bool, "test", param=True),
    Column("role", str, "value"),
    Column("node", str, "value", old=""),
    Column("kind", str, "value"),
    Column("t", float, "value"),
    Column("metric", str, "value"),
    Column("value", float, "value"),
    Column("unit", str, "value"),
    # added after the first release: after the value, in the order they came
    Column("row", int, "test", old=-1),
    Column("placement", str, "test", param=True, old="cross-node"),
    Column("discovery", str, "test", old=""),
    Column("duration", float, "test", old=float("nan")),
    Column("pub_rate", int, "test", old=0),
    Column("send_queue_size", int, "test", old=0),
    Column("secure", bool, "test", param=True, old=False),
    Column("streams", int, "test", param=True, old=1),
    Column("arch", str, "value", old=""),
    Column("topology", str, "test", param=True, old=""),
    Column("mqtt_qos", int, "test", param=True, old=-1),
    # "round trip" on every latency row (parsers.latency): a row without it was written
    # before the one definition, and is read with its engine's factor
    Column("definition", str, "value", old=""),
    Column("load", str, "test", param=True, old=""),
    Column("load_len", int, "test", param=True, old=0),
)
BY_NAME = {c.name: c for c in SPEC}
NAMES = [c.name for c in SPEC]
PARAMS = [c.name for c in SPEC if c.param]
BOOLEANS = [c.name for c in SPEC if c.type is bool]
# what a Test records that is not a column of its own, and why
NOT_COLUMNS = {"repeats": "how many repeats the test has: each row names its own (repeat)"}


def test_values(test: Test) -> dict[str, Any]:
    """A test's parameters as the columns of its rows."""
    params = {k: v for k, v in test.params().items() if k not in NOT_COLUMNS}
    return {**params, "path": test.effective_path, "row": test.row}
