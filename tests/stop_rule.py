"""A stop stops everything, and takes down what the tests brought up (a pytest plugin: the
suite loads it, and a test loads it in a session of its own).

- SIGTERM as Ctrl-C (KeyboardInterrupt): the session, and each worker, tears down what its
  fixtures brought up (testbeds, clusters, ARM machines) instead of dying on the spot;
  `.ci/builds` passes a SIGTERM it gets on to the tests; a SIGTERM after the first is the
  same stop, ignored.
- A worker's teardown is bounded by pytest-xdist and execnet, not by what it takes down:
  after a stop the main process tells each worker to exit, execnet interrupts it again 5 s
  later and ends it 10 s after that (`os._exit`), in the middle of a testbed cluster's
  teardown, which was left running so. The main process therefore takes down, once its
  workers are gone, every testbed still recorded under the session's folders."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

DOWN_TIMEOUT = 180  # seconds for one testbed's `testbed down` (a cluster's included)


def sigterm_as_ctrl_c() -> None:
    """A SIGTERM raises KeyboardInterrupt, as Ctrl-C does, once: a SIGTERM to the whole
    group reaches the tests twice (itself, and passed on by .ci/builds), and the second must
    not cut short the teardown the first began (a second Ctrl-C still does)."""
    def interrupted(signum, frame) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupted)


def pytest_configure(config) -> None:
    sigterm_as_ctrl_c()


def left_behind(root: Path) -> list[tuple[Path, str]]:
    """The testbeds still recorded under `root`: (state folder, name), a testbed's record
    being its `<name>.json` (a state with its spec and namespaces) beside its `<name>.lock`."""
    found = []
    for lock in root.rglob("*.lock"):
        try:
            state = json.loads(lock.with_suffix(".json").read_text())
        except (OSError, ValueError):
            continue
        if isinstance(state, dict) and {"spec", "namespaces"} <= state.keys():
            found.append((lock.parent, lock.stem))
    return sorted(found)


def pytest_unconfigure(config) -> None:
    """In the main process, at the end (its workers gone): each testbed left under the
    session's folder taken down, as `k8sdds testbed down` does it, said on stderr."""
    if hasattr(config, "workerinput"):
        return  # a worker: the main process sweeps once they are all gone
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is None:
        return
    try:
        root = factory.getbasetemp()
    except (OSError, ValueError):
        return
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut this short
    for folder, name in left_behind(root):
        print(f"taking down testbed {name} left by a stopped test ({folder})",
              file=sys.stderr)
        subprocess.run([sys.executable, "-m", "k8sdds", "testbed", "down", "--testbed", name],
                       env={**os.environ, "K8SDDS_STATE_DIR": str(folder)},
                       stdout=subprocess.DEVNULL, timeout=DOWN_TIMEOUT, check=False)
