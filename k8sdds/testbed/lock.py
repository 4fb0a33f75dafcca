"""One run at a time per testbed: an advisory lock file beside its state file."""

from __future__ import annotations

import fcntl
import os

from k8sdds.errors import TestbedError
from k8sdds.testbed.layout import check_name, state_dir


class TestbedLock:
    """One run at a time per testbed: an advisory lock beside the state file."""

    __test__ = False

    def __init__(self, name: str, busy: str | None = None):
        """`busy`: what to tell a second holder, with `{pid}` for the first (default: the
        testbed is in use)."""
        check_name(name)
        self.path = state_dir() / f"{name}.lock"
        self.busy = busy or (f"testbed {name} is in use by another run (pid {{pid}}); wait "
                             "for it, or use --testbed with another name")
        self._fh = None

    def acquire(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(self.path, "a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            fh.close()
            raise TestbedError(self.busy.format(pid=holder)) from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        if self._fh:
            self._fh.close()  # closing drops the lock; the file may stay
            self._fh = None
