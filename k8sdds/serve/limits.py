"""The limits a client of `k8sdds serve` can push against, beyond the API's own bounds
(offsets, ids, body size): how long a submitted task may measure. Pure."""

from __future__ import annotations

DEFAULT_MAX_SECONDS = 7 * 24 * 3600.0  # the longest a submitted task may measure: a week
MAX_PAYLOAD = 1 << 30  # bytes: past any payload a test may have (a filter's bound)
# a request's head, as HTTP servers bound it (nginx: 8 KiB a line): the target (path and
# query) is answered 414 beyond it, the header fields together 431
MAX_TARGET = 8 * 1024
MAX_HEADERS = 16 * 1024


def planned_seconds(tests) -> float:
    """How long a run's tests measure: each test's duration times its repeats (setup and
    teardown come on top). Pure."""
    return float(sum(t.duration * t.repeats for t in tests))
