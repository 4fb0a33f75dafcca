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

PERIOD_US = 10_000  # short: a throttled node stalls for at most a period minus its quota
MIN_QUOTA_US = 1_000  # the kernel's smallest quota


def period_us(cpus: float) -> int:
    """The enforcement period for a budget of `cpus`: PERIOD_US, longer only where the
    quota would fall under the kernel's minimum."""
    return max(PERIOD_US, -(-MIN_QUOTA_US * 1000 // max(1, int(cpus * 1000))))


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


V1_CPUSET = Path("/sys/fs/cgroup/cpuset")
V1_CPUACCT = Path("/sys/fs/cgroup/cpuacct")  # apart from cpu on some v1 systems (this one)


def _cpuset_twin(path: Path) -> Path | None:
    """The cgroup v1 cpuset directory beside cpu cgroup `path` (None on v2 or without one)."""
    for root in V1_ROOTS:
        if path.is_relative_to(root) and (V1_CPUSET / "cpuset.cpus").exists():
            return V1_CPUSET / path.relative_to(root)
    return None


def _cpuacct_twin(path: Path) -> Path | None:
    """The cgroup v1 cpuacct directory beside cpu cgroup `path`, where cpuacct is a
    hierarchy of its own (None on v2, or where cpu and cpuacct are mounted together)."""
    for root in V1_ROOTS:
        if path.is_relative_to(root) and _separate_cpuacct():
            return V1_CPUACCT / path.relative_to(root)
    return None


def _separate_cpuacct() -> bool:
    return (V1_CPUACCT / "cpuacct.usage").exists() and \
        not (V1_CPUACCT / "cpu.cfs_quota_us").exists()


def _new_cpuset(path: Path) -> None:
    """Make v1 cpuset `path`, with its parent's CPUs and memory nodes (a new one has none)."""
    path.mkdir()
    for f in ("cpuset.cpus", "cpuset.mems"):
        (path / f).write_text((path.parent / f).read_text())


def _make_cpuset(parts: list[str], pin: int) -> None:
    path = V1_CPUSET
    for part in parts:
        path = path / part
        if not path.exists():
            _new_cpuset(path)
    (path / "cpuset.cpus").write_text(str(pin))


def create(parts: list[str], cpus: float, pin: int | None = None) -> str:
    """Make the cgroup `parts` (e.g. k8sdds/<testbed>/<node>) limited to `cpus` CPUs,
    its processes kept on CPU `pin` if given (one CPU's share of the budget, not a slice of
    each CPU, which makes the rate steady: runtime is handed to CPUs in slices of 5 ms),
    and their CPU counted (`cpu_seconds`)."""
    kind, root = hierarchy()
    if kind is None:
        raise TestbedError(f"cannot limit CPU: {root}")
    path = Path(root)
    try:
        for part in parts:
            if kind == "v2":  # let the children of each level use the controllers
                (path / "cgroup.subtree_control").write_text("+cpu")
                if pin is not None:
                    try:  # pinning is for steadiness: without the controller, none
                        (path / "cgroup.subtree_control").write_text("+cpuset")
                    except OSError:
                        pin = None
            path = path / part
            path.mkdir(exist_ok=True)
        if pin is not None:
            if kind == "v2":
                (path / "cpuset.cpus").write_text(str(pin))
            elif _cpuset_twin(path) is not None:
                _make_cpuset(parts, pin)
        limit(str(path), cpus)
        _account(path)
    except OSError as exc:
        raise TestbedError(f"cannot set up the cgroup {path}: {exc.strerror}") from None
    return str(path)


def limit(path: str, cpus: float | None) -> None:
    """Set the budget of cgroup `path` to `cpus` CPUs (None: no limit)."""
    where = Path(path)
    period = period_us(cpus) if cpus is not None else PERIOD_US
    quota = max(MIN_QUOTA_US, round(cpus * period)) if cpus is not None else None
    if (where / "cpu.max").exists():  # v2
        (where / "cpu.max").write_text(f"{quota} {period}" if quota else "max")
        return
    (where / "cpu.cfs_quota_us").write_text("-1")  # a period under the old quota fails
    if quota:
        (where / "cpu.cfs_period_us").write_text(str(period))
        (where / "cpu.cfs_quota_us").write_text(str(quota))


def join(path: str, pid: int | None = None) -> None:
    """Move process `pid` (default: this one; a kernel thread too) into the cgroup (and its
    v1 cpuset and cpuacct twins, where they were made)."""
    twins = (_cpuset_twin(Path(path)), _cpuacct_twin(Path(path)))
    for where in (Path(path), *(t for t in twins if t and t.exists())):
        with open(where / "cgroup.procs", "w") as fh:
            fh.write(str(pid or os.getpid()))


def _account(path: Path) -> None:
    """Make the v1 cpuacct twin of cpu cgroup `path`, where cpuacct is mounted apart: the
    CPU of its tasks is counted there (`cpu_seconds`)."""
    twin = _cpuacct_twin(path)
    if twin is not None:
        _make_dirs(V1_CPUACCT, twin)


def _make_dirs(top: Path, path: Path) -> None:
    for p in reversed([p for p in (path, *path.parents) if p.is_relative_to(top) and p != top
                       and not p.exists()]):
        p.mkdir()


def counter(parts: list[str]) -> str:
    """A cgroup `parts` that only counts the CPU of its tasks, limiting nothing and
    changing no scheduling where the system allows: v1's cpuacct hierarchy where it is
    mounted apart from cpu, else a v2 cgroup (its `cpu.stat` counts without the cpu
    controller); a joint v1 `cpu,cpuacct` mount counts in a cpu cgroup with no quota."""
    if _separate_cpuacct():
        top = V1_CPUACCT
    elif (V2_ROOT / "cgroup.controllers").exists():
        top = V2_ROOT
    elif (V1_ROOTS[1] / "cpuacct.usage").exists():
        top = V1_ROOTS[1]
    else:
        raise TestbedError("no cgroup counts CPU here (no cpuacct, no cgroup v2)")
    path = top.joinpath(*parts)
    try:
        _make_dirs(top, path)
    except OSError as exc:
        raise TestbedError(f"cannot set up the cgroup {path}: {exc.strerror}") from None
    return str(path)


def cpu_seconds(path: str) -> float | None:
    """CPU seconds every task of cgroup `path` has run so far, user and system (on a
    kernel without IRQ time accounting, the softirq work done in a task's context is the
    task's system time), from the kernel's own counter: v2 `cpu.stat` usage_usec, v1
    `cpuacct.usage` (ns). None where it has none."""
    where = Path(path)
    try:
        if (where / "cgroup.controllers").exists():  # v2
            for line in (where / "cpu.stat").read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "usage_usec":
                    return int(value) / 1e6
            return None
        acct = _cpuacct_twin(where) or where
        return int((acct / "cpuacct.usage").read_text()) / 1e9
    except (OSError, ValueError):
        return None


def _evict(path: Path, root: Path) -> None:
    """Move what is left in cgroup `path` to the hierarchy's root: the NAPI threads of a
    deleted namespace's devices stop only once the kernel has freed the devices, which it
    does after `ip netns del` returns."""
    try:
        left = (path / "cgroup.procs").read_text().split()
    except OSError:
        return
    for pid in left:
        try:
            (root / "cgroup.procs").write_text(pid)
        except OSError:
            pass  # gone meanwhile


def remove_testbed(name: str) -> None:
    """Remove k8sdds/<name>/<node> cgroups left anywhere, found by name."""
    kind, root = hierarchy()
    roots = [Path(root)] if kind else []
    roots += [V1_CPUSET] if (V1_CPUSET / "cpuset.cpus").exists() else []
    roots += [V1_CPUACCT] if _separate_cpuacct() else []
    for top in roots:
        for node in sorted((top / "k8sdds" / name).glob("*/")):
            if node.is_dir():
                _evict(node, top)
                try:
                    node.rmdir()
                except OSError:
                    pass
        for level in (top / "k8sdds" / name, top / "k8sdds"):
            try:
                level.rmdir()
            except OSError:
                break


# ---- one path in every cgroup v1 hierarchy (a kubelet's cgroupRoot) ----------------

def _mounted_below_root(kind: str) -> list[Path]:
    """The mounts of filesystem `kind` under /sys/fs/cgroup/ (not /sys/fs/cgroup itself)."""
    return [Path(where) for _, where, fs, *_ in
            (line.split() for line in Path("/proc/self/mounts").read_text().splitlines())
            if fs == kind and where.startswith("/sys/fs/cgroup/")]


def v1_hierarchies() -> list[Path]:
    """The cgroup v1 hierarchies mounted under /sys/fs/cgroup."""
    return _mounted_below_root("cgroup")


def hybrid_unified() -> list[Path]:
    """The unified (cgroup2) hierarchy of a hybrid system, mounted under /sys/fs/cgroup/
    beside the v1 ones (none on a v1-only or a v2-only system): runc makes each container's
    cgroup there too, with every ancestor of it."""
    return _mounted_below_root("cgroup2")


def unified_dir(root: str) -> Path:
    """`root` in the cgroup v2 hierarchy (a hybrid system's unified one, else the v2 root),
    made if absent: where runc puts the processes of the containers under it. Removed with
    it (`remove_everywhere`). A v1-only system has none: refused."""
    unified = hybrid_unified()
    if unified:
        top = unified[0]
    elif (V2_ROOT / "cgroup.controllers").exists():
        top = V2_ROOT
    else:
        raise TestbedError("this machine has no cgroup v2 hierarchy: a node cannot be given "
                           "its own cgroup2 root")
    path = top / root.lstrip("/")
    path.mkdir(parents=True, exist_ok=True)
    return path


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
        if p.exists():
            continue
        if p.relative_to("/sys/fs/cgroup").parts[0] == "cpuset":
            _new_cpuset(p)
        else:
            p.mkdir()


def remove_everywhere(root: str) -> None:
    """Kill what is left under `root` (containers outlive their shims), then remove it and
    what the kubelet made in it, deepest first; in a hybrid system's unified hierarchy also
    the ancestors runc made for it, where they are empty."""
    unified = hybrid_unified()
    for h in v1_hierarchies() + unified:
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
        made_by_runc = list(top.relative_to(h).parents)[:-1] if h in unified else []
        for d in sorted((p for p in [top, *top.rglob("*")] if p.is_dir()),
                        key=lambda p: -len(p.parts)) + [h / p for p in made_by_runc]:
            try:
                d.rmdir()
            except OSError:
                pass
