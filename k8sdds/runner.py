"""Drives a run: checks, the run directory and its manifest, the repeats in the order asked
(each one's life is `repeat.one_repeat`: deploy -> start -> wait -> collect -> parse ->
store), a stop or a full disk leaving it resumable.

The runner never branches on the backend or the engine; both come from their registries.
"""

from __future__ import annotations

import errno
import functools
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from k8sdds import capacity, environment, records, schedule, stopping
from k8sdds.deployment import Backend
from k8sdds.engines import Engine
from k8sdds.errors import EngineUnavailable, RunStopped, ScheduleError, UserError
from k8sdds.expansion import summary
from k8sdds.model import Test
from k8sdds.order import ORDERS
from k8sdds.repeat import one_repeat
from k8sdds.results import RepeatKey, RunDir, RunManifest, now


class Progress(Protocol):
    def start(self, total: int) -> None: ...
    def step(self, description: str) -> None: ...
    def advance(self) -> None: ...
    def stop(self) -> None: ...


class NoProgress:
    def start(self, total: int) -> None: ...
    def step(self, description: str) -> None: ...
    def advance(self) -> None: ...
    def stop(self) -> None: ...


@dataclass(frozen=True)
class RunOptions:
    """What a run writes, and where."""

    out: Path  # where run directories go
    schedule: Path | None = None  # the schedule file, copied into the run directory
    schedule_text: str | None = None  # or the schedule the command made (baseline)
    command_line: Sequence[str] = ()
    min_free_mb: float = 64  # below this much free space where results go, the run stops
    backend_options: Mapping[str, Any] = field(default_factory=dict)  # as given, for resume
    order: str | None = None  # k8sdds.order.ORDERS; None: the manifest's (a new run: tests)
    # rows a datapath of the run cannot carry, left out there (expansion.NotApplicable)
    not_applicable: Sequence[Any] = ()


@dataclass
class Outcome:
    run_dir: Path
    repeats: int = 0
    failed: list[str] = field(default_factory=list)  # "test-i/rep-r: reason"
    not_applied: list[str] = field(default_factory=list)  # what the backend could not emulate
    budget_notes: list[str] = field(default_factory=list)  # CPU budgets not of this sitting
    not_applicable: list[str] = field(default_factory=list)  # rows left out, one line a reason
    wall_s: float = 0.0


def check_engines(tests: Sequence[Test], engines: Mapping[str, Engine]) -> None:
    """Fail before anything starts when an engine the schedule needs is missing."""
    for name in dict.fromkeys(t.engine for t in tests):
        reason = engines[name].unavailable()
        if reason:
            raise EngineUnavailable(reason)


def same_backend(path: Path, manifest: RunManifest, name: str) -> None:
    """A run continues on the backend it ran on."""
    if manifest.backend != name:
        raise UserError(f"{path} ran on the {manifest.backend} backend; resume it with "
                        f"--backend {manifest.backend}")


def resumable(run: RunDir, backend: Backend, engines: Mapping[str, Engine]) -> RunManifest:
    """The manifest of a run to continue on `backend`, its tests checked again as a schedule
    is (a manifest is a file like any other)."""
    manifest = run.read_manifest()
    if manifest.imported is not None:
        raise UserError(f"{run.path} was imported, not run; there is nothing to resume")
    same_backend(run.path, manifest, backend.name)
    limits = backend.limits()
    for test in manifest.tests:
        problem = schedule.check_values(test) or schedule.check(test, limits, engines)
        if problem:
            name, value, reason = problem
            raise ScheduleError(f"{run.manifest_path}, test {test.number}, field {name}: "
                                f"value {str(value)[:60]!r}: {reason}")
    return manifest


