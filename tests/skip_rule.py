"""The one rule for skips: where every test must run (CI=true, or K8SDDS_REQUIRE_E2E=1), a
skipped test is a failed test, with the reason it gave. Elsewhere a test that cannot run on
this machine (no root, no namespaces, no kube-apiserver) skips and says why.

A pytest plugin (loaded by conftest.py), so that its own test can load it alone."""

from __future__ import annotations

import os

import pytest


def required() -> bool:
    return os.environ.get("CI") == "true" or os.environ.get("K8SDDS_REQUIRE_E2E") == "1"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and required() and not hasattr(report, "wasxfail"):
        reason = (report.longrepr[2] if isinstance(report.longrepr, tuple)
                  else str(report.longrepr))
        report.outcome = "failed"
        report.longrepr = f"skipped where every test must run (CI): {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    if report.skipped and required():
        report.outcome = "failed"
        report.longrepr = f"module skipped where every test must run (CI): {report.longrepr}"
