"""A local role's process waited for and reaped with the CPU it used: os.wait4's resource
usage, the user and system seconds of the process and all its threads over its life, as the
kernel accounted them (on a kernel without IRQ time accounting, the softirq work done in its
context is its system time). Waiting is on a pidfd: no polling loop steals CPU from the
roles it waits for."""

from __future__ import annotations

import os
import select
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class CpuUse:
    """What a process used over its life, in CPU seconds."""

    user_s: float
    system_s: float


def reap(proc: subprocess.Popen, timeout: float | None = None
         ) -> tuple[int | None, CpuUse | None]:
    """Wait up to `timeout` s (None: as long as it runs) for `proc` to end, and reap it:
    its exit status (as Popen's returncode) and what it used; (None, None) if it is still
    running. A process reaped before (by this or by Popen) has no usage left to read."""
    if proc.returncode is not None:
        return proc.returncode, None
    if timeout is not None:
        try:
            fd = os.pidfd_open(proc.pid)
        except ProcessLookupError:  # reaped by someone else: Popen says how it ended
            return proc.wait(), None
        try:
            poller = select.poll()  # not select(): any descriptor number
            poller.register(fd, select.POLLIN)
            if not poller.poll(max(0, round(timeout * 1000))):
                return None, None
        finally:
            os.close(fd)
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    except ChildProcessError:
        return proc.wait(), None
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, CpuUse(usage.ru_utime, usage.ru_stime)
