"""`k8sdds import`: data from other tools into run directories."""

from __future__ import annotations

from pathlib import Path

import typer

from k8sdds.cli.common import out_console

import_app = typer.Typer(no_args_is_help=True, help="Import data from other tools.")


def import_k8sdds(
    tree: Path = typer.Argument(..., help="A K8sDDS data tree (throughput-test/, "
                                "latency-test/)."),
    out: Path = typer.Option(Path("logs"), "--out", help="Where run directories go."),
) -> None:
    """K8sDDS logs -> one run directory per configuration, ready for `k8sdds report`."""
    from k8sdds.importer import import_tree

    for run in import_tree(tree, out):
        out_console.print(f"imported: {run}")


def register(app: typer.Typer) -> None:
    import_app.command("k8sdds-data")(import_k8sdds)
    app.add_typer(import_app, name="import")
