"""The `k8sdds` command: one module per command group, each thin (parse options, call the
library, print)."""

from __future__ import annotations

import sys

import typer

from k8sdds import stopping
from k8sdds.cli import analysis, cluster, image, importing, run, serve, testbed, vm
from k8sdds.cli.common import err_console
from k8sdds.errors import UserError

# plain help (click's): a help text's "[default]" is text, not rich markup to drop
app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Benchmark DDS publish/subscribe on (emulated) edge Kubernetes clusters.")
for group in (run, analysis, testbed, cluster, image, importing, serve, vm):
    group.register(app)


def main(argv: list[str] | None = None) -> None:
    """Entry point: user mistakes become one message and an exit status, never a traceback."""
    stopping.install()  # Ctrl-C and SIGTERM: clean up, then exit
    try:
        app(args=argv)  # typer reports usage errors itself (exit status 2)
    except UserError as exc:
        err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
