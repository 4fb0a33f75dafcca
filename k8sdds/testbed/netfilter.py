"""The netfilter rules of an emulated node: the testbed's own (pod egress masquerade, pod
traffic untracked), and kube-router's, which are on its datapath's packet path.

The rule texts are built by pure functions; `apply_*` loads them in a node's namespace.

kube-router's rules are what v2.1.0 (the version k8sdds builds and runs on the testbed
cluster, under the upstream kubeadm manifest: firewall on, service proxy off) installs on a
node with no NetworkPolicy: its network policy controller's chains (every forwarded, sent or
received packet of a local pod goes through the pod's firewall chain: connection state,
the default policy's mark, the accept mark) and its routes controller's pod egress
masquerade on two ipsets. Its rules need connection tracking, so pod traffic is tracked on
such a node, as on a real one. Its `physdev` rules are left out: they match bridged traffic
only (between two pods of one node), which skips the pods' chains here where the kernel's
`br_netfilter` hands a bridge's frames to the IP hooks.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Sequence

from k8sdds import cni
from k8sdds.testbed import netns

POD_NETWORK = "10.244.0.0/16"
SERVICE_NETWORK = "10.96.0.0/12"  # kubeadm's default Service range
NODE_PORTS = "30000:32767"
# the tunnels' own UDP ports, as the CNI records say (VXLAN: calico, weave, flannel; WireGuard)
TUNNEL_PORTS = ", ".join(map(str, cni.tunnel_ports()))
UNTRACKED = (f"ip saddr {POD_NETWORK} ip daddr {POD_NETWORK} notrack",
             f"udp dport {{ {TUNNEL_PORTS} }} notrack")
RAW_CHAINS = ("raw_prerouting", "raw_output")
# Masquerade needs connection tracking, but only for what leaves the pod network: pod to pod
# traffic and the tunnels' own packets stay untracked, as they were before the rule.
MASQUERADE = f"""table ip k8sdds {{
  chain raw_prerouting {{
    type filter hook prerouting priority raw; policy accept;
    {UNTRACKED[0]}
    {UNTRACKED[1]}
  }}
  chain raw_output {{
    type filter hook output priority raw; policy accept;
    {UNTRACKED[0]}
    {UNTRACKED[1]}
  }}
  chain postrouting {{
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr {POD_NETWORK} ip daddr != {POD_NETWORK} oifname "eth0" masquerade
  }}
}}
"""
# every packet tracked (on a Kubernetes cluster, and under kube-router's rules)
UNTRACKED_OFF = "".join(f"flush chain ip k8sdds {chain}\n" for chain in RAW_CHAINS)
UNTRACKED_ON = UNTRACKED_OFF + "".join(f"add rule ip k8sdds {chain} {rule}\n"
                                       for chain in RAW_CHAINS for rule in UNTRACKED)

POD_SUBNETS, NODE_IPS = "kube-router-pod-subnets", "kube-router-node-ips"
CHAINS = {"INPUT": "KUBE-ROUTER-INPUT", "FORWARD": "KUBE-ROUTER-FORWARD",
          "OUTPUT": "KUBE-ROUTER-OUTPUT"}
DEFAULT_POLICY = "KUBE-NWPLCY-DEFAULT"
PASSED, MARKED = "0x10000/0x10000", "0x20000/0x20000"


def pod_chain(namespace: str, name: str) -> str:
    """The pod's firewall chain, named as kube-router names it (a hash of the pod)."""
    digest = hashlib.sha256((namespace + name).encode()).digest()
    return "KUBE-POD-FW-" + base64.b32encode(digest).decode()[:16]


def _comment(text: str) -> str:
    return f'-m comment --comment "{text}"'


def _pod_rules(name: str, address: str) -> list[str]:
    """A local pod's firewall chain, and the jumps to it (kube-router's pod.go)."""
    chain, ip = pod_chain("default", name), f"{address}/32"
    local = _comment("rule to permit the traffic to pods when source is the pods local node")
    ingress = _comment("run through default ingress network policy chain")
    egress = _comment("run through default egress network policy chain")
    log = _comment(f"rule to log dropped traffic POD name:{name}")
    reject = _comment(f"rule to REJECT traffic destined for POD name:{name}")
    comply = _comment("set mark to ACCEPT traffic that comply to network policies")
    to_pod = _comment(f"rule to jump traffic destined to POD name:{name}")
    from_pod = _comment(f"rule to jump traffic from POD name:{name}")
    return [
        f"-A {chain} {_comment('rule for stateful firewall for pod')} "
        "-m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT",
        f"-A {chain} {_comment('rule to drop invalid state for pod')} "
        "-m conntrack --ctstate INVALID -j DROP",
        f"-A {chain} -d {ip} {local} -m addrtype --src-type LOCAL -j ACCEPT",
        f"-A {chain} -d {ip} {ingress} -j {DEFAULT_POLICY}",
        f"-A {chain} -s {ip} {egress} -j {DEFAULT_POLICY}",
        f"-A {chain} {log} -m mark ! --mark {PASSED} -j NFLOG --nflog-group 100 "
        "-m limit --limit 10/minute --limit-burst 10",
        f"-A {chain} {reject} -m mark ! --mark {PASSED} -j REJECT",
        f"-A {chain} -j MARK --set-xmark 0x0/0x10000",
        f"-A {chain} {comply} -j MARK --set-xmark {MARKED}",
        *(f"-A {CHAINS[c]} -d {ip} {to_pod} -j {chain}" for c in ("FORWARD", "OUTPUT")),
        *(f"-A {CHAINS[c]} -s {ip} {from_pod} -j {chain}" for c in ("INPUT", "FORWARD",
                                                                     "OUTPUT")),
    ]


