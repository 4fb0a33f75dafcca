"""A CPU quota per node: a cgroup holding every process of the node and its pods.

cgroup v2 (`cpu.max`) where the unified hierarchy has the cpu controller, else cgroup v1
(`cpu.cfs_quota_us`), detected, not assumed.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from k8sdds.errors import TestbedError

PERIOD_US = 100_000
V2_ROOT = Path("/sys/fs/cgroup")
V1_ROOTS = (Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup/cpu,cpuacct"))


def hierarchy() -> tuple[str, Path] | tuple[None, str]:
    """("v2", root) or ("v1", root) of the cpu controller, or (None, why not)."""
    controllers = V2_ROOT / "cgroup.controllers"
    if controllers.exists() and "cpu" in controllers.read_text().split():
        return "v2", V2_ROOT
    for root in V1_ROOTS:
        if (root / "cpu.cfs_quota_us").exists():
            return "v1", root
    return None, "no cgroup cpu controller (neither v2 cpu.max nor v1 cpu.cfs_quota_us)"


def create(parts: list[str], cpus: float) -> str:
    """Make the cgroup `parts` (e.g. k8sdds/<testbed>/<node>) limited to `cpus` CPUs."""
    kind, root = hierarchy()
    if kind is None:
        raise TestbedError(f"cannot limit CPU: {root}")
    path = Path(root)
    try:
        for part in parts:
            if kind == "v2":  # let the children of each level use the cpu controller
                (path / "cgroup.subtree_control").write_text("+cpu")
            path = path / part
            path.mkdir(exist_ok=True)
        quota = max(1000, int(cpus * PERIOD_US))
        if kind == "v2":
            (path / "cpu.max").write_text(f"{quota} {PERIOD_US}")
        else:
            (path / "cpu.cfs_period_us").write_text(str(PERIOD_US))
            (path / "cpu.cfs_quota_us").write_text(str(quota))
    except OSError as exc:
        raise TestbedError(f"cannot set up the cgroup {path}: {exc.strerror}") from None
    return str(path)


def join(path: str, pid: int | None = None) -> None:
    """Move process `pid` (default: this one) into the cgroup."""
    with open(os.path.join(path, "cgroup.procs"), "w") as fh:
        fh.write(str(pid or os.getpid()))


def remove(path: str, levels: int = 3) -> None:
    """Remove the cgroup and its parents that are left empty (up to `levels` levels)."""
    current = Path(path)
    for _ in range(levels):
        try:
            current.rmdir()
        except OSError:
            return
        current = current.parent


# ---- one path in every cgroup v1 hierarchy (a kubelet's cgroupRoot) ----------------

def v1_hierarchies() -> list[Path]:
    """The cgroup v1 hierarchies mounted under /sys/fs/cgroup."""
    out = []
    for line in Path("/proc/self/mounts").read_text().splitlines():
        _, where, kind, *_ = line.split()
        if kind == "cgroup" and where.startswith("/sys/fs/cgroup/"):
            out.append(Path(where))
    return out


def dirs(root: str) -> list[Path]:
    """`root` and its ancestors, in every hierarchy, top first."""
    out = []
    for h in v1_hierarchies():
        parts = Path(root.lstrip("/")).parts
        out += [h.joinpath(*parts[:i]) for i in range(1, len(parts) + 1)]
    return out


def make_everywhere(root: str) -> None:
    """`root` in every cgroup v1 hierarchy (cpuset copied from its parents), as a
    kubelet's cgroupRoot must be."""
    for p in dirs(root):
        if not p.exists():
            p.mkdir()
            if p.relative_to("/sys/fs/cgroup").parts[0] == "cpuset":
                for f in ("cpuset.cpus", "cpuset.mems"):
                    (p / f).write_text((p.parent / f).read_text())


def remove_everywhere(root: str) -> None:
    """Kill what is left under `root` (containers outlive their shims), then remove it and
    what the kubelet made in it, deepest first."""
    for h in v1_hierarchies():
        top = h / root.lstrip("/")
        if not top.exists():
            continue
        for _ in range(50):
            pids = [int(p) for f in top.rglob("cgroup.procs") for p in f.read_text().split()]
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)  # the kernel empties cgroup.procs as they die: no event
        for d in sorted((p for p in [top, *top.rglob("*")] if p.is_dir()),
                        key=lambda p: -len(p.parts)):
            try:
                d.rmdir()
            except OSError:
                pass
