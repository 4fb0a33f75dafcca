"""The database side of `k8sdds serve`: opened and migrated to the newest schema at start;
run directories imported exactly once (a run's id is its key, its rows go in with it in one
transaction); runs listed with filters; a run's results read back as the table it wrote."""

from __future__ import annotations

import datetime as dt
import functools
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import Engine, and_, create_engine, exists, func, insert, select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError

from k8sdds.errors import RunDirError, UserError
from k8sdds.serve.schema import results, run_tests, runs, tasks

MIGRATIONS = Path(__file__).resolve().parent / "migrations"
RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
# a unit as k8sdds writes one (Mb/s, us, %, samples/s, requests, roundtrips, ...): a word
UNIT = re.compile(r"^[A-Za-z%µ/]{1,16}$")
BATCH = 5000  # result rows per INSERT


def default_url(out: Path) -> str:
    """The embedded database beside the run directories."""
    return f"sqlite:///{Path(out).resolve() / 'k8sdds.db'}"


def open_db(url: str) -> Engine:
    """Connect and bring the schema to the newest migration; a clear error when the URL or
    the server is wrong."""
    try:
        sqlite = url.startswith("sqlite")
        # a connection for every request the server handles at once (its thread pool, 40),
        # and SQLite waits for a writer instead of failing at once
        db = create_engine(url, pool_size=10, max_overflow=40, pool_timeout=60,
                               connect_args={"timeout": 60} if sqlite else {})
        if db.dialect.name == "sqlite":
            from sqlalchemy import event

            @event.listens_for(db, "connect")
            def _fk(conn, _):  # SQLite enforces foreign keys only when asked
                conn.execute("PRAGMA foreign_keys=ON")
        migrate(db)
    except (SQLAlchemyError, ValueError, ImportError) as exc:
        raise UserError(f"database {redact(url)}: {' '.join(str(exc).split())[:300]}"
                        ) from None
    return db


def redact(url: str) -> str:
    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", url)


def migrate(db: Engine, to: str = "head") -> None:
    """The database's tables brought to revision `to` (Alembic; the newest by default)."""
    from alembic import command
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    with db.begin() as conn:
        config.attributes["connection"] = conn
        command.upgrade(config, to)


@dataclass(frozen=True)
class Added:
    added: tuple[str, ...]
    present: tuple[str, ...]  # already in the database: not added twice
    refused: tuple[tuple[str, str], ...]  # (path, why)


def _number(text: str, cast=float):
    try:
        return cast(text)
    except (TypeError, ValueError):
        return None


# what a database integer holds (PostgreSQL's bigint, SQLite's integer)
INTEGER = 2**63 - 1


@functools.cache
def _names() -> dict[str, tuple[str, ...]]:
    """The names a row's engine, datapath, transport and backend can have: what k8sdds
    measures with, over and on, or the importer's backend (a run's table is evidence: a name
    k8sdds never writes is refused, never served as a label)."""
    from k8sdds import engines, importer, model
    from k8sdds.deployment import BACKENDS

    return {"engine": tuple(engines.registry()), "datapath": tuple(model.DATAPATHS),
            "transport": model.TRANSPORTS, "backend": (*BACKENDS, importer.BACKEND)}


def _check_manifest(manifest: dict, where: Path) -> None:
    """A manifest's backend and datapaths, which the runs page and /metrics show, are names
    k8sdds has; else the run is refused, with the file, the field and the value."""
    names = _names()
    backend = str(manifest.get("backend", ""))
    if backend not in names["backend"]:
        raise RunDirError(f"{where / 'manifest.json'}: backend {backend[:40]!r}: not one "
                          f"k8sdds has (allowed: {', '.join(names['backend'])}); the run is "
                          "not added")
    for name in manifest.get("datapaths") or []:
        if str(name) not in names["datapath"]:
            raise RunDirError(f"{where / 'manifest.json'}: datapaths: {str(name)[:40]!r}: not "
                              f"one k8sdds has (allowed: {', '.join(names['datapath'])}); "
                              "the run is not added")


