"""`k8sdds import k8sdds-data DIR`: a K8sDDS data tree -> one run directory per configuration.

The tree: `<throughput-test|latency-test>/<cni>-<transport>[-variant]/test-<i>/
rtiperftest-<role>.log`, with the schedule.csv it holds (in the configuration folder or any
folder above it). Tests take their parameters from the schedule rows, the datapath and the
transport from the folder name; every log is kept and parsed, so `k8sdds report` works on old
data exactly as on new.

Perftest 3.x prints its own test in each log's header (data size, reliability, batching,
execution time, multicast, transport, and on the publisher the subscribers it waits for): the
header wins over a schedule, and with no schedule in or above the folder and none given the
tests are made from the headers alone. A test whose logs say too little (one that failed
before its header, or legacy logs that print less) is then listed as skipped in the manifest,
with what a schedule would give it.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from k8sdds import cni, records
from k8sdds.engines import registry
from k8sdds.errors import UserError
from k8sdds.guarded import FileRefused, read_bytes, read_head, read_pieces
from k8sdds.model import Test
from k8sdds.parsers.perftest_header import header
from k8sdds.results import RepeatEntry, RepeatKey, RunDir, RunManifest, atomic_write
from k8sdds.schedule import check_values, load

KINDS = {"throughput-test": False, "latency-test": True}
BACKEND = "imported"  # an imported run's backend: none of k8sdds' measured it
TRANSPORTS = {"udp": "udp", "udpv4": "udp", "tcp": "tcp", "tls": "tls"}
# the CNI names of K8sDDS folders -> datapaths (each CNI record's aliases)
CNIS = cni.ALIASES
# folder variants: DDS Security, or the CNI's own encryption (a datapath of its own)
SECURE = ("secure", "dds-secure", "security")
ENCRYPTED = ("encrypted", "encryption")
TEST_DIR = re.compile(r"^test-(\d+)$")
LOG = re.compile(r"^rtiperftest-(pub|sub)(\d*)\.log$")  # pub.log, pub0.log, sub.log, sub3.log


def configuration(folder: str) -> tuple[str, str, str]:
    """`weavenet-encryption-udp`, `flannel-hostgw-dds-secure-tcp`, `weave-tcp-encrypted` ->
    (datapath, transport, variant); the variant is "secure" (DDS Security) or ""."""
    parts = folder.lower().split("-")
    at = next((i for i, p in enumerate(parts) if p in TRANSPORTS), None)
    if at is None or at == 0:
        raise UserError(f"{folder}: expected <cni>[-variant]-<transport>[-variant] with "
                        f"transport one of {', '.join(sorted(set(TRANSPORTS)))}")
    before = parts[:at]
    # the longest known CNI name at the start; what follows it, and what follows the
    # transport, is the variant
    cut = next((n for n in range(len(before), 0, -1) if "-".join(before[:n]) in CNIS), None)
    if cut is None:
        raise UserError(f"{folder}: unknown CNI {'-'.join(before)!r}; known: "
                        f"{', '.join(sorted(CNIS))}")
    cni = "-".join(before[:cut])
    variant = "-".join(before[cut:] + parts[at + 1:])
    if variant in ENCRYPTED and f"{CNIS[cni]}-encrypted" in CNIS.values():
        return f"{CNIS[cni]}-encrypted", TRANSPORTS[parts[at]], ""
    if variant in SECURE:
        return CNIS[cni], TRANSPORTS[parts[at]], "secure"
    if variant:
        raise UserError(f"{folder}: unknown variant {variant!r}; known: "
                        f"{', '.join(SECURE + ENCRYPTED)}")
    return CNIS[cni], TRANSPORTS[parts[at]], ""


def _schedule(folder: Path, root: Path, given: Path | None = None,
              links: list[str] | None = None) -> Path | None:
    """The folder's schedule.csv, else the nearest above it (up to `root`), else `given`,
    else None (the logs' headers say the tests). A schedule.csv of the tree that is a
    symbolic link is not followed (said in `links`)."""
    for candidate in [folder, *folder.parents]:
        found = candidate / "schedule.csv"
        if found.is_symlink():
            if links is not None:
                links.append(f"{found}: a symbolic link; not followed")
        elif found.exists():
            return found
        if candidate == root:
            break
    return Path(given) if given is not None else None


def _linked(path: Path) -> str:
    return f"{path}: a symbolic link; k8sdds follows no link in an imported tree"


# what a test needs that only a header or a schedule can say (the rest has defaults)
NEEDED = ("data_len", "num_subscribers")
SCHEDULE_HEAD = "dataLen,multicast,numSubscribers,bestEffort,batchSize,duration"


def from_header(said: dict[str, object], index: int) -> Test | None:
    """The test a header says (`header()` of its logs, the publisher's first), or None when
    it does not say enough. Pure."""
    if any(name not in said for name in NEEDED):
        return None
    return Test(row=index, line=0, data_len=int(said["data_len"]),
                multicast=bool(said.get("multicast", False)),
                num_subscribers=int(said["num_subscribers"]),
                best_effort=bool(said.get("best_effort", False)),
                batch_size=int(said.get("batch_size", 0)),
                duration=float(said.get("duration", 10.0)))


def log_bytes(root: Path) -> int:
    """The bytes of every log a tree's tests hold (links not followed, not counted): what
    `import_tree` will read, for a progress bar."""
    total = 0
    for kind in KINDS:
        for log in Path(root).glob(f"{kind}/*/test-*/rtiperftest-*.log"):
            if LOG.match(log.name) and not any(p.is_symlink() for p in (
                    log, log.parent, log.parent.parent, log.parent.parent.parent)):
                total += log.stat().st_size if log.is_file() else 0
    return total


def import_tree(root: Path, out: Path, skipped: list[tuple[str, str]] | None = None,
                schedule: Path | None = None,
                advance: Callable[[int], None] | None = None) -> list[Path]:
    """Import every configuration under `root`; return the run directories written. With
    `skipped`, a configuration that cannot be imported is listed there (folder, reason) and
    the rest goes on; without, the first one raises. `advance(n)`: n more bytes of the
    logs read."""
    root, out = Path(root), Path(out)
    if not root.is_dir():
        raise UserError(f"{root}: not a directory")
    if out.is_symlink():
        raise UserError(f"--out {out}: a symbolic link{'' if out.exists() else ' to nothing'}; "
                        "give a directory (or a path to make one): k8sdds writes run "
                        "directories only into a real one")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out}: not a directory")
    for kind in KINDS:  # its run directories would be read as configurations next time
        if out.resolve().is_relative_to((root / kind).resolve()):
            raise UserError(f"--out {out}: inside the tree's {kind} folder, where "
                            "configurations are read from; give a directory outside it")
    runs, seen = [], 0
    for kind, latency in KINDS.items():
        if (root / kind).is_symlink():
            if skipped is None:
                raise UserError(_linked(root / kind))
            skipped.append((kind, _linked(root / kind)))
            continue
        for folder in sorted(p for p in (root / kind).glob("*") if p.is_dir()):
            if folder.is_symlink():
                if skipped is None:
                    raise UserError(_linked(folder))
                skipped.append((f"{kind}/{folder.name}", _linked(folder)))
                continue
            seen += 1
            try:
                runs.append(_import(root, kind, latency, folder, out, schedule, advance))
            except UserError as exc:
                if skipped is None:
                    raise
                skipped.append((f"{kind}/{folder.name}", str(exc)))
    if not seen:
        raise UserError(f"{root}: no {' or '.join(KINDS)} folder with configurations")
    return runs


@dataclass(frozen=True)
class Source:
    """One configuration folder of the K8sDDS tree, as read before its run is written: where
    it is, what it measured (its name says the datapath, transport and variant), the
    schedule its tests come from (None: the logs' headers) and its test folders."""

    root: Path
    kind: str  # "throughput" or "latency", the tree's top folder
    latency: bool
    folder: Path
    datapath: str
    transport: str
    variant: str
    schedule: Path | None
    rows: list | None  # the schedule's tests
    base: int  # the number of its first test folder (0, or 1 in a tree numbered from 1)
    tests_dirs: dict[int, Path]
    links: list[str]  # links met (never followed), said in the manifest


def _import(root: Path, kind: str, latency: bool, folder: Path, out: Path,
            schedule: Path | None = None, advance: Callable[[int], None] | None = None
            ) -> Path:
    datapath, transport, variant = configuration(folder.name)
    links: list[str] = []
    sch = _schedule(folder, root, schedule, links)
    engines = registry()
    rows = load(sch, engines=engines) if sch is not None else None
    tests_dirs = {}
    for p in folder.iterdir():
        if (m := TEST_DIR.match(p.name)):
            if p.is_symlink():
                links.append(_linked(p))
            else:
                tests_dirs[int(m[1])] = p
    if not tests_dirs:
        raise UserError(f"{folder}: no test-<i> folders")
    # K8sDDS numbers test-<i> from 0, like its schedule rows; only an index equal to the
    # number of rows (and no test-0) shows a tree numbered from 1
    count = len(rows) if rows is not None else max(tests_dirs)
    base = 1 if max(tests_dirs) == count and 0 not in tests_dirs else 0
    final = Path(out) / f"k8sdds-{kind}-{folder.name}"
    if final.exists():
        raise UserError(f"{final} exists already (imported before: kept as it is, never "
                        "duplicated); remove it or import with another --out")
    # written under a temporary name, renamed when whole: a failed import leaves nothing
    partial = Path(out) / f".{final.name}.partial"
    shutil.rmtree(partial, ignore_errors=True)
    run = RunDir.create(out, partial.name)
    try:
        _fill(run, final.name, Source(root, kind, latency, folder, datapath, transport,
                                      variant, sch, rows, base, tests_dirs, links),
              engines, advance)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    os.rename(partial, final)
    return final


def _fill(run: RunDir, run_id: str, src: Source, engines,
          advance: Callable[[int], None] | None = None) -> None:
    manifest = RunManifest(
        run_id=run_id, backend=BACKEND, tests=[], status="complete",
        command_line=["k8sdds", "import", "k8sdds-data", str(src.root)],
        schedule={}, cluster={"source": str(src.folder)},
        datapaths=[src.datapath], tools={"rtiperftest": "from the logs"},
        imported={"kind": src.kind, "folder": src.folder.name, "variant": src.variant,
                  "tests_from": "the schedule" if src.schedule else "the logs' headers"})
    engine = engines["rtiperftest"]
    disagreements, unsaid, made = [], [], []
    columns = {c.strip().lower() for c in
               read_bytes(src.schedule, "schedule").decode("utf-8", errors="replace")
               .lstrip("\ufeff").splitlines()[0].split(",")} if src.schedule else set()
    for index, path in sorted(src.tests_dirs.items()):
        row = index - src.base
        if src.rows is not None and not 0 <= row < len(src.rows):
            raise UserError(f"{path}: no row {row} in {src.schedule} ({len(src.rows)} rows)")
        logs, heads, refused = {}, {}, []
        for log in sorted(path.iterdir()):
            m = LOG.match(log.name)
            if m:
                role = "pub" if m[1] == "pub" else f"sub{m[2] or 0}"
                try:  # a regular file of the tree: no link followed, no FIFO opened
                    heads[role] = read_head(log, "log", HEAD, follow=False)
                    logs[role] = log
                except FileRefused as exc:
                    refused.append(str(exc))
        if src.rows is None:
            said = _said(heads)
            described = from_header(said, row)
            if described is None:
                lacking = [n for n in NEEDED if n not in said]
                first = next(iter(heads.values()), b"").decode("utf-8", errors="replace")
                unsaid.append(f"test-{index}: its logs do not say {', '.join(lacking)} ("
                              + (" / ".join(line.strip() for line in first.splitlines()[1:3]
                                            if line.strip()) or "no log")
                              + "); a schedule (--schedule) would keep it")
                continue
            made.append(described)
            scheduled = described
        else:
            scheduled = src.rows[row]
        scheduled = replace(scheduled, engine="rtiperftest", datapath=src.datapath,
                            transport=src.transport, latency_test=src.latency,
                            secure="secure" in src.variant, number=row + 1)
        test, differ = _with_header(scheduled, heads, str(src.schedule), columns)
        impossible = check_values(test)
        if impossible:  # a header value no test can have: never a parameter
            field, value, allowed = impossible
            unsaid.append(f"test-{index}: its log's header says {field} {value!r}, which no "
                          f"test can have ({allowed}); the test is skipped")
            continue
        disagreements += [f"test-{index}: {d}" for d in differ]
        manifest.tests.append(test)
        key = RepeatKey(test.number, 1)
        rep_dir = run.repeat_dir(key)
        rep_dir.mkdir(parents=True)
        for role, log in list(logs.items()):
            try:  # copied a piece at a time: a long log is never held whole
                atomic_write(rep_dir / f"{role}.log", read_pieces(log, "log", follow=False))
            except FileRefused as exc:  # changed since its head was read
                refused.append(str(exc))
                del logs[role]
        roles = list(logs)
        parsed = records.parse_logs(test, rep_dir, roles, engine.parser, advance)
        failures = refused + [f"{r}: {p.failure}" for r, p in parsed.items() if p.failure]
        expected = set(engine.roles(test))
        missing = sorted(expected - set(roles))
        if missing:
            failures.append("no log for " + ", ".join(missing))
        manifest.repeats[key] = RepeatEntry(
            status="failed" if failures else "done", reason="; ".join(failures) or None,
            source=str(path))
        dropped: list[str] = []  # each test's rows written as it is read: memory stays one's
        run.append_results(records.rows(run_id, BACKEND, test, 1, {}, parsed,
                                        dropped=dropped))
        del parsed
        unsaid += [f"{path.name}/{d}" for d in dropped]
    if not manifest.tests:
        raise UserError(f"{src.folder}: no test's logs say what it measured ({unsaid[0]}); give "
                        "a schedule with --schedule (K8sDDS's is schedules/k8sdds.csv)")
    manifest.schedule = (run.copy_schedule(src.schedule) if src.schedule else run.copy_schedule(
        "the logs' headers", text="\n".join([SCHEDULE_HEAD, *(
            f"{t.data_len},{str(t.multicast).lower()},{t.num_subscribers},"
            f"{str(t.best_effort).lower()},{t.batch_size},{t.duration:g}" for t in made)]) + "\n"))
    if disagreements:  # the header won; what the schedule said is kept here
        manifest.imported = {**manifest.imported, "header_over_schedule": disagreements}
    stray = sorted(p.name for p in src.folder.iterdir() if p.is_file() and LOG.match(p.name))
    skipped = src.links + unsaid + [f"{name}: outside any test-<i> folder, so no test to give it"
                                for name in stray]
    if skipped:  # logs no test can be given to
        manifest.imported = {**manifest.imported, "skipped": skipped}
    run.write_manifest(manifest)


# the header fields that name a test parameter -> the schedule column that may say it too
# (None: the folder name says it); the rest of the header is informative
HEADER_FIELDS = {"data_len": "datalen", "best_effort": "besteffort", "batch_size": "batchsize",
                 "duration": "duration", "multicast": "multicast",
                 "num_subscribers": "numsubscribers", "latency_test": None,
                 "transport": None, "secure": None}


# how much of a log's start is read for its header (Perftest prints it in the first lines)
HEAD = 64 * 1024


def _said(logs: dict[str, bytes]) -> dict[str, object]:
    """What the logs' headers print (`logs`: each log's first HEAD bytes), the
    publisher's first, then any other's."""
    said: dict[str, object] = {}
    for role in sorted(logs, key=lambda r: r != "pub"):
        for name, value in header(logs[role].decode("utf-8", errors="replace")).items():
            said.setdefault(name, value)
    return said


def _with_header(test, logs: dict[str, bytes], schedule: str, columns: set[str]):
    """`test` with what its logs' headers print (the publisher's first, then any other):
    the header wins over the schedule and the folder name; (test, disagreements: only where
    the schedule's columns or the folder name said otherwise, not k8sdds's defaults)."""
    said = _said(logs)
    changes, differ = {}, []
    for name, column in HEADER_FIELDS.items():
        if name in said and said[name] != getattr(test, name):
            changes[name] = said[name]
            where = "the folder name" if column is None else schedule
            if column is None or column in columns:
                differ.append(f"{name} {getattr(test, name)!r} in {where}, {said[name]!r} in "
                              "the log's header (used)")
    return (replace(test, **changes) if changes else test), differ
