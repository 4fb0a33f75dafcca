"""The kernel's extra work on a pod's path, charged at the board's pace: idle netfilter
rules each packet of a pod path crosses at its node's uplink.

Why: a node whose programs run as the board's own (under qemu-user) pays its user space at
the board's pace, but its kernel is this machine's: the extra work a pod path does per
message (the pod's veth, the node's routing and firewall, a tunnel's encapsulation) costs an
x86's time, where the board's kernel paid several times as much. The calibration measures
that extra per message on each pod path here (the publisher's CPU per message on the path
minus on the host network, k8sdds.testbed.kernel_pace) and charges it again, scaled by one
factor fitted on one named cell: `rules` rules that never match, evaluated in chain `burn`,
which every packet of a pod path jumps to once as it leaves the node's uplink (egress,
in the sending task's context: where the board paid it) and once as it arrives (ingress).

Which packets: those from or to the pod network, and a tunnel's own (VXLAN, WireGuard: a
pod's packet, encapsulated). A node's own traffic (the host network's datapath) crosses
none of them, so the CPU budget, calibrated on the host's figures, and this charge, fitted on
a pod datapath's, are two knobs that do not move each other. A second table, the same
matches with no idle rule, counts those packets and is kept while the charge changes with
the datapath (the calibration's packets per message).

The rule texts are pure; `apply` loads them in a namespace, `remove` deletes them.
"""

from __future__ import annotations

from k8sdds import cni
from k8sdds.testbed import netns
from k8sdds.testbed.netfilter import POD_NETWORK

TABLE = "k8sdds_hop"  # the charge: idle rules, replaced as the datapath changes
COUNT = "k8sdds_hopcount"  # the packets charged, counted as long as the node has a charge
UPLINK = "eth0"  # a node's link to the switch
# a rule no packet matches (no packet here carries this mark): evaluated, never taken
IDLE_RULE = "meta mark 0x6b386870"


def table(rules: int, name: str = TABLE) -> str:
    """The nft script of table `name`: `rules` idle rules in chain `burn` (after a counter),
    gone to by each packet of a pod path at the uplink, once on its way out and once on its
    way in. Pure."""
    ports = ", ".join(map(str, cni.tunnel_ports()))
    burn = "".join(f"    {IDLE_RULE}\n" for _ in range(rules))
    priority = -1 if name == COUNT else 0  # counted before it is charged

    def hook(chain: str, device: str) -> str:
        match = f'{device} "{UPLINK}"'
        return (f"  chain {chain} {{\n    type filter hook {chain} priority {priority}; "
                "policy accept;\n"
                f"    {match} ip saddr {POD_NETWORK} goto burn\n"
                f"    {match} ip daddr {POD_NETWORK} goto burn\n"
                f"    {match} udp dport {{ {ports} }} goto burn\n  }}\n")

    return (f"table inet {name} {{\n  chain burn {{\n    counter\n{burn}  }}\n"
            + hook("postrouting", "oifname") + hook("prerouting", "iifname") + "}\n")


def apply(ns: str, rules: int | None) -> None:
    """Put a charge of `rules` idle rules a packet in namespace `ns` (0: only count the
    packets; None: remove the charge and its count). The count is kept across changes of
    the charge, so a reading before and after a run spans datapaths."""
    _delete(ns, TABLE)
    if rules is None:
        _delete(ns, COUNT)
        return
    if not _burn(ns, COUNT):
        netns.nft(ns, table(0, COUNT))
    if rules > 0:
        netns.nft(ns, table(rules))


def _burn(ns: str, name: str = TABLE) -> str:
    """The burn chain of table `name` in namespace `ns` as nft lists it ("": none)."""
    return netns.run(netns.exec_argv(ns, ["nft", "list", "chain", "inet", name, "burn"]),
                     check=False).stdout


def rules_in(ns: str) -> int:
    """The idle rules a packet of a pod path crosses in namespace `ns` (0: no charge)."""
    return _burn(ns).count(IDLE_RULE)


def crossings(ns: str) -> int:
    """The packets namespace `ns` has counted on its pod paths since its charge was put."""
    for line in _burn(ns, COUNT).splitlines():
        words = line.split()
        if words[:1] == ["counter"] and "packets" in words:
            return int(words[words.index("packets") + 1])
    return 0


def _delete(ns: str, name: str) -> None:
    netns.run(netns.exec_argv(ns, ["nft", "delete", "table", "inet", name]), check=False)


def remove(ns: str) -> None:
    """Remove the charge and its count from namespace `ns`."""
    apply(ns, None)
