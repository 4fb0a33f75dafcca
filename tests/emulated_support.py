"""Shared helpers for tests on the real emulated cluster (root + network namespaces)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest


def missing() -> str | None:
    """Why end-to-end tests on namespaces cannot run here, or None."""
    if sys.platform != "linux":
        return "needs Linux network namespaces"
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    for tool in ("ip", "bridge", "ddsperf"):
        if shutil.which(tool) is None:
            return f"needs {tool} (make test installs it)"
    probe = subprocess.run(["ip", "netns", "add", "k8sdds-probe"], capture_output=True)
    subprocess.run(["ip", "netns", "del", "k8sdds-probe"], capture_output=True)
    if probe.returncode != 0:
        return f"cannot create a network namespace: {probe.stderr.decode().strip()}"
    return None


def requires_namespaces():
    """Skip with the reason where namespaces cannot be made (in CI a skip fails:
    tests/skip_rule.py)."""
    reason = missing()
    return pytest.mark.skipif(reason is not None, reason=reason or "")


def namespaces(prefix: str) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines()
            if line.split() and line.split()[0].startswith(prefix + "-")]


def root_links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def cli(*args: str, env: dict, timeout: float = 300, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "k8sdds", *args], capture_output=True,
                          text=True, env=env, timeout=timeout, **kw)


def alive(pid: int) -> bool:
    """True while the process runs (a zombie whose parent is gone does not count)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
