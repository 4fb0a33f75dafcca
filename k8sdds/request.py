"""One run request: what `k8sdds run` is asked, as a typed value, checked once and the same
way whoever asks (the CLI from its flags, the service from a task): the backend built from its
own options, the schedule checked against that backend's own limits and engines, the
datapaths it offers. `prepare` does every check and makes nothing; `Prepared.start` runs."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import IO, Any

from k8sdds import baseline, cni, deployment, model, schedule
from k8sdds.engines import RtiSettings, registry
from k8sdds.errors import UserError
from k8sdds.expansion import summary
from k8sdds.flags import pinned, recorded
from k8sdds.order import ORDERS
from k8sdds.results import RunDir, RunManifest
from k8sdds.run_flags import Matrix, ScheduleFlags, checked
from k8sdds.runner import NoProgress, Outcome, Progress, Runner, RunOptions, resumable, same_backend

DEFAULT_BACKEND = "emulated"
# where a run ran, as each backend's options mark it: a resume may not move it elsewhere
RESUME_SAME = tuple(name for kind in deployment.BACKENDS.values()
                    for name in pinned(kind.options))


class OptionError(UserError):
    """A run option's value is not allowed; names the option (the CLI's usage error)."""

    def __init__(self, option: str, message: str):
        super().__init__(message)
        self.option = option


@dataclass(frozen=True)
class RunRequest:
    """What a run is asked to do. Exactly one of `schedule` (a file), `schedule_text` (its
    text, named `schedule_name`), `matrix` (a baseline) and `resume` (a run directory to
    continue)."""

    schedule: Path | None = None
    schedule_text: str | None = None
    schedule_name: str = "schedule.csv"
    resume: Path | None = None
    backend: str | None = None  # None: the resumed run's, else emulated
    backend_options: Mapping[str, Any] = field(default_factory=dict)  # None: not given
    flags: ScheduleFlags = ScheduleFlags()  # `k8sdds run`'s own options, as given
    matrix: Matrix | None = None  # a baseline's (then `flags` is made from it)
    out: Path = Path("logs")
    min_free_mb: float = 64
    rti: Mapping[str, Any] = field(default_factory=dict)  # RTI Perftest settings given
    command_line: tuple[str, ...] = ()


@dataclass
class Prepared:
    """A checked request: the backend, the engines, and the tests (or the run to resume)."""

    backend_name: str
    backend: Any
    engines: Mapping[str, Any]
    options: RunOptions
    tests: list[model.Test] = field(default_factory=list)
    resume: RunDir | None = None
    manifest: RunManifest | None = None

    def skipped(self) -> list[str]:
        """The rows left out on a datapath that cannot carry them, a line per reason."""
        return summary(self.options.not_applicable)

    def describe(self) -> str:
        """What will run, in one line."""
        if self.manifest is not None:
            left = sum(len(reps) for _, reps in self.manifest.pending())
            return (f"resuming {self.resume.path}: {left} of "
                    f"{sum(t.repeats for t in self.manifest.tests)} repeats left")
        return (f"{len(self.tests)} tests ({sum(t.repeats for t in self.tests)} repeats) on "
                f"{self.backend_name}, datapaths "
                f"{', '.join(dict.fromkeys(t.datapath for t in self.tests))}")

    def runner(self, progress: Progress | None = None) -> Runner:
        runner = Runner(self.backend, self.engines, self.options, progress or NoProgress())
        if isinstance(progress, EventProgress):
            progress.runner = runner
        return runner

    def start(self, runner: Runner) -> Outcome:
        """Run it (KeyboardInterrupt and RunStopped leave a resumable run)."""
        if self.manifest is not None:
            return runner.resume(self.resume, self.manifest)
        return runner.run(self.tests)


class EventProgress:
    """Progress as JSON lines on a stream (a pipe a program follows the run by): `start` (the
    run's id, repeats done before and in all), then `repeat` after each repeat, `stop`."""

    def __init__(self, stream: IO[str]):
        self.stream = stream
        self.runner: Runner | None = None  # set by Prepared.runner: where the run is
        self.done = self.total = 0

    def _emit(self, **event: Any) -> None:
        try:
            self.stream.write(json.dumps(event) + "\n")
            self.stream.flush()
        except (OSError, ValueError):
            pass  # nobody follows any more: the run goes on

    def start(self, total: int) -> None:
        run_dir = self.runner.run_dir if self.runner else None
        self.total, self.done = total, 0
        if run_dir is not None:
            manifest = RunDir(run_dir).read_manifest()
            self.done = len(manifest.repeats)
            self.total = sum(t.repeats for t in manifest.tests)
        self._emit(event="start", run_id=run_dir.name if run_dir else None, done=self.done,
                   total=self.total)

    def step(self, description: str) -> None:
        self._emit(event="step", description=description)

    def advance(self) -> None:
        self.done += 1
        self._emit(event="repeat", done=self.done, total=self.total)

    def stop(self) -> None:
        self._emit(event="stop", done=self.done, total=self.total)


def choice(value: str | None, allowed: list[str], option: str) -> str | None:
    """`value`, lower-cased, if it is one of `allowed` (None stays None)."""
    if value is None:
        return None
    low = value.strip().lower()
    if low not in allowed:
        raise OptionError(option, f"{value!r} is not one of {', '.join(allowed)}")
    return low


def datapaths(value: str, offered: list[str]) -> list[str]:
    """Comma-separated datapaths, each one the backend offers."""
    names = [v.strip().lower() for v in value.split(",") if v.strip()]
    if not names:
        raise OptionError("--datapath", "give at least one datapath")
    for name in names:
        if name not in model.DATAPATHS or name not in offered:
            raise OptionError("--datapath", f"{name!r} is not one of {', '.join(offered)}")
    return list(dict.fromkeys(names))


def available(unavailable: Callable[[str], str | None], names: list[str]) -> None:
    """Every datapath in `names` can be offered here (`unavailable(name)` says why not)."""
    for name in dict.fromkeys(names):
        reason = unavailable(name)
        if reason:
            raise UserError(f"datapath {name} is not available here: {reason} "
                            f"(`k8sdds testbed datapaths` lists what is)")


def backend(name: str | None, given: Mapping[str, Any]) -> tuple[str, Any, Any]:
    """The backend chosen (from the registry) with its options: (name, options, backend)."""
    name = choice(name or DEFAULT_BACKEND, list(deployment.BACKENDS), "--backend")
    options = deployment.options_of(name, given)
    return name, options, deployment.BACKENDS[name].factory(options)


def prepare(req: RunRequest) -> Prepared:
    """Check everything the request says, with the chosen backend's own limits; nothing is
    made, nothing runs. A UserError (OptionError: naming the option) says what is wrong."""
    given = dict(req.backend_options)
    manifest = None
    backend_name = req.backend
    if req.resume is not None:
        manifest = RunDir(req.resume).read_manifest()
        if backend_name:
            same_backend(req.resume, manifest,
                         choice(backend_name, list(deployment.BACKENDS), "--backend"))
        backend_name = manifest.backend
        given = {k: v for k, v in given.items() if v is not None}
        for key in sorted(set(given) & set(RESUME_SAME) & set(manifest.backend_options)):
            if str(given[key]) != str(manifest.backend_options[key]):
                raise UserError(f"--{key.replace('_', '-')} {given[key]}: the run in "
                                f"{req.resume} ran with {manifest.backend_options[key]} (its "
                                "manifest); a resume continues where it ran: leave the option "
                                "out")
        given = {**manifest.backend_options, **given}
    name, options, chosen = backend(backend_name, given)
    rti = {k: v for k, v in req.rti.items() if v is not None}
    if rti.get("image") and not chosen.images:
        raise UserError(f"--rtiperftest-image is for backends that run roles in images "
                        f"(--backend kubernetes), not {name}")
    engines = registry(RtiSettings.from_environment(**rti))
    order = choice(req.flags.order, list(ORDERS), "--order")
    if req.resume is not None:
        run_dir = RunDir(req.resume)
        manifest = resumable(run_dir, chosen, engines)
        available(chosen.unavailable, [t.datapath for t in manifest.tests])
        return Prepared(name, chosen, engines, _options(req, options, order,
                                                        Path(req.resume).parent),
                        resume=run_dir, manifest=manifest)
    if req.matrix is not None:
        req = _baseline(req, chosen, engines, given)
    if req.schedule is None and req.schedule_text is None:
        raise OptionError("--sch", "give the schedule (--sch FILE), or --resume RUN_DIR")
    asked = req.flags
    names = datapaths(asked.datapath or chosen.datapaths()[0], list(chosen.datapaths()))
    defaults = replace(asked.defaults(), transport=choice(asked.transport,
                                                          list(model.TRANSPORTS), "--transport"),
                       engine=choice(asked.engine, list(engines), "--engine"))
    if req.schedule is not None:
        tests = schedule.load(req.schedule, defaults, chosen.limits(), engines)
        where: Path | str = req.schedule
    else:
        tests = schedule.loads(req.schedule_text, req.schedule_name, defaults, chosen.limits(),
                               engines)
        where = req.schedule_name
    expansion = schedule.expand_where_applicable(tests, names, where, asked.from_i,
                                                 asked.to_i, strict=asked.strict)
    tests = expansion.tests
    available(chosen.unavailable, [t.datapath for t in tests])
    return Prepared(name, chosen, engines,
                    replace(_options(req, options, order, req.out),
                            not_applicable=tuple(expansion.not_applicable)), tests)


def _baseline(req: RunRequest, chosen: Any, engines: Mapping[str, Any],
              given: Mapping[str, Any]) -> RunRequest:
    """A baseline's request as a schedule's: its matrix as schedule text, on the datapaths
    and paths the backend offers (flannel and the host where it can, else all it offers)."""
    m = req.matrix
    if (given.get("nodes") or baseline.MIN_NODES) < baseline.MIN_NODES:
        raise OptionError("--nodes", "the baseline needs at least "
                          f"{baseline.MIN_NODES} nodes (a control plane and two workers, for "
                          "the cross-node paths)")
    offered = list(chosen.datapaths())
    usual = list(cni.BASELINE_DEFAULT)
    names = datapaths(m.datapath or ",".join(usual if set(usual) <= set(offered)
                                             else offered), offered)
    wanted = list(chosen.limits().paths) if m.paths.strip().lower() == "all" else [
        choice(p, list(model.PATHS), "--paths") for p in m.paths.split(",") if p.strip()]
    picked = [choice(e, list(baseline.ENGINES), "--engines")
              for e in m.engines.split(",") if e.strip()]
    if not picked and not m.dds:
        raise OptionError("--engines", "give at least one engine, or --dds")
    text = baseline.schedule(names, wanted, list(dict.fromkeys(picked)), engines, m.dds,
                             m.duration)
    return replace(req, matrix=None, schedule_text=text, schedule_name="baseline.csv",
                   flags=ScheduleFlags(datapath=",".join(names), repeats=m.repeats))


def _options(req: RunRequest, options: Any, order: str | None, out: Path) -> RunOptions:
    named = Path(req.schedule_name) if req.schedule_text is not None else None
    return RunOptions(out=out, schedule=req.schedule or named, schedule_text=req.schedule_text,
                      command_line=req.command_line, min_free_mb=req.min_free_mb,
                      backend_options=recorded(options), order=order)


# ---- a request as a file: what the service hands the run it starts ----------------------

REQUEST_FORMAT = 1


def _given(flags: Any) -> dict[str, Any]:
    """The fields of a flags dataclass that differ from their defaults."""
    return {f.name: getattr(flags, f.name) for f in fields(flags)
            if getattr(flags, f.name) != f.default}


def backend_values(given: Any, where: str) -> dict[str, Any]:
    """Backend options as JSON gives them (field -> value), each checked as its flag is and
    typed as the backend takes it (a path a Path); None is not given."""
    if not isinstance(given, dict):
        raise UserError(f"{where}: must be an object")
    options: dict[str, Any] = {}
    for name, kind in deployment.BACKENDS.items():
        own = {f.name: f for f in fields(kind.options)}
        part = checked(kind.options, {k: v for k, v in given.items() if k in own},
                       f"{where} ({name})")
        options |= {k: Path(v) if own[k].metadata["cli_type"] is Path else v
                    for k, v in part.items()}
    unknown = set(given) - {f.name for k in deployment.BACKENDS.values()
                            for f in fields(k.options)}
    if unknown:
        raise UserError(f"{where}: {', '.join(sorted(unknown))}: no backend has such an "
                        "option")
    return options


def dumps(req: RunRequest) -> str:
    """The request as JSON (what `loads` reads back): the schedule's text, not a path to it."""
    if req.schedule is not None:
        raise ValueError("a request file carries the schedule's text: read it first")
    paths = {"resume": req.resume, "out": req.out}
    return json.dumps({
        "format": REQUEST_FORMAT, "schedule_text": req.schedule_text,
        "schedule_name": req.schedule_name, "backend": req.backend,
        **{k: str(v) if v is not None else None for k, v in paths.items()},
        "backend_options": {k: str(v) if isinstance(v, Path) else
                            (list(v) if isinstance(v, tuple) else v)
                            for k, v in req.backend_options.items() if v is not None},
        "flags": _given(req.flags), "matrix": None if req.matrix is None else
        _given(req.matrix), "min_free_mb": req.min_free_mb}, indent=1) + "\n"


def loads(text: str, where: str) -> RunRequest:
    """A request from its JSON, every value checked again as a flag checks it (names, types,
    bounds): a UserError names `where` and what is wrong."""
    try:
        raw = json.loads(text)
    except ValueError as exc:
        raise UserError(f"{where}: not a run request (JSON: {exc})") from None
    keys = {"format", "schedule_text", "schedule_name", "backend", "resume", "out",
            "backend_options", "flags", "matrix", "min_free_mb"}
    if not isinstance(raw, dict) or raw.get("format") != REQUEST_FORMAT or set(raw) - keys:
        raise UserError(f"{where}: not a run request of format {REQUEST_FORMAT} (keys: "
                        f"{', '.join(sorted(keys))})")
    for key in ("schedule_text", "schedule_name", "backend", "resume", "out"):
        if raw.get(key) is not None and not isinstance(raw[key], str):
            raise UserError(f"{where}: {key} must be text")
    options = backend_values(raw.get("backend_options") or {}, f"{where}: backend_options")
    flags, matrix = raw.get("flags") or {}, raw.get("matrix")
    if not isinstance(flags, dict) or not isinstance(matrix, (dict, type(None))):
        raise UserError(f"{where}: flags and matrix must be objects")
    min_free = raw.get("min_free_mb", 64)
    if not isinstance(min_free, (int, float)) or isinstance(min_free, bool) or \
            not 0 <= min_free < float("inf"):
        raise UserError(f"{where}: min_free_mb must be a number from 0")
    return RunRequest(
        schedule_text=raw.get("schedule_text"), schedule_name=raw.get("schedule_name") or
        "schedule.csv", backend=raw.get("backend"), backend_options=options,
        resume=Path(raw["resume"]) if raw.get("resume") else None,
        out=Path(raw.get("out") or "logs"), min_free_mb=float(min_free),
        flags=ScheduleFlags(**checked(ScheduleFlags, flags, f"{where}: flags")),
        matrix=None if matrix is None else Matrix(**checked(Matrix, matrix,
                                                            f"{where}: matrix")))
