"""`k8sdds run`, `k8sdds baseline` and `k8sdds cleanup`: parse the options, build the
backend and the engines for this run, hand the tests to the runner, say how it went."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.markup import escape

from k8sdds import model, request
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
    out_console,
    usage,
    with_options,
)
from k8sdds.errors import UserError
from k8sdds.request import EventProgress, RunRequest, prepare
from k8sdds.runner import Runner


def run(
    sch: Path | None = typer.Option(None, "--sch", "--schedule",
                                    help="Schedule CSV, a test a row."),
    resume: Path | None = typer.Option(
        None, "--resume", help="Continue the run in this run directory (after a crash, a kill "
        "or Ctrl-C): finished repeats are kept, the rest run; its own schedule, backend and "
        "backend options are used (options given now override them)."),
    backend: str | None = BACKEND,
    datapath: str | None = typer.Option(
        None, "--datapath",
        help="Comma-separated datapaths; the schedule runs once per datapath, into one run "
             "directory [emulated: host; kubernetes: the cluster's own]: "
             + ", ".join(model.DATAPATHS)),
    duration: float | None = typer.Option(
        None, "--duration", help="Seconds each test runs (rows without a duration). [10]"),
    repeats: int | None = typer.Option(
        None, "--repeats", help="Repeats of each test (rows without repeats). [1]"),
    from_i: int | None = typer.Option(
        None, "--fromI", help="First schedule row to run (0-based, inclusive)."),
    to_i: int | None = typer.Option(
        None, "--toI", help="Last schedule row to run (0-based, inclusive)."),
    latency_test: bool = typer.Option(
        False, "--latencyTest", help="Latency (ping-pong) tests instead of throughput."),
    transport: str | None = typer.Option(
        None, "--transport",
        help="udp, tcp, tls or dtls (case-insensitive; ddsperf: udp, tcp and tls, with a "
             "CA and certificates made for the run)."),
    secure: bool = typer.Option(
        False, "--secure", help="DDS Security: authentication, access control and "
        "encryption (ddsperf: Cyclone's plugins, credentials made for the run)."),
    peers: bool = typer.Option(
        False, "--peers", help="Discover by unicast peers even where multicast would work."),
    send_queue_size: int | None = typer.Option(
        None, "--sendQueueSize",
        help="Writer queue in samples (ddsperf: Cyclone's WhcHigh = this x dataLen bytes)."),
    no_print: bool = typer.Option(
        False, "--noPrint", help="Accepted for K8sDDS; ddsperf always prints intervals."),
    order: str | None = typer.Option(
        None, "--order", help="The order repeats run in. tests: each test's repeats in a row "
        "(K8sDDS's order); rounds: the first repeat of every test, then the second, ..., so "
        "a slow stretch of the machine falls on every test alike. [tests; on --resume: the "
        "run's own]"),
    out: Path = OUT,
    min_free: float = MIN_FREE,
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Draw throughput.png at the end."),
    with_report: bool = REPORT,
    quiet: bool = QUIET,
    as_json: bool = AS_JSON,
    events: Path | None = EVENTS,
    backend_options: dict | None = None,
    rti: dict | None = None,
) -> None:
    """Run a schedule and write one run directory under --out."""
    req = RunRequest(
        schedule=sch, resume=resume, backend=backend, backend_options=backend_options or {},
        datapath=datapath, transport=transport, from_i=from_i, to_i=to_i, order=order,
        out=out, min_free_mb=min_free, rti=rti or {}, command_line=tuple(sys.argv),
        defaults=model.Defaults(
            latency_test=True if latency_test else None, secure=True if secure else None,
            duration=duration, repeats=repeats, send_queue_size=send_queue_size,
            discovery="peers" if peers else None, no_print=True if no_print else None))
    with _reporting(as_json), _events(events) as stream:
        prepared = usage(prepare, req)
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
    datapath: str | None = typer.Option(
        None, "--datapath",
        help="Comma-separated datapaths; the matrix runs on each [emulated: host, "
             "flannel-hostgw, flannel-vxlan; kubernetes: host and the cluster's own]."),
    paths: str = typer.Option(
        "all", "--paths", help="all (what the backend offers), or comma-separated: "
        + ", ".join(model.PATHS) + " (a host-network datapath has only node-node; "
        "pod-service and external-nodeport, through a Service, on kubernetes only)."),
    engines_: str = typer.Option(
        "ping,iperf3,qperf,ab", "--engines", help="Comma-separated: ping, iperf3, qperf, ab."),
    dds: bool = typer.Option(
        True, "--dds/--no-dds", help="Also run ddsperf (1 KiB throughput, 64 B round trip) on "
        "every path, for the report's DDS efficiency."),
    duration: float = typer.Option(
        5, "--duration", min=1, max=86_400,
        help="Seconds per test (ddsperf tests: at least 3, its first second is discovery)."),
    repeats: int = typer.Option(1, "--repeats", min=1, max=1000, help="Repeats per test."),
    out: Path = OUT,
    min_free: float = MIN_FREE,
    backend: str | None = BACKEND,
    with_report: bool = REPORT,
    quiet: bool = QUIET,
    as_json: bool = AS_JSON,
    events: Path | None = EVENTS,
    backend_options: dict | None = None,
) -> None:
    """Measure the network itself (ping, iperf3, qperf, ab) over the path matrix, beside
    ddsperf on the same paths; one ordinary run directory."""
    req = RunRequest(
        matrix=request.Matrix(paths=paths, engines=engines_, dds=dds, duration=duration),
        backend=backend, backend_options=backend_options or {}, datapath=datapath,
        defaults=model.Defaults(repeats=repeats), out=out, min_free_mb=min_free,
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


def register(app: typer.Typer) -> None:
    app.command()(with_options(backend_options=BACKEND_FLAGS, rti=RTI_FLAGS)(run))
    app.command()(with_options(backend_options=BACKEND_FLAGS)(baseline))
    app.command()(cleanup)
