"""`k8sdds run`, `k8sdds baseline` and `k8sdds cleanup`: parse the options, build the
backend and the engines for this run, hand the tests to the runner, say how it went."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import typer
from rich.markup import escape

from k8sdds import request
from k8sdds.cli.common import (
    AS_JSON,
    BACKEND,
    BACKEND_FLAGS,
    EVENTS,
    MIN_FREE,
    OUT,
    QUIET,
    REPORT,
    RTI_FLAGS,
    RichProgress,
    backend_option,
    err_console,
    flags_of,
    out_console,
    usage,
    with_options,
)
from k8sdds.errors import UserError
from k8sdds.flags import build
from k8sdds.request import EventProgress, RunRequest, prepare
from k8sdds.run_flags import Matrix, ScheduleFlags
from k8sdds.runner import Runner


def run(
    sch: Path | None = typer.Option(None, "--sch", "--schedule",
                                    help="Schedule CSV, a test a row."),
    resume: Path | None = typer.Option(
        None, "--resume", help="Continue the run in this run directory (after a crash, a kill "
        "or Ctrl-C): finished repeats are kept, the rest run; its own schedule, backend and "
        "backend options are used (options given now override them)."),
    request_file: Path | None = typer.Option(
        None, "--request", help="Run the request in this file (JSON, as `k8sdds serve` writes "
        "one for each task it starts; checked again here) instead of flags."),
    backend: str | None = BACKEND,
    out: Path = OUT,
    min_free: float = MIN_FREE,
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Draw throughput.png at the end."),
    with_report: bool = REPORT,
    quiet: bool = QUIET,
    as_json: bool = AS_JSON,
    events: Path | None = EVENTS,
    flags: dict | None = None,
    backend_options: dict | None = None,
    rti: dict | None = None,
) -> None:
    """Run a schedule and write one run directory under --out."""
    if request_file is not None:
        others = sch is not None or resume is not None or backend is not None or any(
            v is not None for group in (flags, backend_options, rti)
            for v in (group or {}).values())
        req = _read_request(request_file, others)
    else:
        req = RunRequest(
            schedule=sch, resume=resume, backend=backend,
            backend_options=backend_options or {}, flags=build(ScheduleFlags, flags or {}),
            out=out, min_free_mb=min_free, rti=rti or {}, command_line=tuple(sys.argv))
    with _reporting(as_json), _events(events) as stream:
        prepared = usage(prepare, req)
        if not as_json:  # even with --quiet: a row left out is never silent
            for line in prepared.skipped():
                err_console.print(f"[yellow]not applicable:[/yellow] {escape(line)}",
                                  highlight=False)
        if not quiet and not as_json:
            err_console.print(prepared.describe())
        runner = prepared.runner(_progress(quiet, as_json, stream))
        execute(runner, lambda: prepared.start(runner), as_json, quiet, plot, with_report)


@contextmanager
def _reporting(as_json: bool):
    """With --json, an error is data too: {"error", "kind", "exit"} on stdout (and the
    message on stderr, as always)."""
    try:
        yield
    except UserError as exc:
        if as_json:
            out_console.print_json(json.dumps({"error": str(exc), "kind": type(exc).__name__,
                                               "exit": exc.exit_code}))
        raise


@contextmanager
def _events(path: Path | None):
    """The --events stream, line-buffered (None: no events)."""
    if path is None:
        yield None
        return
    try:
        stream = open(path, "w", buffering=1)  # noqa: SIM115 - closed below
    except OSError as exc:
        raise UserError(f"--events {path}: {exc.strerror}") from None
    try:
        yield stream
    finally:
        stream.close()


def baseline(
    out: Path = OUT,
    min_free: float = MIN_FREE,
    backend: str | None = BACKEND,
    with_report: bool = REPORT,
    quiet: bool = QUIET,
    as_json: bool = AS_JSON,
    events: Path | None = EVENTS,
    matrix: dict | None = None,
    backend_options: dict | None = None,
) -> None:
    """Measure the network itself (ping, iperf3, qperf, ab) over the path matrix, beside
    ddsperf on the same paths; one ordinary run directory."""
    req = RunRequest(
        matrix=build(Matrix, matrix or {}), backend=backend,
        backend_options=backend_options or {}, out=out, min_free_mb=min_free,
        command_line=tuple(sys.argv))
    with _reporting(as_json), _events(events) as stream:
        prepared = usage(prepare, req)  # the same checks as `k8sdds run`'s
        if not quiet and not as_json:
            err_console.print("baseline: " + prepared.describe())
        runner = prepared.runner(_progress(quiet, as_json, stream))
        execute(runner, lambda: prepared.start(runner), as_json, quiet, False, with_report)


def _progress(quiet: bool, as_json: bool, events=None):
    if events is not None:
        return EventProgress(events)
    return None if (quiet or as_json) else RichProgress()


def _loaded(run_dir: Path):
    """The run's results, read once for the plot, the report and the answer (None: none)."""
    from k8sdds.analysis.load import load

    if not (run_dir / "results.csv").exists():
        return None
    try:
        return load([run_dir])
    except UserError:
        return None


