"""Ctrl-C and SIGTERM: a stop that cannot be lost.

The signal handler raises KeyboardInterrupt where the program happens to be, and also sets a
flag. Some libraries swallow every exception in their clean-up code (websocket-client closes
a socket under a bare `except: pass`); the runner checks the flag between its steps, so a
stop that was swallowed there still stops the run.
"""

from __future__ import annotations

import signal
import threading

requested = threading.Event()


def _handler(signum, frame) -> None:
    requested.set()
    raise KeyboardInterrupt


def install() -> None:
    """Ctrl-C and SIGTERM stop the run (clean-up runs on the way out)."""
    signal.signal(signal.SIGINT, _handler)
    signal.signal(signal.SIGTERM, _handler)


def check() -> None:
    """Raise KeyboardInterrupt if a stop was asked for and has not ended the run yet."""
    if requested.is_set():
        raise KeyboardInterrupt
