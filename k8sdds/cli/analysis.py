"""The analysis commands: engines, parse, plot, report, compare, results."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.table import Table

from k8sdds.analysis.comparable import DEFAULT_METRICS
from k8sdds.cli.common import choice, err_console, out_console
from k8sdds.errors import UserError


def engines() -> None:
    """List the measuring engines, whether each can run here and, for the engines k8sdds
    builds itself (zenoh, mqtt, rtiperftest on Cyclone DDS), the architectures they are built
    for and how to build the rest."""
    from k8sdds import engines
    from k8sdds.images.build import built_for
    from k8sdds.model import DEBIAN_ARCH

    def builds(engine) -> tuple[list[str], str]:
        """The architectures its programs are built for here; how to build the rest."""
        arches = engine.arches or tuple(DEBIAN_ARCH.values())
        done = [a for a in arches if built_for(engine, a)]
        rest = [a for a in arches if a not in done]
        return done, (f"Not built for {', '.join(rest)}: {engine.how_to_build(rest)}"
                      if rest else "")

    table = Table(title="engines")
    for col in ("engine", "available here", "version", "built for"):
        table.add_column(col, overflow="fold")
    notes = []
    for name, engine in engines.registry().items():
        reason = engine.unavailable()
        arches, rest = builds(engine) if engine.programs else (None, "")
        table.add_row(name, "no" if reason else "yes", "-" if reason else engine.version(),
                      "-" if arches is None else ", ".join(arches) or "nothing yet")
        notes.append(f"{name}: {engine.supports}" + (f". Not here: {reason}" if reason else "")
                     + (f". {rest}" if rest else ""))
    out_console.print(table)
    for line in notes:
        out_console.print(line, markup=False, highlight=False)


def parse(run_dir: Path = typer.Argument(..., help="A run directory.")) -> None:
    """Re-parse the raw logs of a run into results.csv (idempotent)."""
    from k8sdds.reparse import reparse

    unread: list[str] = []
    count = reparse(run_dir, unread)
    out_console.print(f"{count} rows written to {run_dir / 'results.csv'}")
    for line in unread:  # failed repeats: nothing of theirs is written as a zero
        err_console.print(f"not read: {line}", markup=False, highlight=False)


INCLUDE_FAILED = typer.Option(False, "--include-failed", help="Count the rows a failed "
                              "repeat parsed (left out by default: a half-measured repeat "
                              "never enters a summary, a figure or a comparison).")


def plot_cmd(run_dir: Path = typer.Argument(..., help="A run directory."),
             include_failed: bool = INCLUDE_FAILED) -> None:
    """Draw throughput.png/.svg of a run (throughput against payload, a line per datapath)."""
    from k8sdds.analysis.plots import run_throughput

    if run_throughput(run_dir, include_failed) is None:
        raise UserError(f"{run_dir}: no throughput figures to plot")
    out_console.print(f"plot: {run_dir / 'throughput.png'}")


def report(
    run_dirs: list[Path] = typer.Argument(..., help="One or more run directories."),
    out: Path | None = typer.Option(
        None, "--out", help="Where the plots and report.html go [the run directory, or "
        "./report when several runs are given]."),
    include_failed: bool = INCLUDE_FAILED,
) -> None:
    """Plots (PNG, SVG) and one self-contained report.html over one or more runs. Failed
    repeats are listed with their reasons; their rows are left out unless --include-failed."""
    from k8sdds.analysis.load import load

    runs = load(run_dirs, include_failed)  # a damaged run is refused before the plotting
    from k8sdds.analysis.report import build  # imports (matplotlib, seaborn) are paid

    target = out or (run_dirs[0] if len(run_dirs) == 1 else Path("report"))
    path = build(run_dirs, target, runs)
    out_console.print(f"report: {path}")


def compare(
    baseline: Path = typer.Argument(..., help="The baseline run directory."),
    contender: Path = typer.Argument(..., help="The run directory to compare with it."),
    metric: list[str] = typer.Option(
        list(DEFAULT_METRICS), "--metric",
        help="Metrics to compare (repeat the option for several)."),
    fail_if: list[str] = typer.Option(
        [], "--fail-if", help="METRIC:+N% or METRIC:-N%: exit with status 1 when the "
        "contender changes METRIC by more than N % in that direction and the change is "
        "significant over the repeats (e.g. throughput_mbps:-5%, latency_us_p99:+10%); a "
        "change beyond the bound within noise is said, not failed; where a test of METRIC "
        "has no verdict (fewer than 2 repeats a side) it cannot judge: exit status 3."),
    test: str = typer.Option("welch", "--test", help="Significance test over the repeat "
                             "values: welch (Welch's t-test: means, unequal spreads, from 2 "
                             "repeats a side) or mannwhitney (ranks: no verdict before 4 "
                             "repeats a side)."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
    force: bool = typer.Option(False, "--force", help="Compare runs whose machine, kernel, "
                               "engine versions, backend or profiles differ (the differences "
                               "are printed as a warning)."),
    same_fingerprint: bool = typer.Option(
        False, "--same-fingerprint", help="Refuse runs whose nodes' fingerprints differ "
        "(MTU, offloads, sysctls, governor, runtime, CNI version: `fingerprints` in the "
        "manifest); without it they are printed beside the comparison."),
    include_failed: bool = INCLUDE_FAILED,
) -> None:
    """Per test and metric: each side's mean over its repeats with its 95 % interval and n,
    the change, and its verdict (better, worse, no significant change, or no verdict with
    one repeat a side), judged over the repeat values. Runs whose nodes differ in kernel,
    CPU or CNI version (their fingerprints; without them, the computer k8sdds ran on), or
    in engine versions, backend or profiles, are refused (exit 2, the differences listed)
    unless --force. Exit status: 0, 1 a --fail-if bound crossed, 2 a usage error,
    3 --fail-if cannot judge."""
    from k8sdds.analysis import comparable
    from k8sdds.analysis import compare as cmp
    from k8sdds.analysis.load import load

    method = choice(test, ["welch", "mannwhitney"], "--test")
    bounds = [cmp.parse_bound(b) for b in fail_if]
    metrics = list(dict.fromkeys(list(metric) + [b.metric for b in bounds]))
    # each read once, manifests and results
    runs = load([baseline], include_failed), load([contender], include_failed)
    admitted = comparable.admit(*runs, (str(baseline), str(contender)), force,
                                same_fingerprint)
    differ, printed = list(admitted.differences), list(admitted.fingerprints)
    for line in differ:
        err_console.print(f"[yellow]warning: the runs differ in {line}[/yellow]",
                          highlight=False)
    for line in printed:
        err_console.print(f"[yellow]fingerprint differs: {line}[/yellow]", highlight=False)
    for line in admitted.controller:
        err_console.print(f"the computer k8sdds ran on differs (context: the nodes are "
                          f"alike): {line}", markup=False, highlight=False)
    about = cmp.compared(*runs)
    if not as_json:
        err_console.print("comparing " + ("; ".join(about) if about else
                                          "the same tests (no parameter differs)"),
                          markup=False, highlight=False)
    rows = cmp.compare(*runs, metrics, method)
    gate = cmp.gate(rows, bounds)
    if as_json:
        out_console.print_json(json.dumps({
            "rows": rows, "crossed": gate.crossed, "cannot_judge": gate.unjudged,
            "within_noise": gate.noise, "compared": about, "differences": differ,
            "fingerprint_differences": printed,
            "controller_differences": list(admitted.controller),
            "test": method}, default=str))
    else:
        _print_comparison(rows, gate, f"{contender} against {baseline} ({_TESTS[method]} "
                          "over the repeat values)")
    if gate.status:
        raise typer.Exit(gate.status)


_TESTS = {"welch": "Welch's t-test", "mannwhitney": "Mann-Whitney U"}


def _print_comparison(rows: list[dict], gate, title: str) -> None:
    """compare's table, then what its --fail-if bounds found."""
    table = Table(title=title)
    for col in ("test", "metric", "baseline", "contender", "n", "change", "p", "verdict"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["test"], r["metric"], _pm(r["baseline"], r["baseline_pm_pct"]),
                      _pm(r["contender"], r["contender_pm_pct"]),
                      f"{r['n_baseline']}+{r['n_contender']}", f"{r['change_pct']:+.1f} %",
                      "-" if r["p_value"] is None else f"{r['p_value']:.3g}", r["verdict"])
    out_console.print(table)
    for line in gate.noise:
        err_console.print(f"beyond the bound but not failed: {line}", highlight=False)
    for line in gate.crossed:
        err_console.print(f"[red]bound crossed:[/red] {line}")
    for line in gate.unjudged:
        err_console.print(f"[yellow]cannot judge:[/yellow] {line}")
    if gate.unjudged and not gate.crossed:
        err_console.print("--fail-if cannot judge without repeats: run each side with "
                          "--repeats 3 (or more); exit status 3", highlight=False)


