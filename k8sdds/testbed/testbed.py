"""The emulated edge cluster: network namespaces wired like a small Kubernetes cluster.

* underlay: a bridge `br0` in its own namespace (the switch); each node is a namespace with
  `eth0` on it, addresses in 10.99.0.0/24. Nothing links the testbed to the machine's own
  namespace, so no packet can leave it.
* pods: a namespace per pod, `eth0` enslaved to its node's `cni0` bridge (10.244.<n>.0/24,
  gateway .1), created per test and deleted after it.
* datapaths: how cross-node pod traffic travels; see k8sdds.testbed.wiring.

What exists is recorded in a state file before it is created, so `down` removes everything,
also after a crash.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from k8sdds.errors import TestbedError
from k8sdds.testbed import cgroups, napi, netns, pods, shaping
from k8sdds.testbed.layout import Layout, Node, State, check_name, state_dir
from k8sdds.testbed.netfilter import MASQUERADE
from k8sdds.testbed.netns import ip
from k8sdds.testbed.pods import Pod
from k8sdds.testbed.spec import DEFAULT_NAME, TestbedSpec, default_nodes, load
from k8sdds.testbed.wiring.kinds import TUNNEL_PROCESSES, WIRING


class Testbed(Layout):
    """One emulated cluster, identified by its name (the namespace prefix)."""

    __test__ = False  # not a pytest test class

    # ---- state on disk -------------------------------------------------------------
    @classmethod
    def described(cls, spec_file: Path | None, name: str, nodes: int,
                  profile: str | None) -> Testbed:
        """The testbed `k8sdds run` and `k8sdds testbed up` build alike: the nodes of a spec
        file, named `name` or, left at the default name, by the spec; else `nodes` nodes."""
        if spec_file:
            given = None if name == DEFAULT_NAME else name
            return cls(load(spec_file, name=given, profile=profile))
        return cls(default_nodes(nodes, profile, name))

    @classmethod
    def existing(cls, name: str = DEFAULT_NAME) -> Testbed | None:
        """The testbed recorded on disk under `name`, or None."""
        check_name(name)
        path = state_dir() / f"{name}.json"
        if not path.exists():
            return None
        try:
            return cls(TestbedSpec.from_dict(json.loads(path.read_text())["spec"]))
        except (ValueError, KeyError, TypeError):
            return cls(TestbedSpec(name=name))  # unreadable state: still allow `down`

    def is_up(self) -> bool:
        present = set(netns.list_namespaces())
        return self.state_file.exists() and all(
            n in present for n in [self.switch] + [n.ns for n in self.nodes])

    def kernel_threads(self) -> list[int]:
        """The kernel threads doing this testbed's packet work (the threaded NAPI of its
        switch ports and its nodes' uplinks): work of whatever runs on it, not other work."""
        spaces = [self.switch] + [node.ns for node in self.nodes]
        return sorted({n.pid for ns in spaces for n in napi.threads(ns) if n.pid})

    # ---- bring-up ------------------------------------------------------------------
    def up(self, owner: str = "user") -> None:
        """Create the switch and the nodes; leaves no datapath configured."""
        preflight()
        if self.is_up():
            return
        if self.state_file.exists() or self._leftovers():
            self.down()
        state = State(spec=self.spec.to_dict(), owner=owner)
        try:
            self.add_namespace(state, self.switch)
            ip("link", "add", "br0", "type", "bridge", "mcast_snooping", "0", ns=self.switch)
            ip("link", "set", "br0", "up", ns=self.switch)
            for node in self.nodes:
                self._add_node(state, node)
            shaping.apply(self, state)
        except BaseException:
            self.down()
            raise

    def _add_node(self, state: State, node: Node) -> None:
        self.add_namespace(state, node.ns)
        port = f"n{node.index}"
        ip("link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", node.ns,
           ns=self.switch)
        ip("link", "set", port, "master", "br0", "up", ns=self.switch)
        ip("addr", "add", f"{node.address}/24", "dev", "eth0", ns=node.ns)
        ip("link", "set", "eth0", "up", ns=node.ns)
        ip("route", "add", "224.0.0.0/4", "dev", "eth0", ns=node.ns)
        ip("link", "add", "cni0", "type", "bridge", "mcast_snooping", "0", ns=node.ns)
        ip("addr", "add", f"{node.gateway}/24", "dev", "cni0", ns=node.ns)
        ip("link", "set", "cni0", "up", ns=node.ns)
        netns.sysctl(node.ns, "net.ipv4.ip_forward", "1")
        # as every CNI does (flannel's ip-masq, calico's natOutgoing): pod traffic to
        # anything outside the pod network leaves with the node's address
        netns.nft(node.ns, MASQUERADE)

    def profiles(self) -> dict[str, dict]:
        """The profiles as applied at up: their CPU budgets resolved, and where from."""
        return dict(self.load_state().profiles)

    def owner(self) -> str:
        return self.load_state().owner

    def clear(self) -> None:
        """Remove what a killed run left: its pods, and processes in the nodes."""
        self.remove_pods()
        for node in self.nodes:
            netns.kill_all(node.ns, grace=0.5, spare="wireguard-go")  # the tunnel stays

    def not_applied(self) -> list[str]:
        """Parts of the node profiles this kernel could not apply, one line each."""
        return list(self.load_state().not_applied)

    def use_datapath(self, name: str, wired: bool = True) -> None:
        """Rewire cross-node pod traffic for datapath `name` (`wired=False`: a real CNI
        wires it; the testbed only records it)."""
        state = self.load_state()
        if state.datapath == name and state.wired == wired:
            return
        if state.datapath and state.wired:
            WIRING[state.datapath].teardown(self)
        was_wired, state.datapath = state.wired, None
        self.save_state(state)
        if wired != was_wired:  # the pod gateway: on the testbed's cni0, or (as on a real
            for node in self.nodes:  # node) where the real CNI's bridge plugin puts it
                ip("addr", *(("replace", f"{node.gateway}/24") if wired else ("flush",)),
                   "dev", "cni0", ns=node.ns)
        if wired:
            WIRING[name].setup(self)
            self._charge_tunnels(state)
        state.wired = wired
        state.datapath = name
        self.save_state(state)
        for node in self.nodes:  # the kernel's share of this datapath, at the board's pace
            shaping.charge(state, node)

    def _charge_tunnels(self, state: State) -> None:
        """A userspace tunnel (wireguard-go) is its node's datapath work: into its cgroup
        (its budget's, or the one that only counts its CPU)."""
        for node in self.nodes:
            group = state.account(node.name)
            for pid in netns.pids(node.ns) if group else ():
                if netns.command(pid) in TUNNEL_PROCESSES:
                    cgroups.join(group, pid)

    # ---- pods (testbed/pods.py) and budgets (testbed/shaping.py) ----------------------
    def add_pod(self, node: Node, name: str, mtu: int, prefix: int = 24) -> Pod:
        return pods.add(self, node, name, mtu, prefix)

    def remove_pods(self) -> None:
        """Delete every pod (and kill its processes)."""
        pods.remove_all(self)

    def set_budget(self, node: Node, cpus: float | None) -> None:
        """Give `node` a CPU budget of `cpus` (None: no limit); see shaping.set_budget."""
        shaping.set_budget(self, node, cpus)

    def set_hop(self, node: Node, rules: dict[str, int]) -> None:
        """Charge `node` the idle rules a packet `rules` gives each pod datapath; see
        shaping.set_hop."""
        shaping.set_hop(self, node, rules)

    # ---- teardown --------------------------------------------------------------------
    def _leftovers(self) -> list[str]:
        prefix = f"{self.spec.name}-"
        return [n for n in netns.list_namespaces() if n.startswith(prefix)]

    def down(self) -> list[str]:
        """Remove every namespace, link and process of this testbed; return what went."""
        state = self.load_state()
        doomed = list(dict.fromkeys(list(reversed(state.namespaces)) + self._leftovers()))
        for ns in doomed:
            netns.delete(ns)
        cgroups.remove_testbed(self.spec.name)  # found by name: also if the state is lost
        shutil.rmtree(self.state_file.with_suffix(".keys"), ignore_errors=True)  # WireGuard
        shutil.rmtree(self.state_file.with_suffix(".bpf"), ignore_errors=True)  # eBPF's
        try:
            self.state_file.unlink()
        except FileNotFoundError:
            pass
        return doomed

    def status(self) -> dict:
        state = self.load_state()
        present = set(netns.list_namespaces())
        return {
            "name": self.spec.name,
            "up": self.is_up(),
            "datapath": state.datapath,
            "wired": state.wired,
            "nodes": [{"name": n.name, "role": n.role, "arch": n.arch, "profile": n.profile,
                       "namespace": n.ns, "address": n.address, "pod_cidr": n.pod_cidr,
                       "present": n.ns in present}
                      for n in self.nodes],
            "not_applied": state.not_applied,
            "pods": len(state.pods),
            "processes": sum(len(netns.pids(ns)) for ns in state.namespaces if ns in present),
            "state_file": str(self.state_file),
        }


def preflight() -> None:
    """Fail early, with the fix, when this machine cannot host the testbed."""
    if os.geteuid() != 0:
        raise TestbedError("the emulated backend needs root (network namespaces); run as root")
    probe = netns.run(["ip", "netns", "list"], check=False)
    if probe.returncode != 0:
        raise TestbedError(f"network namespaces are not usable here: {probe.stderr.strip()}")
