"""`k8sdds ARGS` in the test's own process, through the CLI's real entry point
(`k8sdds.cli.main`): its exit status and what it printed, as a child process gives them, without
a second of imports (pandas, scipy, matplotlib) paid again for every call.

For commands that read, check, refuse, parse, compare and draw. A run, which spawns engines
and stops on a signal, and anything a test interrupts, goes through a real process
(`subprocess`), as do the tests of the entry points themselves (`python -m k8sdds`,
`perftest.py`)."""

from __future__ import annotations

import contextlib
import io
import os
import signal
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Done:
    """What a finished command left: the fields of subprocess.CompletedProcess the tests read."""

    returncode: int
    stdout: str
    stderr: str


def invoke(*args: str, cwd: str | Path | None = None, env: dict[str, str] | None = None) -> Done:
    """Run `k8sdds ARGS`; `env` is added to the environment for the call, `cwd` is its working
    directory. An exception that escapes is a traceback on stderr and exit status 1, as the
    interpreter would print it."""
    from k8sdds import stopping
    from k8sdds.cli import main

    out, err = io.StringIO(), io.StringIO()
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    saved_env, here = dict(os.environ), os.getcwd()
    os.environ.update(env or {})
    code = 0
    try:
        if cwd is not None:
            os.chdir(cwd)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main(list(args))
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                if isinstance(exc.code, str):
                    print(exc.code, file=sys.stderr)
            except BaseException:  # what a child process would die of
                traceback.print_exc()
                code = 1
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(saved_env)
        for s, handler in handlers.items():
            signal.signal(s, handler)
        stopping.reset()
    return Done(code, out.getvalue(), err.getvalue())