def jumps(action: str = "-I") -> str:
    """The builtin chains' jumps to kube-router's (`-I`: insert first; `-D`: delete)."""
    where = " 1" if action == "-I" else ""
    return "".join(f"{action} {builtin}{where} {_comment('kube-router netpol')} -j {chain}\n"
                   for builtin, chain in CHAINS.items())


def kube_router_filter(pods: Sequence[tuple[str, str]], stale: Sequence[str] = ()) -> str:
    """kube-router's chains (iptables-restore --noflush: each declared chain is flushed) on
    a node whose local pods are `pods` (name, address), with no NetworkPolicy: each pod's
    traffic passes its chain. `stale`: pod chains left from pods gone, emptied."""
    cluster_ips = _comment("allow traffic to primary cluster IP range")
    policy = _comment("rule to mark traffic matching a network policy")
    accept = _comment("rule to explicitly ACCEPT traffic that comply to network policies")
    wanted = [pod_chain("default", name) for name, _ in pods]
    lines = ["*filter", *(f":{c} - [0:0]" for c in (*CHAINS.values(), DEFAULT_POLICY))]
    lines += [f":{c} - [0:0]" for c in dict.fromkeys([*wanted, *stale])]
    lines += [f"-A {CHAINS['INPUT']} -d {SERVICE_NETWORK} {cluster_ips} -j RETURN"]
    lines += [f"-A {CHAINS['INPUT']} -p {proto} "
              + _comment(f"allow LOCAL {proto.upper()} traffic to node ports")
              + f" -m addrtype --dst-type LOCAL -m multiport --dports {NODE_PORTS} -j RETURN"
              for proto in ("tcp", "udp")]
    lines += [f"-A {DEFAULT_POLICY} {policy} -j MARK --set-xmark {PASSED}"]
    for name, address in pods:
        lines += _pod_rules(name, address)
    lines += [f"-A {chain} {accept} -m mark --mark {MARKED} -j ACCEPT"
              for chain in CHAINS.values()]
    return "\n".join([*lines, "COMMIT", ""])


def pod_chains(rules: str) -> list[str]:
    """The pod firewall chains in `iptables -S` output."""
    return [line.split()[1] for line in rules.splitlines()
            if line.startswith("-N KUBE-POD-FW-")]


NAT_RULE = (f"POSTROUTING -m set --match-set {POD_SUBNETS} src -m set ! --match-set "
            f"{POD_SUBNETS} dst -m set ! --match-set {NODE_IPS} dst "
            f"{_comment('SNAT for pod egress')} -j MASQUERADE --random-fully")


def _restore(ns: str, text: str, check: bool = True) -> None:
    netns.run(netns.exec_argv(ns, ["iptables-restore", "--noflush"]), stdin=text, check=check)


def apply_kube_router(ns: str, pod_cidrs: Sequence[str], node_ips: Sequence[str],
                      pods: Sequence[tuple[str, str]]) -> None:
    """kube-router's rules in node namespace `ns` with its local `pods` (name, address):
    ipsets, pod egress (nat), its chains and the jumps to them; pod traffic tracked. Rules
    others put there (kube-proxy's) stay."""
    netns.nft(ns, UNTRACKED_OFF)
    for name, kind, members in ((POD_SUBNETS, "hash:net", pod_cidrs),
                                (NODE_IPS, "hash:ip", node_ips)):
        netns.run(netns.exec_argv(ns, ["ipset", "create", name, kind, "-exist"]))
        for member in members:
            netns.run(netns.exec_argv(ns, ["ipset", "add", name, member, "-exist"]))
    _restore(ns, f"*nat\n-A {NAT_RULE}\nCOMMIT\n")
    sync_pods(ns, pods)
    _restore(ns, "*filter\n" + jumps("-I") + "COMMIT\n")


def sync_pods(ns: str, pods: Sequence[tuple[str, str]]) -> None:
    """Rewrite kube-router's chains for the node's local `pods` (name, address), as its
    sync does; the chains of pods gone are emptied, then deleted."""
    listed = netns.run(netns.exec_argv(ns, ["iptables", "-S"])).stdout
    stale = [c for c in pod_chains(listed)
             if c not in {pod_chain("default", name) for name, _ in pods}]
    _restore(ns, kube_router_filter(pods, stale))
    if stale:
        _restore(ns, "*filter\n" + "".join(f"-X {c}\n" for c in stale) + "COMMIT\n")


def remove_kube_router(ns: str) -> None:
    """Take kube-router's rules and ipsets out of `ns`; pod traffic untracked again."""
    listed = netns.run(netns.exec_argv(ns, ["iptables", "-S"]), check=False).stdout
    _restore(ns, f"*nat\n-D {NAT_RULE}\nCOMMIT\n", check=False)
    _restore(ns, "*filter\n" + jumps("-D") + "COMMIT\n", check=False)
    chains = [*CHAINS.values(), DEFAULT_POLICY, *pod_chains(listed)]
    _restore(ns, "*filter\n" + "".join(f":{c} - [0:0]\n" for c in chains) + "COMMIT\n",
             check=False)
    _restore(ns, "*filter\n" + "".join(f"-X {c}\n" for c in chains) + "COMMIT\n",
             check=False)
    for name in (POD_SUBNETS, NODE_IPS):
        netns.run(netns.exec_argv(ns, ["ipset", "destroy", name]), check=False)
    netns.nft(ns, UNTRACKED_ON)
