"""What every command group shares: the consoles, the progress bar, option parsing helpers,
and the backend options, generated from each backend's options dataclass."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import MISSING, dataclass, fields
from pathlib import Path
from typing import Any, Optional

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from k8sdds import deployment, request
from k8sdds.deployment import BACKENDS
from k8sdds.engines import RtiSettings

# wide enough that no table or line is ever cut, however long its paths
UNWRAPPED_WIDTH = 100_000


def console(stderr: bool = False) -> Console:
    """A console that wraps to a terminal's width, and never wraps what goes to a file or a
    pipe (so the output can be grepped for a path)."""
    stream = sys.stderr if stderr else sys.stdout
    if stream.isatty():
        return Console(stderr=stderr)
    return Console(stderr=stderr, soft_wrap=True, width=UNWRAPPED_WIDTH)


out_console = console()
err_console = console(stderr=True)


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


def usage(call: Callable[..., Any], *args: Any) -> Any:
    """`call(*args)`, a request's OptionError turned into the CLI's usage error (exit 2)."""
    try:
        return call(*args)
    except request.OptionError as exc:
        raise typer.BadParameter(str(exc), param_hint=exc.option) from None


def one_of(new: Any, old: Any, flag: str, old_flag: str) -> Any:
    """An option given in its spelling or its old, hidden one (not both, unless alike)."""
    if new is not None and old is not None and new != old:
        raise typer.BadParameter(f"give {flag} once ({old_flag} is its old spelling)",
                                 param_hint=flag)
    return new if new is not None else old


def _url(value: str | None, schemes: tuple[str, ...], like: str) -> str | None:
    """`value` if it is a URL of one of `schemes` with no space in it (it becomes an argument
    of apt, curl or kubectl on a host: `-oProxyCommand=...` is refused before any of them
    sees it); a usage error otherwise."""
    if value is None:
        return None
    scheme, sep, rest = value.partition("://")
    if not sep or scheme not in schemes or not rest or any(c.isspace() for c in value):
        raise typer.BadParameter(f"{value!r} is not an {', '.join(schemes[:-1])} or "
                                 f"{schemes[-1]} URL (like {like})")
    return value


def url(value: str | None) -> str | None:
    """A Debian mirror (--mirror): http, https or file. A typer callback."""
    return _url(value, ("http", "https", "file"), "http://deb.debian.org/debian")


def web_url(value: str | None) -> str | None:
    """A manifest the control plane downloads (--manifest-url): http(s). A typer callback."""
    return _url(value, ("https", "http"), "https://example.org/kube-flannel.yml")


def choice(value: str | None, allowed: list[str], option: str) -> str | None:
    """`value`, lower-cased, if it is one of `allowed`; a usage error naming `option`."""
    return usage(request.choice, value, allowed, option)


def datapath_list(value: str, offered: list[str]) -> list[str]:
    """Comma-separated datapaths, each one the backend offers."""
    return usage(request.datapaths, value, offered)


check_available = request.available  # every datapath asked for can be offered here


# ---- options declared as dataclasses (k8sdds.flags): one --flag per field -------------

def _option(f, about: str = "") -> Any:
    meta = f.metadata
    shown = f.default if f.default is not MISSING else None
    flag = meta["cli_type"] is bool  # given or not: no value, no default to show
    default = "" if shown in (None, ()) or flag else f" [{shown}]"
    text = f"{about}{meta['help']}{default}."
    return typer.Option(None, meta["flag"], *meta["aliases"], help=text[0].upper() + text[1:]
                        if not about else text, **meta["bounds"])


@dataclass(frozen=True)
class Flags:
    """The --flags of some options dataclasses: one keyword parameter per field, named
    `prefix + field` (a prefix keeps two groups' fields apart)."""

    params: tuple[inspect.Parameter, ...]
    prefix: str = ""

    def field(self, param: str) -> str:
        return param.removeprefix(self.prefix)


def flags_of(classes: dict[type, str], prefix: str = "") -> Flags:
    """The flags of each dataclass in `classes` (class -> what starts its help texts)."""
    params = []
    for cls, about in classes.items():
        for f in fields(cls):
            given = f.metadata["cli_type"]
            params.append(inspect.Parameter(prefix + f.name, inspect.Parameter.KEYWORD_ONLY,
                                            default=_option(f, about),
                                            annotation=Optional[given]))  # noqa: UP045
    return Flags(tuple(params), prefix)


BACKEND_FLAGS = flags_of({kind.options: f"{backend}: " for backend, kind in BACKENDS.items()})
RTI_FLAGS = flags_of({RtiSettings: ""}, prefix="rti_")


def backend_option(name: str) -> Any:
    """The --flag of one backend option, for a command that takes only that one."""
    backend = deployment.owner(name)[0]
    [f] = [f for f in fields(BACKENDS[backend].options) if f.name == name]
    return _option(f, f"{backend}: ")


def with_options(**groups: Flags):
    """Give a command the flags of each group (`name=Flags`); it receives each group as one
    dict keyword `name` (field -> value, None where not given)."""
    def decorate(command):
        signature = inspect.signature(command, eval_str=True)
        own = [p for p in signature.parameters.values() if p.name not in groups]
        extra = [p for group in groups.values() for p in group.params]

        @functools.wraps(command)
        def wrapper(**kwargs: Any):
            for name, group in groups.items():
                kwargs[name] = {group.field(p.name): kwargs.pop(p.name) for p in group.params
                                if p.name in kwargs}
            return command(**kwargs)

        wrapper.__signature__ = signature.replace(parameters=own + extra)
        return wrapper
    return decorate


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
AS_JSON = typer.Option(False, "--json", help="Print the outcome as JSON on stdout (an error "
                       "too: error, kind and exit).")
EVENTS = typer.Option(None, "--events", help="Write progress as JSON lines to this file (for "
                      "a program that follows the run, such as `k8sdds serve`): start, step, "
                      "repeat and stop, with repeats done and in all.")


# a testbed command's --testbed, as `k8sdds run --testbed`
TESTBED_NAME = typer.Option(None, "--testbed", help="Testbed name (namespace prefix) [the spec's "
                    "name, else k8sdds], as `k8sdds run --testbed`.")


@contextmanager
def testbed_locked(name: str):
    """Hold testbed `name`'s lock (a run holds it for its whole length)."""
    from k8sdds.testbed.lock import TestbedLock

    lock = TestbedLock(name)
    lock.acquire()
    try:
        yield
    finally:
        lock.release()
