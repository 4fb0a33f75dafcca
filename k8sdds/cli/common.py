"""What every command group shares: the consoles, the progress bar, option parsing helpers,
and the backend options, generated from each backend's options dataclass."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from k8sdds import deployment, model
from k8sdds.deployment import BACKENDS
from k8sdds.errors import UserError

out_console = Console()
err_console = Console(stderr=True)


class RichProgress:
    """Progress bar on stderr: test i of n, repeat, elapsed, ETA."""

    def __init__(self) -> None:
        self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                             MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                             TimeRemainingColumn(), console=err_console, transient=False)
        self._task = None

    def start(self, total: int) -> None:
        self._bar.start()
        self._task = self._bar.add_task("starting", total=total)

    def step(self, description: str) -> None:
        self._bar.update(self._task, description=description)

    def advance(self) -> None:
        self._bar.advance(self._task)

    def stop(self) -> None:
        self._bar.stop()


def choice(value: str | None, allowed: list[str], option: str) -> str | None:
    """`value`, lower-cased, if it is one of `allowed`; a usage error naming `option`."""
    if value is None:
        return None
    low = value.strip().lower()
    if low not in allowed:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(allowed)}",
                                 param_hint=option)
    return low


def datapath_list(value: str, offered: list[str]) -> list[str]:
    """Comma-separated datapaths, each one the backend offers."""
    names = [v.strip().lower() for v in value.split(",") if v.strip()]
    if not names:
        raise typer.BadParameter("give at least one datapath", param_hint="--datapath")
    for name in names:
        if name not in model.DATAPATHS or name not in offered:
            raise typer.BadParameter(f"{name!r} is not one of {', '.join(offered)}",
                                     param_hint="--datapath")
    return list(dict.fromkeys(names))


def check_available(unavailable: Callable[[str], str | None], names: list[str]) -> None:
    """Every datapath in `names` can be offered here (`unavailable(name)` says why not)."""
    for name in dict.fromkeys(names):
        reason = unavailable(name)
        if reason:
            raise UserError(f"datapath {name} is not available here: {reason} "
                            f"(`k8sdds testbed datapaths` lists what is)")


# ---- backend options: one dataclass per backend, one --flag per field ------------------

def _option(backend: str, f) -> Any:
    meta = f.metadata
    shown = f.default if f.default is not MISSING else None
    default = "" if shown in (None, ()) else f" [{shown}]"
    return typer.Option(None, meta["flag"], *meta["aliases"],
                        help=escape(f"{backend}: {meta['help']}{default}."), **meta["bounds"])


def _parameters() -> list[inspect.Parameter]:
    params = []
    for backend, kind in BACKENDS.items():
        for f in fields(kind.options):
            given = f.metadata["cli_type"]
            params.append(inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY,
                                            default=_option(backend, f),
                                            annotation=Optional[given]))  # noqa: UP045
    return params


def backend_option(name: str) -> Any:
    """The --flag of one backend option, for a command that takes only that one."""
    backend = deployment.owner(name)[0]
    [f] = [f for f in fields(BACKENDS[backend].options) if f.name == name]
    return _option(backend, f)


BACKEND_PARAMETERS = _parameters()


def with_backend_options(command):
    """Give `command` every backend's options as --flags; it receives the ones given as
    `backend_options` (a dict, None where not given)."""
    names = {p.name for p in BACKEND_PARAMETERS}
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name != "backend_options"]

    @functools.wraps(command)
    def wrapper(**kwargs: Any):
        given = {k: kwargs.pop(k) for k in list(kwargs) if k in names}
        return command(**kwargs, backend_options=given)

    wrapper.__signature__ = signature.replace(parameters=own + BACKEND_PARAMETERS)
    return wrapper


BACKEND = typer.Option(
    None, "--backend", help="Where tests run: emulated (namespaces on this machine), "
    "kubernetes (pods on the cluster of --kubeconfig) or ssh (bare hosts of --inventory) "
    "[emulated; with --resume, the run's own].")
OUT = typer.Option(Path("logs"), "--out", help="Where run directories go.")
MIN_FREE = typer.Option(
    64, "--min-free", min=0, help="MiB that must stay free where the run writes: checked "
    "before the run and before each repeat; below it the run stops, resumable.")
REPORT = typer.Option(
    False, "--report", help="Write report.html (and every plot) into the run directory at "
    "the end, as `k8sdds report` does.")
QUIET = typer.Option(False, "--quiet", "-q", help="No progress bar.")
AS_JSON = typer.Option(False, "--json", help="Print the outcome as JSON on stdout.")
