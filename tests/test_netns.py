"""The namespace helpers on a real namespace: kill_all's filters by command name."""

from __future__ import annotations

import os
import subprocess

import pytest

from k8sdds.testbed import netns

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


def test_listening_reads_the_process_namespace():
    ns = f"kdlis{os.getpid() % 1000}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        server = subprocess.Popen(netns.exec_argv(ns, [
            "python3", "-c", "import socket,time; s=socket.socket(); "
            "s.bind(('127.0.0.1', 5201)); s.listen(); time.sleep(30)"]))
        try:
            for _ in range(200):
                if netns.listening(server.pid, 5201):
                    break
                subprocess.run(["sleep", "0.02"])
            assert netns.listening(server.pid, 5201)
            assert not netns.listening(server.pid, 5202)
            assert not netns.listening(os.getpid(), 5201)  # not in this namespace
        finally:
            server.kill()
            server.wait()
    finally:
        subprocess.run(["ip", "netns", "del", ns])