class Runner:
    """Runs tests on one backend with one engine registry, into one run directory."""

    def __init__(self, backend: Backend, engines: Mapping[str, Engine], options: RunOptions,
                 progress: Progress | None = None):
        self.backend = backend
        self.engines = engines
        self.options = options
        self.progress = progress or NoProgress()
        self.run_dir: Path | None = None  # known once the run directory exists
        self._arches: dict[str, str] = {}  # each node's architecture, for the rows

    def run(self, tests: Sequence[Test]) -> Outcome:
        """Run `tests` into a new run directory under `options.out`."""
        def prepare() -> tuple[RunDir, RunManifest]:
            manifest = self._manifest(tests)  # all that can fail before the directory
            run = RunDir.create(self.options.out)
            manifest.run_id = run.run_id
            manifest.schedule = run.copy_schedule(self.options.schedule or "schedule",
                                                  self.options.schedule_text)
            return run, manifest

        return self._session(tests, self.options.out, prepare)

    def resume(self, run: RunDir, manifest: RunManifest) -> Outcome:
        """Continue the run in `run` (see `resumable`): its finished repeats are kept, the
        rows of the repeat in flight are dropped and every repeat without an entry runs."""
        def prepare() -> tuple[RunDir, RunManifest]:
            run.keep_results(lambda key: key in manifest.repeats)
            manifest.resumed.append({"at": now(),
                                     "command_line": list(self.options.command_line),
                                     "environment": environment.capture()})
            return run, manifest

        return self._session(manifest.tests, run.path, prepare)

    def _session(self, tests: Sequence[Test], where: Path,
                 prepare: Callable[[], tuple[RunDir, RunManifest]]) -> Outcome:
        """Checks, the backend up, the run directory `prepare()` gives driven, the backend
        down (whatever happened)."""
        if self.backend.local_engines:
            check_engines(tests, self.engines)
        writable(where, self.options.min_free_mb)
        started = time.monotonic()
        self.backend.up()
        try:
            outcome = self._drive(*prepare())
        finally:
            self.backend.down()
        outcome.wall_s = time.monotonic() - started
        return outcome

    def _drive(self, run: RunDir, manifest: RunManifest) -> Outcome:
        """Every pending repeat, the manifest rewritten after each."""
        manifest.status = "running"
        if self.options.order:  # given now (also on resume), else the manifest's
            manifest.order = self.options.order
        run.write_manifest(manifest)
        self.run_dir = run.path
        self._arches = records.node_arches(manifest.cluster)
        outcome = Outcome(run.path, not_applied=manifest.cluster.get("not_applied", []),
                          budget_notes=manifest.cluster.get("budget_notes", []),
                          not_applicable=summary(manifest.not_applicable))
        sequence = ORDERS[manifest.order](list(manifest.pending()))
        self.progress.start(len(sequence))
        capacities = _capacities(run, manifest)
        wired = None
        try:
            for test, rep in sequence:
                if test.datapath != wired:
                    self.backend.use_datapath(test.datapath)
                    wired = test.datapath
                key = RepeatKey(test.number, rep)
                stopping.check()
                _space_left(run.path, self.options.min_free_mb, key)
                self.progress.step(f"test {test.number}/{len(manifest.tests)} "
                                   f"{test.datapath} {test.data_len} B rep "
                                   f"{rep}/{test.repeats}")
                entry = one_repeat(
                    self.backend, self.engines[test.engine], run, test, key, self._arches,
                    None if test.datapath in manifest.fingerprints else
                    functools.partial(manifest.fingerprints.__setitem__, test.datapath),
                    manifest.fingerprints.get(test.datapath),
                    capacity.stream(test, manifest.tests, capacities))
                manifest.repeats[key] = entry
                try:
                    run.write_manifest(manifest)
                except OSError:
                    del manifest.repeats[key]  # not on disk: it runs again on resume
                    raise
                outcome.repeats += 1
                if entry.status == "failed":
                    outcome.failed.append(f"{key}: {entry.reason}")
                self.progress.advance()
            manifest.status = "complete"
        except KeyboardInterrupt:
            manifest.status = "interrupted"
            raise
        except RunStopped:
            manifest.status = "stopped"
            raise
        except OSError as exc:
            if exc.errno not in STORAGE_ERRORS:
                raise
            manifest.status = "stopped"
            raise RunStopped(
                f"{exc.strerror} writing {exc.filename or run.path}: the run stopped; "
                f"{len(manifest.repeats)} finished repeat(s) are kept in {run.path}; "
                f"make room, then continue with `k8sdds run --resume {run.path}`") from None
        finally:
            self.progress.stop()
            manifest.finished = now()
            try:
                run.write_manifest(manifest)
            except OSError as exc:
                if exc.errno not in STORAGE_ERRORS:
                    raise
                # the last manifest written stays whole: the finished repeats, no more
        return outcome

    def _manifest(self, tests: Sequence[Test]) -> RunManifest:
        engines = dict.fromkeys(t.engine for t in tests)
        return RunManifest(
            run_id="", backend=self.backend.name, tests=list(tests),
            command_line=list(self.options.command_line),
            backend_options=dict(self.options.backend_options),
            cluster=self.backend.describe(),
            datapaths=list(dict.fromkeys(t.datapath for t in tests)),
            not_applicable=[n.to_dict() for n in self.options.not_applicable],
            environment=environment.capture(),
            tools={name: self.engines[name].version() for name in engines})


# a full or read-only file system, or lost permission: the run stops, resumable
STORAGE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM,
                  errno.EIO}


def writable(out: Path, min_free_mb: float = 0) -> None:
    """Fail before anything starts when the output directory cannot be written or has less
    than `min_free_mb` MiB free."""
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
        probe = Path(out) / ".k8sdds-write-test"
        probe.write_text("")
        probe.unlink()
    except OSError as exc:
        raise UserError(f"cannot write results to {out}: {exc.strerror}") from None
    free = shutil.disk_usage(out).free / 2**20
    if free < min_free_mb:
        raise UserError(f"only {free:.1f} MiB free in {out}, less than --min-free "
                        f"{min_free_mb:g} MiB; make room, write elsewhere (--out), or lower "
                        "--min-free")


def _space_left(path: Path, min_free_mb: float, upcoming: RepeatKey) -> None:
    """Stop before a repeat that might not fit: its logs and rows need room."""
    free = shutil.disk_usage(path).free / 2**20
    if free < min_free_mb:
        raise RunStopped(f"only {free:.1f} MiB free in {path}, less than --min-free "
                         f"{min_free_mb:g} MiB: the run stopped before {upcoming}; finished "
                         f"repeats are kept; make room, then continue with "
                         f"`k8sdds run --resume {path}`")


def _capacities(run: RunDir, manifest: RunManifest) -> Callable[[int], list[float]]:
    """What each capacity test measured so far (capacity.measured), read from the run's
    results once per new repeat of that test, not once per repeat that takes a share."""
    seen: dict[int, tuple[int, list[float]]] = {}

    def rates(number: int) -> list[float]:
        done = sum(1 for key in manifest.repeats if key.test == number)
        if number not in seen or seen[number][0] != done:
            seen[number] = (done, capacity.measured(run.read_results_text(), number))
        return seen[number][1]

    return rates
