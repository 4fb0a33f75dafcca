"""Thin wrappers over iproute2 for network namespaces; every command is an argv list."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Sequence

from k8sdds.errors import TestbedError

CLONE_NEWNET = 0x40000000  # setns(2): a network namespace
# commands not in iproute2, and their Debian package
PACKAGES = {"nft": "nftables", "iptables-restore": "iptables", "ipset": "ipset"}


def run(argv: Sequence[str], check: bool = True, stdin: str | None = None
        ) -> subprocess.CompletedProcess:
    """Run a command; raise TestbedError with its stderr when it fails and `check`."""
    try:
        proc = subprocess.run(list(argv), capture_output=True, text=True, timeout=60,
                              input=stdin)
    except FileNotFoundError:
        raise TestbedError(f"{argv[0]} is not installed (apt-get install "
                           f"{PACKAGES.get(argv[0], 'iproute2')})") from None
    if check and proc.returncode != 0:
        raise TestbedError(f"`{' '.join(argv)}` failed: {proc.stderr.strip() or proc.stdout}")
    return proc



def enter(netns: str) -> None:
    """Move this process's network namespace to `netns` (a /run/netns path): for a process
    of k8sdds' own that must open its sockets inside a testbed namespace."""
    fd = os.open(netns, os.O_RDONLY)
    try:
        if ctypes.CDLL(None, use_errno=True).setns(fd, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {netns}")
    finally:
        os.close(fd)


def ip(*args: str, ns: str | None = None, check: bool = True) -> subprocess.CompletedProcess:
    """`ip [-n ns] args...`"""
    return run(["ip", *(["-n", ns] if ns else []), *args], check=check)


def exec_argv(ns: str, argv: Sequence[str], hostname: str | None = None) -> list[str]:
    """The argv that runs `argv` inside namespace `ns`, with its own `hostname` if given
    (a UTS namespace; the name and argv are passed as arguments, never as shell text)."""
    if hostname:
        argv = ["unshare", "--uts", "sh", "-c", 'hostname "$0" && exec "$@"', hostname, *argv]
    return ["ip", "netns", "exec", ns, *argv]


def package_env() -> dict[str, str]:
    """The environment a module of k8sdds run in a namespace needs (`python -m
    k8sdds....`, as the multicast probe and the counter sampler are): this one, with the
    folder holding the package on PYTHONPATH."""
    import os
    from pathlib import Path

    return {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}


def sysctl(ns: str, key: str, value: str) -> None:
    run(exec_argv(ns, ["sysctl", "-q", "-w", f"{key}={value}"]))


def nft(ns: str, ruleset: str) -> None:
    """Load an nftables ruleset (given on stdin, never through a shell) in `ns`."""
    run(exec_argv(ns, ["nft", "-f", "-"]), stdin=ruleset)


def list_namespaces() -> list[str]:
    out = run(["ip", "netns", "list"], check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def pids(ns: str) -> list[int]:
    out = run(["ip", "netns", "pids", ns], check=False).stdout
    return [int(p) for p in out.split() if p.isdigit()]


def command(pid: int) -> str:
    """The command name of a process ("" once it is gone)."""
    try:
        with open(f"/proc/{pid}/comm") as fh:
            return fh.read().strip()
    except OSError:
        return ""


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (0 once it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def listening(pid: int, port: int) -> bool:
    """Whether a TCP socket listens on `port` in the network namespace of process `pid`
    (read from /proc, so nothing is started to look)."""
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}") as fh:
                next(fh, None)
                for line in fh:
                    fields = line.split()
                    # local address "ADDR:PORT" in hex; state 0A is LISTEN
                    if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        return True
        except OSError:
            return False
    return False


def softirq_seconds() -> float:
    """Seconds all CPUs have spent in softirq (packet processing), from /proc/stat."""
    with open("/proc/stat") as fh:
        fields = fh.readline().split()  # cpu user nice system idle iowait irq softirq ...
    return int(fields[7]) / os.sysconf("SC_CLK_TCK")


def kill_all(ns: str, grace: float = 1.0, comm: str | None = None,
             spare: str | None = None) -> None:
    """SIGTERM every process in `ns` (only those named `comm`, or all but those named
    `spare`), then SIGKILL what is left after `grace` seconds."""
    def targets() -> list[int]:
        return [p for p in pids(ns) if (comm is None or command(p) == comm)
                and (spare is None or command(p) != spare)]

    for sig in (signal.SIGTERM, signal.SIGKILL):
        left = targets()
        if not left:
            return
        for pid in left:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and targets():
            time.sleep(0.05)


def delete(ns: str) -> None:
    """Kill the processes of `ns` and delete it (its interfaces go with it)."""
    kill_all(ns)
    ip("netns", "del", ns, check=False)
