"""The database's tables (SQLAlchemy Core): one row per run, one per measured value, as the
run directory's manifest and results table have them. Migrations (migrations/) make them;
this module is what the code reads and writes."""

from __future__ import annotations

from sqlalchemy import (
    JSON,
    Column,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

from k8sdds.results.schema import BY_NAME

metadata = MetaData()


# the columns of results.csv the database types and filters on: (string length, indexed)
TYPED = {"test": (0, False), "repeat": (0, False), "datapath": (64, True),
         "engine": (32, False), "transport": (32, False), "data_len": (0, True),
         "role": (32, False), "kind": (16, False), "metric": (64, True), "value": (0, False),
         "unit": (16, False)}


def _typed(name: str, length: int = 0, index: bool = False) -> Column:
    """A column of the results table, typed as the results schema types it."""
    kind = BY_NAME[name].type
    sql = String(length) if kind is str else {int: Integer, float: Float}[kind]
    return Column(name, sql, nullable=False, index=index)


runs = Table(
    "runs", metadata,
    Column("run_id", String(64), primary_key=True),
    Column("started", DateTime(timezone=True), nullable=True, index=True),
    Column("backend", String(32), nullable=False),
    Column("engine", String(32), nullable=False),
    Column("datapaths", String(512), nullable=False),  # comma-separated, as given
    Column("transports", String(128), nullable=False),
    Column("path", Text, nullable=False),  # the run directory it was imported from
    Column("imported", DateTime(timezone=True), nullable=False),
    Column("n_values", Integer, nullable=False),  # its rows in `results`
    Column("manifest", JSON, nullable=False),
)

# what a run measured, once per combination: the runs list filters on this, not on results
run_tests = Table(
    "run_tests", metadata,
    Column("run_id", String(64), ForeignKey("runs.run_id", ondelete="CASCADE"),
           nullable=False, index=True),
    Column("datapath", String(64), nullable=False, index=True),
    Column("engine", String(32), nullable=False),
    Column("transport", String(32), nullable=False),
    Column("data_len", Integer, nullable=False, index=True),
)

results = Table(
    "results", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(64), ForeignKey("runs.run_id", ondelete="CASCADE"),
           nullable=False, index=True),
    *(_typed(name, length, index) for name, (length, index) in TYPED.items()),
    Column("row", JSON, nullable=False),  # every column of the results table, as written
)

# a task's states, from submitted to its end
STATUSES = ("queued", "running", "done", "stopped", "failed", "cancelled")

tasks = Table(
    "tasks", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("kind", String(16), nullable=False),  # schedule (k8sdds run), baseline
    Column("status", String(16), nullable=False, index=True),  # one of STATUSES
    Column("target", String(512), nullable=False),  # one run at a time per target
    # the run it asks for: the very text its `request.json` holds (request.dumps), its out
    # "." (the child runs in the task's folder)
    Column("request", Text, nullable=False),
    Column("created", DateTime(timezone=True), nullable=False),
    Column("started", DateTime(timezone=True), nullable=True),
    Column("finished", DateTime(timezone=True), nullable=True),
    Column("run_id", String(64), nullable=True),
    Column("done", Integer, nullable=False, server_default="0"),  # repeats ended
    Column("total", Integer, nullable=False, server_default="0"),
    Column("message", Text, nullable=False, server_default=""),
)
