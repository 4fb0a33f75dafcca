"""Ctrl-C and SIGTERM: a stop that cannot be lost, and that ends the run promptly.

The signal handler raises KeyboardInterrupt where the program happens to be, and also sets a
flag. Some libraries swallow every exception in their clean-up code (websocket-client closes
a socket under a bare `except: pass`); the runner checks the flag between its steps, so a
stop that was swallowed there still stops the run. Once a stop is asked for, a clean-up wait
that may be long (the kubernetes backend's for deleted pods: 30 s) asks `bound` for what is
left of `CLEANUP_S`, then forces; the other waits of a clean-up are a second or two already.
So a run ends within seconds of the signal, on a busy machine too, with what it made removed.
"""

from __future__ import annotations

import signal
import threading
import time

requested = threading.Event()
CLEANUP_S = 5.0  # seconds the clean-up's waits may take after a stop before they force
_asked_at = 0.0  # monotonic time of the stop asked for (while `requested` is set)


def _handler(signum, frame) -> None:
    ask()
    raise KeyboardInterrupt


def ask() -> None:
    """Record a stop (the signal handler's own step)."""
    global _asked_at
    if not requested.is_set():
        _asked_at = time.monotonic()
        requested.set()


def install() -> None:
    """Ctrl-C and SIGTERM stop the run (clean-up runs on the way out)."""
    signal.signal(signal.SIGINT, _handler)
    signal.signal(signal.SIGTERM, _handler)


def reset() -> None:
    """Forget a stop (for a process that goes on after one: the tests)."""
    requested.clear()


def check() -> None:
    """Raise KeyboardInterrupt if a stop was asked for and has not ended the run yet."""
    if requested.is_set():
        raise KeyboardInterrupt


def bound(seconds: float) -> float:
    """`seconds`, or less once a stop was asked for: what is left of CLEANUP_S after it
    (at least 0.5 s, for a wait that must still ask once)."""
    if not requested.is_set():
        return seconds
    return max(0.5, min(seconds, _asked_at + CLEANUP_S - time.monotonic()))
