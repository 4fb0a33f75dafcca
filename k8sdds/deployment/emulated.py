"""The emulated backend: roles run as processes in the testbed's namespaces."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from pathlib import Path

from k8sdds import model
from k8sdds.deployment import reaping
from k8sdds.deployment.base import Handle, Placement
from k8sdds.deployment.options import EmulatedOptions
from k8sdds.deployment.placement import place, side
from k8sdds.engines.base import Command, engine_path
from k8sdds.errors import UserError
from k8sdds.images.foreign import OCI
from k8sdds.model import Limits, Test
from k8sdds.testbed import cgroups, fidelity, netns, other_work, userspace
from k8sdds.testbed.calibrate import calibrate_here
from k8sdds.testbed.kube.kubelets import Kubelets
from k8sdds.testbed.lock import TestbedLock
from k8sdds.testbed.pods import MAX_PODS_PER_NODE
from k8sdds.testbed.profiles import PROFILES, engine_env, resolve
from k8sdds.testbed.testbed import Testbed
from k8sdds.testbed.wiring.kinds import TUNNEL_PROCESSES, WIRING, datapath_unavailable

BUSY_LOOK_S = 1.0  # how long a run looks at the machine's other work before it begins


class EmulatedBackend:
    name = "emulated"
    local_engines = True
    images = False  # roles run in container images (--image, --rtiperftest-image)

    def __init__(self, options: EmulatedOptions = EmulatedOptions()):
        name = options.testbed
        existing = Testbed.existing(name)
        if existing and existing.is_up():
            # a testbed that is already up is used as it is (its own nodes and profiles)
            self.testbed = existing
        else:
            self.testbed = Testbed.described(options.testbed_spec, options.testbed,
                                             options.nodes, options.profile)
            existing = Testbed.existing(self.testbed.spec.name)
            if existing and existing.is_up():
                self.testbed = existing
        self.calibrate = not options.no_calibrate  # a budget not of this machine, first
        self.owned = False  # True when this run brought the testbed up
        self._lock: TestbedLock | None = None
        self._cgroups: dict[str, str | None] = {}  # node -> its cgroup, read at up()
        self._datapath: str | None = None
        self._handles: list[Handle] = []
        self._samplers: list[Handle] = []  # count_traffic's, stopped at teardown
        self._on_nodes = False  # a role of the current repeat runs in a node's namespace
        self._roots: dict[str, Path] = {}  # Debian architecture -> the board's own user space
        self._busy = ""  # why the machine was busy as the run began, if it was

    def _program_arch(self, node: str) -> str:
        """The architecture of the programs node `node` runs ("": this machine's)."""
        return PROFILES[self.testbed.node(node).profile].program_arch

    def _arch_label(self, node) -> str:
        """The architecture a node's programs run as (its label's spelling: arm for armhf)."""
        arch = self._program_arch(node.name)
        return OCI.get(arch, arch) or node.arch

    @functools.cache  # noqa: B019 - one backend, one testbed: asked at load and each repeat
    def limits(self) -> Limits:
        others = max(1, len(self.testbed.workers()) - 1)  # workers beside the publisher's
        # a node that runs its board's own programs takes engines built for that board only
        arches = {n.name: arch for n in self.testbed.nodes
                  if (arch := self._program_arch(n.name))}
        return Limits(max_subscribers=others * MAX_PODS_PER_NODE, arches=arches,
                      unbuilt=userspace.unbuilt(set(arches.values())),
                      no_multicast=userspace.NO_MULTICAST if arches else "",
                      no_secure=userspace.NO_SECURE if arches else "",
                      node_cpus=[resolve(n.profile).cpu for n in self.testbed.workers()],
                      machine_cpus=os.cpu_count() or 1)

    def datapaths(self) -> Sequence[str]:
        return list(WIRING)

    def unavailable(self, datapath: str) -> str | None:
        if datapath not in WIRING:
            return (f"the emulated cluster does not wire {datapath} (it offers "
                    f"{', '.join(WIRING)}); run it with --backend kubernetes on a cluster "
                    "that has it")
        return datapath_unavailable(model.datapath(datapath))

    def up(self) -> None:
        kube = Kubelets(self.testbed)
        if kube.running():
            raise UserError(f"testbed {self.testbed.spec.name} runs a Kubernetes cluster: run "
                            f"on it with --backend kubernetes --kubeconfig {kube.kubeconfig}, "
                            "or use another --testbed")
        say = lambda line: print(line, file=sys.stderr, flush=True)  # noqa: E731
        self._board_roots(say)
        made = []
        if self.calibrate and not self.testbed.is_up():  # a running one keeps its budgets
            made = calibrate_here([n.profile for n in self.testbed.nodes], say)
        if not made and any(resolve(n.profile).board for n in self.testbed.nodes):
            # (a calibration just made found the machine quiet at each of its steps)
            self._busy = self._machine_busy()  # said with the budgets' other notes
        self._lock = TestbedLock(self.testbed.spec.name)
        self._lock.acquire()
        try:
            if not self.testbed.is_up():
                self.testbed.up(owner="run")
                self.owned = True
            else:
                # a testbed a killed run built is this run's to take down; a killed run's
                # pods and processes go first
                self.owned = self.testbed.owner() == "run"
                self.testbed.clear()
            # where each node's processes go: the cgroup its CPU is counted in
            state = self.testbed.load_state()
            self._cgroups = {n.name: state.account(n.name) for n in self.testbed.nodes}
        except BaseException:
            self._lock.release()
            raise

    def _board_roots(self, say) -> None:
        """The user space of each board whose own programs the nodes run, made once."""
        from k8sdds.images import board_root

        for arch in dict.fromkeys(filter(None, map(self._program_arch,
                                                   (n.name for n in self.testbed.nodes)))):
            why = userspace.unavailable(arch)
            if why:
                raise UserError(f"testbed {self.testbed.spec.name}: {why}")
            self._roots[arch] = board_root.root(arch, say=say)

    def use_datapath(self, name: str) -> None:
        self.testbed.use_datapath(name)
        self._datapath = name

    def deploy(self, test: Test, roles: Sequence[str], repeat: int = 1,
               service_ports: Sequence[tuple[int, str]] = ()) -> Mapping[str, Placement]:
        dp = model.datapath(test.datapath)
        workers = [n.name for n in self.testbed.workers()]
        nodes = place(roles, workers, test.placement,
                      spare=[n.name for n in self.testbed.nodes if n.name not in workers])
        out = {}
        for role in roles:
            node = self.testbed.node(nodes[role])
            if side(role, roles, test.effective_path) == "node":
                self._on_nodes = True
                out[role] = Placement(role, node.name, node.address, "eth0", node.ns,
                                      node.name)
            else:
                pod = self.testbed.add_pod(node, role, node.shrink(dp.mtu), dp.pod_prefix)
                out[role] = Placement(role, node.name, pod.address, "eth0", pod.ns,
                                      f"{node.name}-{role}")
        return out

    def role_dirs(self, config_dir: Path, secrets_dir: Path) -> tuple[str, str]:
        return str(config_dir), str(secrets_dir)  # the namespaces share this file system

    def count_traffic(self, nodes: Sequence[str], folder: Path, start: float) -> None:
        """The sampler (parsers.counters) in each placed node's namespace: its eth0."""
        from k8sdds.parsers import counters

        for name in nodes:
            with open(folder / f"{counters.PREFIX}{name}.log", "wb") as out:
                proc = subprocess.Popen(
                    netns.exec_argv(self.testbed.node(name).ns, counters.argv(start)),
                    stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                    start_new_session=True)
            self._samplers.append(Handle(f"counters {name}", proc, folder / out.name))

    def start_lead(self, roles: int) -> float:
        """A process in a namespace starts in milliseconds; a second, and more for many."""
        return 1.0 + 0.05 * roles

    def start(self, placement: Placement, command: Command, log: Path,
              listen: int | None = None) -> Handle:
        group = self._cgroups.get(placement.node)
        argv = list(command.argv)
        arch = self._program_arch(placement.node)
        if arch:  # the board's own build, under qemu-user
            argv = userspace.wrap(argv, arch, self._roots[arch])
        with open(log, "wb") as out:
            proc = subprocess.Popen(netns.exec_argv(placement.where, argv,
                                                    placement.hostname),
                                    stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL,
                                    env={**os.environ, **self._engine_env(placement.node),
                                         **command.env},
                                    start_new_session=True,
                                    # the node's CPU quota holds every process of the node
                                    preexec_fn=(lambda: cgroups.join(group)) if group else None)
        handle = Handle(placement.role, proc, log)
        self._handles.append(handle)
        return handle

    def _engine_env(self, node: str) -> dict[str, str]:
        """The engines k8sdds builds on PATH, and what the node's board changes in its
        engines' environment (no AES instructions)."""
        return {"PATH": engine_path(),
                **engine_env(PROFILES[self.testbed.node(node).profile])}

    def ready(self, handles: Sequence[Handle]) -> None:
        """A process runs as soon as it is started."""

    def wait_listening(self, handle: Handle, port: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while not netns.listening(handle.proc.pid, port):
            if self._reaped(handle, 0.0) is not None or time.monotonic() > deadline:
                return False
            time.sleep(0.01)  # a socket appearing has no event to wait on; 10 ms polls
        return True

    @staticmethod
    def _reaped(handle: Handle, timeout: float | None) -> int | None:
        """The role's exit status once it has ended (None: still running after `timeout`
        s), its CPU kept on the handle as it is reaped."""
        code, cpu = reaping.reap(handle.proc, timeout)
        if cpu is not None:
            handle.cpu = cpu
        return code

    def wait(self, handle: Handle, timeout: float) -> int | None:
        return self._reaped(handle, max(0.0, timeout))

    def stop(self, handles: Sequence[Handle], grace: float = 2.0) -> dict[str, int]:
        running = [h for h in handles if self._reaped(h, 0.0) is None]
        for handle in running:
            handle.stopped = True
            handle.proc.terminate()
        deadline = time.monotonic() + grace
        for handle in running:
            if self._reaped(handle, max(0.0, deadline - time.monotonic())) is None:
                handle.proc.kill()
        return {h.role: self._reaped(h, None) for h in handles}

    def role_cpu(self, handles: Sequence[Handle]) -> dict[str, reaping.CpuUse]:
        """What each role's process used over its life (reaped ones only)."""
        return {h.role: h.cpu for h in handles if h.cpu is not None}

    def node_cpu(self) -> dict[str, float]:
        """Each node's CPU seconds so far, from its cgroup's own counter (its processes and
        its tunnel; where it has a budget also its NAPI threads)."""
        out = {}
        for node, group in self._cgroups.items():
            seconds = cgroups.cpu_seconds(group) if group else None
            if seconds is not None:
                out[node] = seconds
        return out

    def teardown(self) -> None:
        self.stop(self._handles, grace=1.0)
        self.stop(self._samplers, grace=1.0)
        self._handles, self._samplers = [], []
        self.testbed.remove_pods()
        if self._on_nodes:  # roles in the nodes' own network leave no pod to delete: what
            # they started (qperf's per-test children, nginx workers) goes here
            for node in self.testbed.nodes:
                netns.kill_all(node.ns, grace=0.5, spare=TUNNEL_PROCESSES[0])
            self._on_nodes = False

    def down(self) -> None:
        try:
            self.teardown()
            if self.owned:
                self.testbed.down()
                self.owned = False
        finally:
            if self._lock:
                self._lock.release()

    def usage(self) -> dict[str, float]:
        """wireguard-go processes in this testbed's nodes, and the kernel's softirq time.
        All nodes share one kernel here, so softirq is the whole machine's."""
        tunnel = 0.0
        if self._datapath and model.datapath(self._datapath).encryption != "none":
            # only encrypted datapaths may run a userspace tunnel; the lookup forks `ip`,
            # which must not steal CPU from discovery when there is nothing to find
            tunnel = sum(netns.cpu_seconds(pid) for node in self.testbed.nodes
                         for pid in netns.pids(node.ns)
                         if netns.command(pid) in TUNNEL_PROCESSES)
        return {"datapath_cpu_s": tunnel, "softirq_s": netns.softirq_seconds()}

    def fingerprint(self, placement: Mapping[str, Placement]) -> dict[str, dict]:
        """Each placed node's namespace and its pods' (k8sdds.fingerprint); the machine is
        the one all nodes share, the CNI the kernel's own datapath as the emulator wires it,
        with no container runtime or kubelet (pods are network namespaces)."""
        import platform

        from k8sdds import fingerprint as fp

        def runner(ns: str) -> fp.Runner:
            return lambda argv: fp.local(netns.exec_argv(ns, argv))

        dp = model.datapath(self._datapath) if self._datapath else None
        cni = {"name": dp.name if dp else "host",
               "version": f"the kernel's datapath ({platform.release()}), emulated",
               "mode": ", ".join(filter(None, (dp.encapsulation if dp else "none",
                                               dp.encryption if dp and dp.encryption != "none"
                                               else "")))}
        if dp:  # what the wiring says of itself (eBPF: which programs, what of the kernel)
            cni.update(WIRING[dp.name].about())
        system = {**fp.system(fp.local), "runtime": "none (pods are network namespaces)",
                   "kubelet": "none"}
        probed = self._multicast(placement)
        out = {}
        for name in dict.fromkeys(p.node for p in placement.values()):
            node = self.testbed.node(name)
            pods = {p.role: runner(p.where) for p in placement.values()
                    if p.node == name and p.where != node.ns}
            out[name] = {**system, **fp.network(runner(node.ns)),
                         "pods": {role: fp.interfaces(run) for role, run in pods.items()},
                         "cni": cni, "engines": {},
                         **({"multicast": probed} if probed else {})}
        return out

    def _multicast(self, placement: Mapping[str, Placement]) -> dict | None:
        """Multicast probed from the first role's place to the first role's place on each
        other node (and to a second place on the first role's node, where there is one):
        testbed.multicast's record, or the probe's error; None where the roles share one
        node."""
        from k8sdds.testbed import multicast

        places = list(placement.values())
        first = places[0]
        others = {p.node: p for p in places if p.node != first.node}
        if not others:
            return None
        beside = next((p for p in places[1:] if p.node == first.node
                       and p.where != first.where), None)
        sides = {"nodes" if p.where == self.testbed.node(p.node).ns else "pods"
                 for p in places}
        try:
            return multicast.run((first.node, first.where, first.address),
                                 [(p.node, p.where, p.address) for p in others.values()],
                                 netns.exec_argv, " and ".join(sorted(sides)),
                                 control=(beside.node, beside.where, beside.address)
                                 if beside else None).record()
        except (OSError, subprocess.SubprocessError) as exc:  # said, never the repeat's end
            return {"error": f"the multicast probe failed: {exc}"[:300]}

    @staticmethod
    def _machine_busy() -> str:
        """Whether other work keeps this machine busy as the run begins (a second's look):
        a CPU budget calibrated on the idle machine gives a node less beside it, so every
        figure of the budgeted nodes reads low; said with them, not refused."""
        before = other_work.snapshot()
        time.sleep(BUSY_LOOK_S)
        why = other_work.busy(before, other_work.snapshot(), "as the run began")
        return (f"{why}: the CPU budgets were calibrated for an idle machine, so the "
                "figures of the nodes that have one may read low") if why else ""

    def describe(self) -> dict:
        profiles = self.testbed.profiles() or {
            name: asdict(resolve(name))
            for name in dict.fromkeys(n.profile for n in self.testbed.nodes)}
        return {"testbed": self.testbed.spec.name,
                "nodes": [{"name": n.name, "role": n.role, "arch": self._arch_label(n),
                           "profile": n.profile, "address": n.address,
                           "pod_cidr": n.pod_cidr} for n in self.testbed.nodes],
                "profiles": profiles,
                "not_applied": self.testbed.not_applied(),
                "cannot_show": fidelity.cannot_show(profiles.values()),
                "budget_notes": fidelity.budget_notes(profiles.values())
                + ([self._busy] if self._busy else [])}