def _pm(mean: float, half_pct: float | None) -> str:
    """'97.3 ± 1.2 %' as benchstat shows a side; the mean alone with one repeat."""
    return f"{mean:.4g}" + ("" if half_pct is None else f" ± {half_pct:.1f} %")


def results_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory."),
    fmt: str = typer.Option("csv", "--format", help="csv, json or parquet: the results "
                            "table; github-bigger or github-smaller: github-action-benchmark's "
                            "custom JSON of the metrics better when they rise (throughput) or "
                            "fall (latency, loss); openmetrics: each test's mean, interval "
                            "and repeats in the OpenMetrics text format."),
    out: Path | None = typer.Option(None, "--out", help="Output file [stdout; parquet needs "
                                    "--out]."),
    include_failed: bool = INCLUDE_FAILED,
) -> None:
    """Export the tidy results table of a run (without its failed repeats' rows unless
    --include-failed), or its figures per test and metric for CI and monitoring tools
    (docs/reference/results.md)."""
    from k8sdds.analysis import load

    fmt = choice(fmt, ["csv", "json", "parquet", *EXPORTS], "--format")
    runs = load.load([run_dir], include_failed)
    df = runs.results
    if fmt == "parquet":
        if out is None:
            raise UserError("--format parquet writes a binary file: give --out FILE")
        df.to_parquet(out, index=False)
    else:
        text = (df.to_json(orient="records", indent=1) + "\n" if fmt == "json"
                else _exported(runs, fmt) if fmt in EXPORTS else df.to_csv(index=False))
        if out:
            from k8sdds.results import atomic_write

            atomic_write(out, text)
        else:
            sys.stdout.write(text)
    if out:
        err_console.print(f"{len(df)} rows written to {out}" if fmt in ("csv", "json",
                          "parquet") else f"{fmt} written to {out}")


