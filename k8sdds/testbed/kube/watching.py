"""Watching a testbed cluster's objects until the caller's condition holds, bounded in time
(never a sleep): a watch that breaks (the API server restarting, a connection timing out) is
opened again while time is left."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any


def watched(list_call: Callable[..., Any], *args: Any, timeout: float,
            **kwargs: Any) -> Iterator[Any]:
    """Each object `list_call` (a list operation of the kubernetes client) streams, until
    `timeout` seconds have passed; the caller stops iterating once its condition holds."""
    from kubernetes import watch
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        w = watch.Watch()
        try:
            for event in w.stream(list_call, *args, timeout_seconds=max(1, int(left)),
                                  _request_timeout=left + 10, **kwargs):
                yield event["object"]
        except (ApiException, HTTPError):
            continue  # the watch broke: watch again while time is left
        finally:
            w.stop()