def _rows(run_id: str, text: str, where: Path) -> Iterator[dict]:
    """The table's rows: its typed columns as the results schema types them, and the whole
    row as written. A value no measurement can have (the rule every row k8sdds writes
    follows: `records.impossible`), an integer no column holds, an engine, datapath,
    transport or backend k8sdds does not have, or a unit that is not a word refuses the
    run."""
    from k8sdds.records import impossible
    from k8sdds.results.schema import BY_NAME
    from k8sdds.results.table import csv_to_rows
    from k8sdds.serve.schema import TYPED

    for i, row in enumerate(csv_to_rows(text), start=2):
        value = _number(row.get("value"))
        if value is None:
            continue  # a value the table itself could not give: nothing to keep
        why = impossible(str(row.get("metric")), value, str(row.get("unit")),
                         _number(row.get("t")) if row.get("t") else None)
        if why:
            raise RunDirError(f"{where / 'results.csv'}, line {i}: {row.get('metric')} "
                              f"{str(row.get('value'))[:40]}: {why}; the run is not added")
        for column, allowed in _names().items():
            name = str(row.get(column) or "")
            if name and name not in allowed:
                raise RunDirError(f"{where / 'results.csv'}, line {i}: {column} {name[:40]!r}"
                                  f": not one k8sdds has (allowed: {', '.join(allowed)}); "
                                  "the run is not added")
        unit = str(row.get("unit") or "")
        if unit and not UNIT.match(unit):
            raise RunDirError(f"{where / 'results.csv'}, line {i}: unit {unit[:40]!r}: not a "
                              "unit (letters, %, µ and /, up to 16); the run is not added")
        out = {"run_id": run_id, "row": row}
        for name in TYPED:
            kind = BY_NAME[name].type
            out[name] = (row.get(name) or "") if kind is str else (
                _number(row.get(name), kind) or 0)
            if kind is int and abs(out[name]) > INTEGER:
                raise RunDirError(f"{where / 'results.csv'}, line {i}: {name} "
                                  f"{str(row.get(name))[:40]}: larger than any test has; "
                                  "the run is not added")
        out["value"] = value
        yield out


def add_run(db: Engine, path: Path, include_failed: bool = False) -> bool:
    """Add one run directory; False when its run is already there (never twice). A failed
    repeat's rows are left out unless `include_failed` (its manifest entry, with the reason,
    is kept with the run's)."""
    from k8sdds.analysis.load import failed_repeats
    from k8sdds.results.rundir import RunDir

    rundir = RunDir(Path(path))
    manifest = rundir.read_manifest().to_dict()
    run_id = manifest.get("run_id") or rundir.run_id
    if not RUN_ID.match(run_id):
        raise RunDirError(f"{path}: run id {run_id!r} is not one k8sdds makes")
    _check_manifest(manifest, Path(path))
    text = rundir.read_results_text() or ""
    failed = set() if include_failed else failed_repeats(manifest)
    rows = [r for r in _rows(run_id, text, Path(path))
            if (r["test"], r["repeat"]) not in failed]
    started = _time(manifest.get("created"))
    record = {
        "run_id": run_id, "started": started, "backend": str(manifest.get("backend", "")),
        "engine": ",".join(sorted({r["engine"] for r in rows})) or "",
        "datapaths": ",".join(manifest.get("datapaths") or sorted({r["datapath"]
                                                                   for r in rows})),
        "transports": ",".join(sorted({r["transport"] for r in rows})),
        "path": str(Path(path).resolve()), "imported": dt.datetime.now(dt.timezone.utc),
        "n_values": len(rows), "manifest": manifest}
    combos = sorted({(r["datapath"], r["engine"], r["transport"], r["data_len"]) for r in rows})
    try:
        with db.begin() as conn:
            if conn.execute(select(exists().where(runs.c.run_id == run_id))).scalar():
                return False
            conn.execute(insert(runs), [record])
            if combos:
                conn.execute(insert(run_tests), [
                    {"run_id": run_id, "datapath": d, "engine": e, "transport": t,
                     "data_len": n} for d, e, t, n in combos])
            for start in range(0, len(rows), BATCH):
                conn.execute(insert(results), rows[start:start + BATCH])
    except IntegrityError:  # another import of the same run won the race
        return False
    return True


def _time(text) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None


def add_runs(db: Engine, out: Path, include_failed: bool = False) -> Added:
    """Every run directory under `out` (one level, as `k8sdds run --out` makes them)."""
    added, present, refused = [], [], []
    for path in sorted(p for p in Path(out).iterdir() if (p / "manifest.json").is_file()):
        try:
            (added if add_run(db, path, include_failed) else present).append(path.name)
        except (RunDirError, UserError) as exc:
            refused.append((str(path), str(exc)))
    return Added(tuple(added), tuple(present), tuple(refused))


@dataclass(frozen=True)
class RunFilter:
    """What `GET /api/runs` filters on (None: any)."""

    datapath: str | None = None
    engine: str | None = None
    transport: str | None = None
    payload: int | None = None
    since: dt.datetime | None = None
    until: dt.datetime | None = None
    limit: int = 100
    offset: int = 0


