"""What a node's profile makes of the node: its link shaped (tbf both ways, netem where the
kernel has it), its MTU, its CPU budget (a cgroup, the node's kernel datapath work charged to
it where the kernel threads NAPI; without a budget, a cgroup that only counts its CPU),
the kernel's share of each pod path at the board's pace (k8sdds.testbed.hopcost), put as
the testbed takes a datapath; and the budget and that charge changed for the calibration's
steps. What
the kernel cannot apply is recorded, never silently left out."""

from __future__ import annotations

import os
from dataclasses import asdict

from k8sdds.errors import TestbedError
from k8sdds.testbed import capabilities, cgroups, hopcost, link, napi
from k8sdds.testbed.layout import Layout, Node, State
from k8sdds.testbed.netns import ip
from k8sdds.testbed.profiles import PROFILES, link_burst_kb, not_emulated, resolve


def apply(tb: Layout, state: State) -> None:
    """Link rate (tbf both ways), MTU, CPU quota (cgroup), delay and loss (netem)."""
    resolved = {name: resolve(name) for name in {n.profile for n in tb.nodes}}
    for node in tb.nodes:
        profile = resolved[node.profile]
        state.profiles[profile.name] = asdict(profile)
        port = f"n{node.index}"
        ends = ((node.ns, "eth0"), (tb.switch, port))  # node->switch, switch->node
        if profile.mtu:
            ip("link", "set", "eth0", "mtu", str(profile.mtu), ns=node.ns)
            ip("link", "set", port, "mtu", str(profile.mtu), ns=tb.switch)
        netem = link.netem_applies(profile)
        if link.wants_netem(profile) and not netem:
            state.not_applied.append(
                f"{node.name} ({profile.name}): delay {profile.delay_ms} ms and loss "
                f"{profile.loss_pct} % not applied: {capabilities.qdisc('netem')}")
        if crypto := not_emulated(profile):
            state.not_applied.append(f"{node.name} ({profile.name}): {crypto}")
        for ns, dev in ends:
            if netem:
                link.add_netem(ns, dev, profile)
            if profile.rate_mbit:
                link.shape(ns, dev, profile.rate_mbit, profile.burst_kb, netem)
        if profile.cpu:
            state.cgroups[node.name] = cgroups.create(
                ["k8sdds", tb.spec.name, node.name], profile.cpu, pin=_cpu_for(node.index))
            tb.save_state(state)
            why = capabilities.threaded_napi()
            if why:
                state.not_applied.append(f"{node.name} ({profile.name}): kernel datapath "
                                         f"work not charged to the node's CPU: {why}")
            else:
                napi.thread_devices(tb.switch, [port])
                napi.thread_devices(node.ns, ["eth0"])
                napi.charge(node.ns, state.cgroups[node.name])
        else:
            try:
                state.accounts[node.name] = cgroups.counter(["k8sdds", tb.spec.name,
                                                             node.name])
            except TestbedError as exc:
                state.not_applied.append(f"{node.name}: its CPU not counted: {exc}")
        if profile.hop_rules:
            state.hops[node.name] = dict(profile.hop_rules)
            charge(state, node)
        tb.save_state(state)


def set_budget(tb: Layout, node: Node, cpus: float | None) -> None:
    """Give `node` a CPU budget of `cpus` (None: no limit), and its link the bucket that
    budget needs (`profiles.link_burst_kb`); for the calibration's steps."""
    group = tb.cgroup(node)
    if group is None:
        raise TestbedError(f"{node.name} has no CPU budget to set (profile {node.profile})")
    cgroups.limit(group, cpus)
    profile = PROFILES[node.profile]
    if profile.rate_mbit:
        burst = link_burst_kb(profile.rate_mbit, profile.burst_kb, cpus)
        for ns, dev in ((node.ns, "eth0"), (tb.switch, f"n{node.index}")):
            link.shape(ns, dev, profile.rate_mbit, burst, link.netem_applies(profile))


def set_hop(tb: Layout, node: Node, rules: dict[str, int]) -> None:
    """Give `node` the charge of `rules` (pod datapath -> idle rules a packet,
    k8sdds.testbed.hopcost) from now on, for the datapath in use too; for the calibration's
    steps. A node with a map, even of zeros, counts its pod paths' packets."""
    state = tb.load_state()
    state.hops[node.name] = dict(rules)
    tb.save_state(state)
    charge(state, node)


def charge(state: State, node: Node) -> None:
    """Put in `node`'s namespace the charge its map gives the datapath in use (not in the
    map: only counted; an empty map, or none: nothing)."""
    rules = state.hops.get(node.name)
    if isinstance(rules, dict):  # (a state file of an older k8sdds kept a number: no map)
        hopcost.apply(node.ns, int(rules.get(state.datapath or "", 0)) if rules else None)


def _cpu_for(index: int) -> int:
    """The CPU node `index` is kept on: the nodes take turns over the CPUs this process may
    use (not 0..n-1: a container may be given any of the machine's CPUs)."""
    allowed = sorted(os.sched_getaffinity(0))
    return allowed[index % len(allowed)]
