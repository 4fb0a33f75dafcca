"""The namespace helpers on a real namespace: kill_all's filters by command name."""

from __future__ import annotations

import os
import subprocess

import pytest

from k8sdds.cluster import netns

from .emulated_support import alive, requires_namespaces

pytestmark = [pytest.mark.emulated, requires_namespaces()]


def test_kill_all_spares_and_selects_by_command_name():
    ns = f"kdnet{os.getpid() % 1000}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        sleeper = subprocess.Popen(netns.exec_argv(ns, ["sleep", "60"]))
        other = subprocess.Popen(netns.exec_argv(ns, ["tail", "-f", "/dev/null"]))
        for _ in range(50):
            if {netns.command(p) for p in netns.pids(ns)} >= {"sleep", "tail"}:
                break
            subprocess.run(["sleep", "0.05"])
        netns.kill_all(ns, grace=0.5, spare="sleep")  # everything but sleep
        other.wait(5)
        assert alive(sleeper.pid) and not alive(other.pid)
        netns.kill_all(ns, grace=0.5, comm="sleep")
        sleeper.wait(5)
        assert netns.pids(ns) == []
    finally:
        subprocess.run(["ip", "netns", "del", ns])
