"""The order a run's repeats run in (`k8sdds run --order`): a registry of pure functions
from the pending repeats of each test to one sequence.

`tests` runs each test's repeats in a row, as K8sDDS did. `rounds` runs the first repeat of
every test, then the second of every test, and so on: on a machine whose speed drifts over
minutes (a shared VM; README, Fidelity), a slow stretch then falls on every test alike
instead of on one test's repeats (the idea of Google Benchmark's random interleaving), so
drift between blocks of repeats does not pass for a datapath's cost. It is the default; with
one repeat a test the two orders are the same. It switches datapaths more often: the
emulated backend rewires the testbed at each switch, which takes a second or two and may cost
the next repeat a little (docs/explanation/fidelity.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from k8sdds.model import Test

Pending = Sequence[tuple[Test, Sequence[int]]]  # each test and its repeats not yet run


def by_tests(pending: Pending) -> list[tuple[Test, int]]:
    """Each test's repeats in a row, the tests in schedule order."""
    return [(test, rep) for test, reps in pending for rep in reps]


def by_rounds(pending: Pending) -> list[tuple[Test, int]]:
    """Round r of every test (in schedule order), then round r + 1: a test's repeats are
    taken in their own order, so a resumed run goes on where each test stopped."""
    rounds = max((len(reps) for _, reps in pending), default=0)
    return [(test, reps[r]) for r in range(rounds) for test, reps in pending if r < len(reps)]


ORDERS: dict[str, Callable[[Pending], list[tuple[Test, int]]]] = {
    "tests": by_tests,
    "rounds": by_rounds,
}
DEFAULT = "rounds"  # a new run's
BEFORE = "tests"  # what a run whose manifest names no order ran in (k8sdds before --order)
