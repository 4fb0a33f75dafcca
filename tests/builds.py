"""What a test needs built, and the wait for it: `make test` runs the builds beside the tests
(.ci/builds, which names the artefacts and writes each one's outcome into $K8SDDS_BUILDS), so
a test says what it needs and waits for that only; a test that needs nothing runs at once.

    pytestmark = needs("k8s-amd64", why=kube_support.missing)

waits, before the test's fixtures, for the Kubernetes parts, then asks `why` (a function
returning why the test cannot run here, or None) and skips with its reason, as a skipif
did when the reason was read at import. `wait(...)` does the same inside a test, for a step
that needs more than its start (the Pi tutorial's image of the engines). A build that failed
fails the test with that build's log; without $K8SDDS_BUILDS (pytest run by hand on a filled
cache) nothing is waited for."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from importlib.machinery import SourceFileLoader
from importlib.util import module_from_spec, spec_from_loader
from pathlib import Path

import pytest

BUILDS = Path(__file__).resolve().parent.parent / ".ci" / "builds"

def _registry() -> dict:
    """.ci/builds' artefacts by name (a script without .py: loaded by path)."""
    loader = SourceFileLoader("ci_builds", str(BUILDS))
    module = module_from_spec(spec_from_loader("ci_builds", loader))
    sys.modules["ci_builds"] = module  # its dataclass looks itself up there
    loader.exec_module(module)
    return module.NAMES


ARTEFACTS = _registry()
# what an engine image carries, for this machine and for the Pis (.ci/builds' names): a test
# whose image must carry them waits for all, so that one image is built, not one a build
ENGINES = ("mqtt-amd64", "zenoh-amd64", "perftest-amd64", "discovery-amd64")
ARM_ENGINES = ("mqtt-arm64", "mqtt-armhf", "zenoh-arm64", "perftest-arm64", "perftest-armhf",
               "discovery-arm64", "discovery-armhf")
LONGEST = 2 * 3600.0  # a lane that never ends: the waiting test fails after this


def needs(*names: str, why: Callable[[], str | None] | None = None) -> pytest.MarkDecorator:
    """The mark of a test (or a module's pytestmark) that needs `names` built."""
    unknown = [n for n in names if n not in ARTEFACTS]
    if unknown:
        raise ValueError(f"no artefact {', '.join(unknown)} in .ci/builds "
                         f"(it builds {', '.join(ARTEFACTS)})")
    return pytest.mark.needs(*names, why=why)


def _tail(log: Path, lines: int = 40) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError as exc:
        return f"(no log: {exc.strerror})"


def wait(*names: str) -> float:
    """Wait until each of `names` is built; the seconds waited. A failed build fails the
    calling test with its log's last lines."""
    folder = os.environ.get("K8SDDS_BUILDS")
    if not folder:
        return 0.0
    started = time.monotonic()
    for name in names:
        if name not in ARTEFACTS:
            raise ValueError(f"no artefact {name} in .ci/builds")
        where = Path(folder)
        while not (where / f"{name}.ok").exists():
            if (where / f"{name}.failed").exists():
                pytest.fail(f"the build of {name} failed ({where / name}.log):\n"
                            f"{_tail(where / f'{name}.log')}", pytrace=False)
            if (where / "all.done").exists():
                pytest.fail(f"{name} was never built: .ci/builds ended without it",
                            pytrace=False)
            if time.monotonic() - started > LONGEST:
                pytest.fail(f"{name} not built after {LONGEST:.0f} s", pytrace=False)
            time.sleep(1)
    return time.monotonic() - started


WAIT = "wait"  # a timeline line's first field: a test that waited for builds (.ci/phase)


def record_wait(test: str, names: str, waited: float) -> None:
    """Add to `make test`'s timeline ($K8SDDS_TIMELINE, where set) that `test` waited
    `waited` seconds for the builds `names`: .ci/phase prints the longest waits, the run's
    critical path."""
    timeline = os.environ.get("K8SDDS_TIMELINE")
    if not timeline:
        return
    line = f"{WAIT}\t{test}\t{waited:.1f}\t{names}\n"
    with open(timeline, "a", encoding="utf-8") as out:  # one short append: whole lines
        out.write(line)


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "needs(*artefacts, why=None): the test waits for "
                            "those of .ci/builds' artefacts (tests/builds.py)")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item) -> None:
    marks = list(item.iter_markers("needs"))
    waited = wait(*dict.fromkeys(n for mark in reversed(marks) for n in mark.args))
    if waited >= 1:
        names = ", ".join(dict.fromkeys(n for mark in marks for n in mark.args))
        item.add_report_section("setup", "builds", f"waited {waited:.0f} s for {names}")
        record_wait(item.nodeid, names, waited)
    for mark in marks:
        why = mark.kwargs.get("why")
        reason = why() if why else None
        if reason:
            pytest.skip(reason)


def pending() -> set[str]:
    """The artefacts still to build when the tests started (.ci/builds says which, the same
    for every test process; none when pytest runs by hand)."""
    return {n for n in os.environ.get("K8SDDS_BUILDS_PENDING", "").split(",") if n}


def waits(item) -> bool:
    """Whether a test needs a build that was still pending when the tests started
    (conftest runs those after the others)."""
    still = pending()
    return bool(still) and any(n in still for mark in item.iter_markers("needs")
                               for n in mark.args)