def _answer(runs) -> list[str]:
    """What each datapath of the run costs against host, and how the middlewares compare on
    each, in a sentence each (none without a host baseline or two middlewares)."""
    from k8sdds.analysis import answer, tables

    if runs is None:
        return []
    return answer.of_runs(runs, tables.throughput(runs), tables.latency(runs))[1]


def execute(runner: Runner, go, as_json: bool, quiet: bool, plot: bool,
            with_report: bool) -> None:
    """Run (`go()`), draw what was asked, and say how it went."""
    from k8sdds.analysis import plots

    try:
        outcome = go()
    except KeyboardInterrupt:
        hint = f"; continue with `k8sdds run --resume {runner.run_dir}`" if runner.run_dir else ""
        err_console.print(f"interrupted: the processes, pods and objects the run made are "
                          f"removed{hint}")
        raise typer.Exit(130) from None
    runs = _loaded(outcome.run_dir)
    report_path = None
    if with_report and runs is not None:
        from k8sdds.analysis.report import build

        report_path = build([outcome.run_dir], outcome.run_dir, runs)  # draws throughput.png
    plotted = plot and runs is not None and (
        (outcome.run_dir / "throughput.png").exists() if report_path
        else plots.throughput(runs, outcome.run_dir) is not None)
    said = _answer(runs)
    if as_json:
        out_console.print_json(json.dumps({
            "run_dir": str(outcome.run_dir), "repeats": outcome.repeats,
            "failed": outcome.failed, "not_applied": outcome.not_applied,
            "not_applicable": outcome.not_applicable,
            "budget_notes": outcome.budget_notes,
            "wall_s": round(outcome.wall_s, 2), "answer": said,
            "plot": str(outcome.run_dir / "throughput.png") if plotted else None,
            "report": str(report_path) if report_path else None}))
        return
    # even with --quiet: failures and limits not applied are never silent
    for failure in outcome.failed:
        err_console.print(f"[red]failed[/red] {failure}")
    for line in outcome.not_applied:
        err_console.print(f"[yellow]not applied:[/yellow] {line}")
    # what a CPU budget rests on: in the answer's lines, else (--quiet, or no results) here
    for line in outcome.budget_notes if quiet or runs is None else []:
        err_console.print(f"[yellow]note:[/yellow] {escape(line)}", highlight=False)
    if not quiet:
        err_console.print(f"{outcome.repeats - len(outcome.failed)}/{outcome.repeats} repeats "
                          f"done in {outcome.wall_s:.1f} s")
        out_console.print(f"results: {outcome.run_dir / 'results.csv'}")
        for line in said:
            out_console.print(line, markup=False, highlight=False)
        if plotted:
            out_console.print(f"plot:    {outcome.run_dir / 'throughput.png'}")
        if report_path:
            out_console.print(f"report:  {report_path}")


def cleanup(
    namespace: str | None = typer.Option(
        None, "--namespace", help="Remove what k8sdds made in this namespace (and the "
        "namespace, if k8sdds made it) [every namespace k8sdds made]."),
    kubeconfig: Path | None = backend_option("kubeconfig"),
    context: str | None = backend_option("context"),
) -> None:
    """kubernetes: remove what a killed run left behind (pods, ConfigMaps, Secrets, RBAC,
    namespaces labelled app.kubernetes.io/managed-by=k8sdds)."""
    from k8sdds.deployment import kubernetes as kube

    api = kube.connect(kubeconfig, context)
    spaces = [namespace] if namespace else kube.managed_namespaces(api)
    gone = []
    for ns in spaces:
        gone += kube.remove(api, ns)
    for item in gone:
        out_console.print(f"deleted {item}")
    out_console.print(f"{len(gone)} objects deleted in {len(spaces)} namespace(s)")


def _read_request(path: Path, others: bool) -> RunRequest:
    """The request a file holds (--request): nothing else (`others`) may say what to run."""
    from k8sdds.guarded import read_text

    if others:
        raise typer.BadParameter("a request file says everything a run is asked: give no "
                                 "other run option with it", param_hint="--request")
    return replace(request.loads(read_text(path, "request"), str(path)),
                   command_line=tuple(sys.argv))


SCHEDULE_FLAGS = flags_of({ScheduleFlags: ""})
MATRIX_FLAGS = flags_of({Matrix: ""}, prefix="matrix_")


def register(app: typer.Typer) -> None:
    app.command()(with_options(flags=SCHEDULE_FLAGS, backend_options=BACKEND_FLAGS,
                               rti=RTI_FLAGS)(run))
    app.command()(with_options(matrix=MATRIX_FLAGS, backend_options=BACKEND_FLAGS)(baseline))
    app.command()(cleanup)
