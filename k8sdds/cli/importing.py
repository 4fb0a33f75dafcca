"""`k8sdds import`: data from other tools into run directories."""

from __future__ import annotations

from pathlib import Path

import typer

from k8sdds.cli.common import QUIET, err_console, out_console

import_app = typer.Typer(no_args_is_help=True, help="Import data from other tools.")


def import_k8sdds(
    tree: Path = typer.Argument(..., help="A K8sDDS data tree (throughput-test/, "
                                "latency-test/)."),
    out: Path = typer.Option(Path("logs"), "--out", help="Where run directories go."),
    schedule: Path | None = typer.Option(None, "--schedule", help="The schedule of the "
                                         "configurations with no schedule.csv in or above "
                                         "their folder (K8sDDS's: schedules/k8sdds.csv) "
                                         "[none: each test from its logs' headers; a test "
                                         "whose logs say too little is listed as skipped]."),
    quiet: bool = QUIET,
) -> None:
    """K8sDDS logs -> one run directory per configuration, ready for `k8sdds report`. A
    configuration that cannot be imported is skipped with its reason (exit 1); the rest is
    imported; a configuration already imported under --out is kept, never duplicated. A
    progress bar counts the logs' bytes read (on a terminal; --quiet: none)."""
    from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeRemainingColumn

    from k8sdds.importer import import_tree, log_bytes

    skipped: list[tuple[str, str]] = []
    bar = Progress(TextColumn("importing"), BarColumn(), DownloadColumn(),
                   TimeRemainingColumn(), console=err_console, transient=True,
                   disable=quiet or not err_console.is_terminal)
    with bar:
        task = bar.add_task("logs", total=log_bytes(tree) if tree.is_dir() else 0)
        runs = import_tree(tree, out, skipped, schedule,
                           lambda n: bar.advance(task, n))
    for run in runs:
        out_console.print(f"imported: {run}")
    for folder, reason in skipped:
        err_console.print(f"skipped {folder}: {reason}", markup=False, highlight=False)
    if skipped:
        err_console.print(f"{len(skipped)} configuration(s) skipped; the rest is imported")
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    import_app.command("k8sdds-data")(import_k8sdds)
    app.add_typer(import_app, name="import")
