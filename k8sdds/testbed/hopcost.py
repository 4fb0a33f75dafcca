"""The kernel's cost per hop on a pod's path: a node's second knob, beside its CPU budget.

Why: a node whose programs run as the board's own (under qemu-user) pays its user space at
the board's pace, but its kernel is this machine's: every hop a pod's packet takes (the
pod's own stack, the node's routing and firewall, a tunnel's encapsulation) costs an x86's
time. A Pi's kernel pays each of those hops several times over. So each netfilter hook a
packet crosses on a pod's path costs it a fixed amount of real kernel work: `rules` rules
that never match, evaluated in a chain every such hook jumps to, charged where the kernel
charges the packet's work (the sending task's CPU budget, mostly).

Which hooks are on a pod's path: every hook in a pod's own namespace (all its packets are a
pod's), and in a node's namespace the hooks crossed by a packet to or from the pod network
or by a tunnel's own packet (VXLAN, WireGuard: a pod's packet, encapsulated). A node's own
traffic (the host network's datapath) crosses none of them but for one lookup, so the CPU
budget, calibrated on the host's figures, and this cost, fitted on a pod datapath's, are two
knobs that do not move each other.

The rule texts are pure; `apply` loads them in a namespace, `remove` deletes them.
"""

from __future__ import annotations

from k8sdds import cni
from k8sdds.testbed import netns
from k8sdds.testbed.netfilter import POD_NETWORK

TABLE = "k8sdds_hop"
HOOKS = ("prerouting", "input", "forward", "output", "postrouting")
# a rule no packet matches (no packet here carries this mark): evaluated, never taken
IDLE_RULE = "meta mark 0x6b386870"


def _chain(hook: str, body: str) -> str:
    return (f"  chain {hook} {{\n    type filter hook {hook} priority 0; policy accept;\n"
            f"{body}  }}\n")


def table(rules: int, pod: bool) -> str:
    """The nft script of the cost in a pod's namespace (`pod`) or a node's: `rules` idle
    rules in chain `burn` (after a counter of the crossings), gone to from every hook on a
    pod's path. Pure."""
    ports = ", ".join(map(str, cni.tunnel_ports()))
    burn = "".join(f"    {IDLE_RULE}\n" for _ in range(rules))
    if pod:
        jump = "    goto burn\n"
    else:  # a node: a pod's packets and the tunnels' only, once (goto: no return here)
        jump = (f"    ip saddr {POD_NETWORK} goto burn\n"
                f"    ip daddr {POD_NETWORK} goto burn\n"
                f"    udp dport {{ {ports} }} goto burn\n")
    return (f"table inet {TABLE} {{\n  chain burn {{\n    counter\n{burn}  }}\n"
            + "".join(_chain(hook, jump) for hook in HOOKS) + "}\n")


def apply(ns: str, rules: int, pod: bool) -> None:
    """Put the cost of `rules` rules a hook in namespace `ns` (none: remove it)."""
    remove(ns)
    if rules > 0:
        netns.nft(ns, table(rules, pod))


def _burn(ns: str) -> str:
    """The burn chain of namespace `ns` as nft lists it ("" where it has none)."""
    return netns.run(netns.exec_argv(ns, ["nft", "list", "chain", "inet", TABLE, "burn"]),
                     check=False).stdout


def rules_in(ns: str) -> int:
    """The idle rules a hook namespace `ns` has (0: no cost there)."""
    return _burn(ns).count(IDLE_RULE)


def crossings(ns: str) -> int:
    """The hook crossings namespace `ns` has charged so far (the burn chain's counter)."""
    for line in _burn(ns).splitlines():
        words = line.split()
        if words[:1] == ["counter"] and "packets" in words:
            return int(words[words.index("packets") + 1])
    return 0


def remove(ns: str) -> None:
    netns.run(netns.exec_argv(ns, ["nft", "delete", "table", "inet", TABLE]), check=False)
