"""The testbed cluster's process bookkeeping on real mount namespaces: a node's namespace is
held while its processes are stopped, so that the number /proc names it by cannot pass to a
namespace another program makes meanwhile (the cold CI run of 2026-11-26 lost an image
build's RUN step, SIGKILLed by the other test process's cluster going down)."""

from __future__ import annotations

import subprocess
import time

import pytest

from k8sdds.testbed.kube import procs

from .emulated_support import missing

REASON = missing()
pytestmark = [pytest.mark.emulated,
              pytest.mark.skipif(REASON is not None, reason=REASON or "")]


def _holder() -> subprocess.Popen:
    proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sleep", "600"],
                            start_new_session=True)
    procs.wait_own_mounts(proc)
    return proc


def test_a_held_namespace_outlives_its_holder_and_no_new_one_takes_its_name():
    holder = _holder()
    name = procs.mount_namespace(holder.pid)
    strangers = []
    try:
        with procs.pinned([holder.pid]) as held:
            assert held == {name}
            procs.stop([holder.pid], grace=2)
            holder.wait(timeout=5)
            # namespaces made while ours is held, as an image build's RUN steps make them
            strangers = [_holder() for _ in range(5)]
            assert name not in {procs.mount_namespace(s.pid) for s in strangers}
            procs.kill_namespaces(held)
            time.sleep(0.2)  # a SIGKILL sent would have landed by now: nothing to wait on
            assert all(s.poll() is None for s in strangers)  # none of them killed
            assert procs.in_namespaces(held) == []
    finally:
        for s in [holder, *strangers]:
            s.kill()
            s.wait(timeout=5)


def test_only_namespaces_a_live_holder_is_in_are_held():
    holder = _holder()
    name = procs.mount_namespace(holder.pid)
    try:
        # a number recorded earlier, its holder gone: not ours any more, never held
        with procs.pinned([holder.pid, 999999999], among={name, "mnt:[1]"}) as held:
            assert held == {name}
    finally:
        holder.kill()
        holder.wait(timeout=5)


def test_what_names_a_testbeds_folder_is_killed_and_another_testbeds_is_spared(tmp_path):
    """`down` kills what names its data folder (a kubelet started but never recorded), and
    not what names a folder of another testbed whose name begins with this one's."""
    import sys

    sleep = [sys.executable, "-c", "import time; time.sleep(300)"]
    mine = subprocess.Popen([*sleep, f"--root-dir={tmp_path}/kdzz/node1/kubelet"])
    other = subprocess.Popen([*sleep, f"--root-dir={tmp_path}/kdzzb/node1/kubelet"])
    try:
        procs.kill_referring([tmp_path / "kdzz"])
        # a bound against a hang, not a speed: beside a full suite on a 2-core machine half
        # as fast, the killed process was not yet reaped after 5 s (CI, 2026-12-03)
        assert mine.wait(timeout=60) == -9
        assert other.poll() is None
    finally:
        mine.kill()
        other.kill()
        other.wait()