def history_cmd(
    runs: list[Path] = typer.Argument(None, help="Run directories, or folders of them, in "
                                      "any order (each run's time orders them)."),
    db: str | None = typer.Option(None, "--db", help="Read every run of the service's "
                                  "database instead (a SQLAlchemy URL, as `k8sdds serve "
                                  "--db`)."),
    metric: str = typer.Option("throughput_mbps", "--metric", help="The metric to follow: "
                               "throughput_mbps, samples_per_s, lost, latency_us_p50, "
                               "latency_us_p90 or latency_us_p99."),
    fail_on_regression: float | None = typer.Option(
        None, "--fail-on-regression", min=0, help="PCT: exit with status 1 when a test's "
        "newest change point is a regression of more than PCT %."),
    max_pvalue: float = typer.Option(0.001, "--max-pvalue", min=1e-9, max=0.5,
                                     help="How sure a change point must be: its segments' "
                                     "t-test p-value (Otava's default 0.001)."),
    out: Path | None = typer.Option(None, "--out", help="Draw history.png/.svg there: each "
                                    "test's series with its change points marked."),
    as_json: bool = typer.Option(False, "--json", help="Print the series and the changes "
                                 "as JSON."),
    include_failed: bool = INCLUDE_FAILED,
) -> None:
    """Each test's mean per run in time order, and its change points (Apache Otava's
    e-divisive means with a significance test, on the means' logarithms where all are
    positive): when, how much, and what else changed
    between the runs around it (machine, kernel, engine versions, backend, profiles). Exit
    status: 0, 1 a regression beyond --fail-on-regression, 2 a usage error
    (docs/how-to/analyse.md)."""
    from k8sdds.analysis import cells, history, load

    metric = choice(metric, [m.name for m in cells.METRICS], "--metric")
    if bool(runs) == bool(db):
        raise UserError("give run directories or --db URL (one of the two)")
    if db:
        from k8sdds.serve import series, store

        found_runs = series.runs_of(store.open_db(db), metric, f"database {store.redact(db)}")
    else:
        found_runs = load.load(_run_dirs(runs), include_failed)
    hist = history.series(found_runs, metric)
    if hist.empty:
        raise UserError(f"no test with {metric} in two runs or more: a history needs the "
                        "same test in several runs")
    found = history.changes(hist, found_runs.manifests, max_pvalue)
    failing = ([] if fail_on_regression is None else
               history.failing(found, fail_on_regression))
    if out is not None:
        from k8sdds.analysis import plots

        out.mkdir(parents=True, exist_ok=True)
        plots.history(hist, out, found)
    if as_json:
        out_console.print_json(json.dumps({
            "series": hist.to_dict("records"),
            "changes": [c.__dict__ | {"changed_with": list(c.changed_with)} for c in found],
            "failing": [c.test for c in failing]}, default=str))
    else:
        n_runs = hist["run_id"].nunique()
        out_console.print(f"{metric}: {hist['test'].nunique()} test(s) across {n_runs} runs; "
                          f"{len(found)} change point(s) (p < {max_pvalue:g})",
                          markup=False, highlight=False)
        for change in found:
            out_console.print("  " + change.said(), markup=False, highlight=False)
        if out is not None:
            err_console.print(f"history drawn in {out}/history.png", highlight=False)
    for change in failing:
        err_console.print(f"[red]regression beyond {fail_on_regression:g} %:[/red] "
                          f"{change.test}: {change.change_pct:+.1f} % from run "
                          f"{change.run_id}", highlight=False)
    if failing:
        raise typer.Exit(1)


def _run_dirs(paths: list[Path]) -> list[Path]:
    """The run directories among `paths`: each itself, or the run directories in it."""
    out = []
    for path in paths:
        if (path / "manifest.json").is_file():
            out.append(path)
            continue
        inside = sorted(p for p in path.iterdir() if (p / "manifest.json").is_file()) \
            if path.is_dir() else []
        if not inside:
            raise UserError(f"{path}: not a run directory, nor a folder of them (no "
                            "manifest.json)")
        out += inside
    return out


EXPORTS = ("github-bigger", "github-smaller", "openmetrics")


def _exported(runs, fmt: str) -> str:
    """A run's cells in one of EXPORTS."""
    from k8sdds.analysis import cells, export

    table = cells.cells(runs.results)
    if fmt == "openmetrics":
        return export.openmetrics(table, [(rid, str(m.get("backend", "")))
                                          for rid, m in runs.manifests.items()])
    return export.github_benchmark(table, export.DIRECTIONS[fmt])


def register(app: typer.Typer) -> None:
    app.command()(engines)
    app.command()(parse)
    app.command("plot")(plot_cmd)
    app.command()(report)
    app.command()(compare)
    app.command("results")(results_cmd)
    app.command("history")(history_cmd)
