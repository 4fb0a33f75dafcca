"""Shared helpers for tests on the real emulated cluster (root + network namespaces)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

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
    name = f"k8sdds-probe{os.getpid()}"  # unique: make test runs two test processes at once
    probe = subprocess.run(["ip", "netns", "add", name], capture_output=True)
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
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


# the links SSH test hosts put in this namespace (tests/ssh_support.py: `<prefix>br`, and
# `<prefix>v<i>`; an ARM test machine's tap, k8sdds.vm.machine.tap_name: `kvm<10 hex>`),
# made and removed by a test that may run beside the one looking
SSH_HOST_LINK = re.compile(r"^([a-z]{2,5}\d{1,3}(br|v\d{1,2})|kvm[0-9a-f]{10})$")


def root_links(own: str = "") -> set[str]:
    """This namespace's links, without those of SSH test hosts other than `own`'s (emulated
    testbeds put none here: a link here after a testbed is down is a leak)."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}
    return {n for n in names if not SSH_HOST_LINK.match(n) or (own and n.startswith(own))}


def host_mounts(own: str = "") -> set[str]:
    """This mount namespace's mount points, without the network namespaces held by other
    tests (`make test` runs two test processes at once; `ip netns add` mounts each one under
    /run/netns; those whose name starts with `own` are kept) and without what the other test
    process mounts in its own directories (a small disk of the storage tests)."""
    points = {line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()}
    return {p for p in points
            if not (p.startswith("/run/netns/") and not (own and p[11:].startswith(own)))
            and not _other_workers(p)}


def _other_workers(point: str) -> bool:
    """Whether `point` lies in the directories of another pytest-xdist process."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    return (worker is not None and "/pytest-of-" in point and "/popen-gw" in point
            and f"/popen-{worker}/" not in point + "/")


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


def interval_fill(df, test: int) -> list[float]:
    """The one-latency-definition identity on a real run (results.csv as a DataFrame): a
    latency test has one ping in flight, so the round trips a line counted times their mean
    round trip fill the line's interval. ddsperf, k8sdds-zenoh and k8sdds-mqtt print a line a
    second (the interval), so per line of `test`'s publisher from its second second on (the
    first holds discovery): roundtrips x latency_us_mean / 1 s. About 1.0 when the stored
    figure is the round trip; 0.5 if it were half of it."""
    out = []
    pub = df[(df.test == test) & (df.role == "pub") & (df.kind == "sample") & (df.t >= 1.9)]
    for _, rep in pub.groupby("repeat"):
        trips = rep[rep.metric == "roundtrips"].set_index("t").value
        means = rep[rep.metric == "latency_us_mean"].set_index("t").value
        out += [trips[t] * means[t] / 1e6 for t in sorted(set(trips.index) & set(means.index))
                if trips[t] > 0]
    return out
