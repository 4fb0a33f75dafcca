"""Cgroup clean-up on this machine's real hierarchies: what a kubelet and runc made under a
root goes at down, in every hierarchy, the unified one of a hybrid system too."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from k8sdds.testbed import cgroups

from .emulated_support import requires_namespaces

pytestmark = [pytest.mark.emulated, requires_namespaces()]


def test_remove_everywhere_takes_what_runc_made_in_the_unified_hierarchy_too():
    hierarchies = cgroups.v1_hierarchies() + cgroups.hybrid_unified()
    if not hierarchies:
        pytest.skip("no cgroup v1 hierarchy and no hybrid unified one: a v2-only system")
    top = f"k8sdds-cgtest{os.getpid() % 1000}"
    root = f"/{top}/node1/kube"
    for h in cgroups.hybrid_unified():  # as runc does: the whole chain, then a container
        (h / root.lstrip("/") / "kubepods" / "pod1").mkdir(parents=True)
    cgroups.make_everywhere(root)  # as the testbed does in the v1 hierarchies
    for h in cgroups.v1_hierarchies():
        (h / root.lstrip("/") / "kubepods").mkdir()
    sleeper = subprocess.Popen(["sleep", "60"])  # a container that outlived its shim
    if cgroups.hybrid_unified():  # the container's own cgroup, made by runc
        deepest = cgroups.hybrid_unified()[0] / root.lstrip("/") / "kubepods" / "pod1"
    else:  # where the kubelet puts pods
        deepest = cgroups.v1_hierarchies()[0] / root.lstrip("/") / "kubepods"
    (deepest / "cgroup.procs").write_text(str(sleeper.pid))
    try:
        cgroups.remove_everywhere(root)
        assert sleeper.wait(10) == -9  # killed, not left running
        for h in cgroups.v1_hierarchies():
            assert not (h / root.lstrip("/")).exists()
            (h / top / "node1").rmdir()  # what make_everywhere made above root: the
            (h / top).rmdir()  # testbed records and removes it (cluster.down)
        for h in cgroups.hybrid_unified():  # the ancestors runc made, where empty
            assert not (h / top).exists()
    finally:
        sleeper.kill()
        for h in hierarchies:
            for d in sorted((p for p in Path(h, top).rglob("*") if p.is_dir()),
                            key=lambda p: -len(p.parts)) + [Path(h, top)]:
                if d.exists():
                    d.rmdir()
