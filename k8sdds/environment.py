"""Metadata about the machine and tools, captured in every manifest for reproducibility."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from importlib import metadata

from k8sdds import __version__


def _first(path: str, key: str, sep: str = ":") -> str:
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(key):
                    return line.split(sep, 1)[1].strip()
    except OSError:
        pass
    return "unknown"


def _tool(argv: list[str]) -> str:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        return (out.stdout or out.stderr).strip().splitlines()[0]
    except (OSError, subprocess.TimeoutExpired, IndexError):
        return "unknown"


def capture() -> dict:
    """Kernel, CPU, memory, Python and library versions of this machine."""
    uname = platform.uname()
    packages = {}
    for name in ("typer", "rich", "pandas", "matplotlib", "seaborn"):
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = "absent"
    return {
        "hostname": socket.gethostname(),
        "kernel": uname.release,
        "os": _first("/etc/os-release", "PRETTY_NAME", "=").strip('"'),
        "arch": uname.machine,  # uname -m
        "cpu_model": _first("/proc/cpuinfo", "model name"),
        "cpu_count": os.cpu_count(),
        "memory": _first("/proc/meminfo", "MemTotal"),
        "python": sys.version.split()[0],
        "k8sdds": __version__,
        "packages": packages,
        "iproute2": _tool(["ip", "-V"]),
    }
