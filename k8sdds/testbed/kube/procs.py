"""The processes of a testbed cluster: started, watched into their namespaces, stopped."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from k8sdds.errors import TestbedError


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_own_mounts(holder: subprocess.Popen, timeout: float = 10) -> None:
    """Until the holder (nsenter, then unshare, exec'ing each other) is in a mount namespace
    of its own: its mounts must not land in this machine's."""
    ours = os.readlink("/proc/self/ns/mnt")
    deadline = time.monotonic() + timeout
    while True:
        if holder.poll() is not None:
            raise TestbedError(f"the mount namespace holder exited ({holder.returncode})")
        try:
            if os.readlink(f"/proc/{holder.pid}/ns/mnt") != ours:
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise TestbedError(f"no private mount namespace within {timeout:g} s")
        time.sleep(0.01)  # an exec in another process: nothing to wait on but its /proc


def stop(pids: list[int], grace: float = 5.0) -> None:
    """SIGTERM to every process group, SIGKILL to what is left after `grace` s; returns once
    no process of the groups is left (a kubelet that outlived its nsenter leader could still
    write into a directory about to be removed)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.killpg(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _members(pids):
            time.sleep(0.05)  # processes we signalled: polled until they are gone


def _members(groups: list[int]) -> list[int]:
    """The live processes (not zombies) of the process groups `groups`."""
    wanted, out = {str(g) for g in groups}, []
    for pid in _pids():
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 2 and fields[2] in wanted and fields[0] != "Z":
            out.append(pid)
    return out


def mount_namespace(pid: int) -> str | None:
    """The mount namespace `pid` is in (as /proc names it), or None when it is gone."""
    try:
        return os.readlink(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None


@contextmanager
def pinned(pids: Iterable[int], among: set[str] | None = None) -> Iterator[set[str]]:
    """The mount namespaces `pids` (their holders) are in, those `among` only when given
    (the ones recorded at bring-up), each held open until the block ends. /proc names a
    namespace by a number the kernel gives again, lowest free first, as soon as the
    namespace ends: a namespace another program made a moment later (an image build's
    `unshare --mount`) would be taken for a node's, and its processes killed. A namespace
    with an open file does not end, so its number stays ours."""
    held: dict[str, int] = {}
    try:
        for pid in pids:
            try:
                fd = os.open(f"/proc/{pid}/ns/mnt", os.O_RDONLY)
            except OSError:  # gone: its namespace, if it lives on, is no longer known as ours
                continue
            name = os.readlink(f"/proc/self/fd/{fd}")
            if (among is None or name in among) and name not in held:
                held[name] = fd
            else:
                os.close(fd)
        yield set(held)
    finally:
        for fd in held.values():
            os.close(fd)


def _pids() -> Iterator[int]:
    """Every process /proc shows now."""
    return (int(e.name) for e in os.scandir("/proc") if e.name.isdigit())


def in_namespaces(namespaces: set[str], spare: int | None = None) -> list[int]:
    """Every process in one of these mount namespaces (but `spare`)."""
    return [pid for pid in _pids() if pid != spare and mount_namespace(pid) in namespaces]


KILL_WAIT = 5.0  # seconds for SIGKILLed processes to be gone before their files are removed


def referring(paths: list[Path]) -> list[int]:
    """Every process whose command line names one of `paths` or what is in them (a node's
    kubelet names its root and volume-plugins folders), this one and its parent aside; a
    path of another testbed whose name begins with this one's is not one of them."""
    wanted = [str(p).encode() + end for p in paths for end in (b"/", b"\0")]
    mine = {os.getpid(), os.getppid()}
    found = []
    for pid in _pids():
        try:
            line = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if pid not in mine and any(w in line for w in wanted):
            found.append(pid)
    return found


def _kill_until_gone(find: Callable[[], list[int]]) -> None:
    """SIGKILL what `find` finds and wait (KILL_WAIT s at most) until it finds nothing: a
    signal is sent, not yet taken, and a process killed as it starts still makes its
    folders (a kubelet's volume-plugins folder came back after `down` removed the files)."""
    for pid in find():
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + KILL_WAIT
    while find() and time.monotonic() < deadline:
        time.sleep(0.05)  # processes we signalled: polled until they are gone


def kill_referring(paths: list[Path]) -> None:
    """What still names `paths`, killed and gone: a kubelet a killed `up` started but had
    not yet recorded still writes into its folders."""
    _kill_until_gone(lambda: referring(paths))


def kill_namespaces(namespaces: set[str]) -> None:
    """SIGKILL what is left in a node's mount namespace, and wait until it is gone:
    containerd's shims daemonize into sessions of their own, so stopping the daemons'
    process groups leaves them behind. The namespaces must be `pinned`."""
    _kill_until_gone(lambda: in_namespaces(namespaces))