def list_runs(db: Engine, f: RunFilter) -> list[dict]:
    """Runs, newest first, with their result counts; a run matches a result filter when any
    of its rows does."""
    conditions = []
    row_filters = [(run_tests.c.datapath, f.datapath), (run_tests.c.engine, f.engine),
                   (run_tests.c.transport, f.transport), (run_tests.c.data_len, f.payload)]
    wanted = [column == value for column, value in row_filters if value is not None]
    if wanted:
        conditions.append(exists().where(and_(run_tests.c.run_id == runs.c.run_id, *wanted)))
    if f.since:
        conditions.append(runs.c.started >= f.since)
    if f.until:
        conditions.append(runs.c.started <= f.until)
    query = (select(runs.c.run_id, runs.c.started, runs.c.backend, runs.c.engine,
                    runs.c.datapaths, runs.c.transports, runs.c.n_values.label("values"))
             .where(*conditions).order_by(runs.c.started.desc(), runs.c.run_id.desc())
             .limit(f.limit).offset(f.offset))
    with db.connect() as conn:
        return [{**row._mapping, "started": row.started.isoformat() if row.started else None,
                 "datapaths": row.datapaths.split(",") if row.datapaths else []}
                for row in conn.execute(query)]


def run(db: Engine, run_id: str) -> dict | None:
    with db.connect() as conn:
        row = conn.execute(select(runs).where(runs.c.run_id == run_id)).first()
    if row is None:
        return None
    out = dict(row._mapping)
    out["started"] = row.started.isoformat() if row.started else None
    out["imported"] = row.imported.isoformat()
    return out


def run_results(db: Engine, run_id: str) -> list[dict]:
    """The run's results table rows, in the order it wrote them."""
    with db.connect() as conn:
        return [r.row for r in conn.execute(select(results.c.row).where(
            results.c.run_id == run_id).order_by(results.c.id))]


def history(db: Engine, metric: str, f: RunFilter) -> list[dict]:
    """A metric across runs, oldest first: per run, the mean of its repeats' summary values
    (each repeat's own value; repeats are not pooled into a percentile) matching `f`."""
    wanted = [results.c.kind == "summary", results.c.metric == metric]
    for column, value in ((results.c.datapath, f.datapath), (results.c.engine, f.engine),
                          (results.c.transport, f.transport),
                          (results.c.data_len, f.payload)):
        if value is not None:
            wanted.append(column == value)
    if f.since:
        wanted.append(runs.c.started >= f.since)
    if f.until:
        wanted.append(runs.c.started <= f.until)
    query = (select(runs.c.run_id, runs.c.started, func.avg(results.c.value).label("mean"),
                    func.count().label("values"))
             .join(runs, runs.c.run_id == results.c.run_id).where(*wanted)
             .group_by(runs.c.run_id, runs.c.started)
             .order_by(runs.c.started, runs.c.run_id).limit(f.limit).offset(f.offset))
    with db.connect() as conn:
        return [{"run_id": r.run_id, "started": r.started.isoformat() if r.started else None,
                 "mean": _finite(r.mean), "values": r.values} for r in conn.execute(query)]


def _finite(value: float | None) -> float | None:
    """A value JSON can carry: an infinite or not-a-number one (a database written before
    the import refused them) reads as none."""
    return value if value is None or math.isfinite(value) else None


def summary(db: Engine, run_id: str) -> list[dict]:
    """Per test and metric, the mean of the run's repeat summaries (for its page)."""
    query = (select(results.c.test, results.c.datapath, results.c.transport,
                    results.c.data_len, results.c.metric,
                    func.avg(results.c.value).label("mean"), func.count().label("n"))
             .where(results.c.run_id == run_id, results.c.kind == "summary")
             .group_by(results.c.test, results.c.datapath, results.c.transport,
                       results.c.data_len, results.c.metric)
             .order_by(results.c.test, results.c.metric))
    with db.connect() as conn:
        return [{**r._mapping, "mean": _finite(r.mean)} for r in conn.execute(query)]


def summaries_of(db: Engine, metrics: tuple[str, ...]) -> list[dict]:
    """Every run's summary rows of `metrics`, each as its results table wrote it, with the
    run's start (seconds since the epoch; None unknown) and backend: what /metrics makes its
    cells of."""
    query = (select(results.c.row, runs.c.started, runs.c.backend)
             .join(runs, runs.c.run_id == results.c.run_id)
             .where(results.c.kind == "summary", results.c.metric.in_(metrics))
             .order_by(results.c.id))
    with db.connect() as conn:
        return [{**r.row, "started_s": _epoch(r.started), "run_backend": r.backend}
                for r in conn.execute(query)]


def _epoch(when: dt.datetime | None) -> float | None:
    if when is None:
        return None
    return (when if when.tzinfo else when.replace(tzinfo=dt.timezone.utc)).timestamp()


def counts(db: Engine) -> tuple[int, dict[str, int]]:
    """The runs in the database, and the tasks by status."""
    with db.connect() as conn:
        n_runs = conn.execute(select(func.count()).select_from(runs)).scalar_one()
        by_status = dict(conn.execute(select(tasks.c.status, func.count())
                                      .group_by(tasks.c.status)).all())
    return n_runs, by_status


def manifests(db: Engine) -> dict[str, dict]:
    """Every run's manifest, by run id."""
    with db.connect() as conn:
        return {r.run_id: r.manifest for r in conn.execute(select(runs.c.run_id,
                                                                  runs.c.manifest))}
