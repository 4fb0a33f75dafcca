"""kube-router's rules as the emulated node gets them (pure: the iptables-restore text)."""

from __future__ import annotations

from k8sdds.testbed import netfilter
from k8sdds.testbed.netfilter import CHAINS, kube_router_filter, pod_chain, pod_chains

PODS = [("publisher", "10.244.0.10"), ("subscriber", "10.244.0.11")]


def _rules(text: str, chain: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(f"-A {chain} ")]


def test_each_local_pod_has_its_firewall_chain_and_every_path_jumps_to_it():
    text = kube_router_filter(PODS)
    for name, address in PODS:
        chain = pod_chain("default", name)
        assert f":{chain} - [0:0]" in text
        own = _rules(text, chain)
        # established traffic is accepted first (conntrack), unmarked traffic rejected
        assert "--ctstate RELATED,ESTABLISHED -j ACCEPT" in own[0]
        assert any("-j REJECT" in r and "! --mark 0x10000/0x10000" in r for r in own)
        assert own[-1].endswith("-j MARK --set-xmark 0x20000/0x20000")
        for path in ("FORWARD", "OUTPUT"):
            assert any(f"-d {address}/32" in r and r.endswith(f"-j {chain}")
                       for r in _rules(text, CHAINS[path]))
        for path in ("INPUT", "FORWARD", "OUTPUT"):
            assert any(f"-s {address}/32" in r and r.endswith(f"-j {chain}")
                       for r in _rules(text, CHAINS[path]))
    for chain in CHAINS.values():  # what passed a pod's chain is accepted last
        assert _rules(text, chain)[-1].endswith("--mark 0x20000/0x20000 -j ACCEPT")
    assert text.rstrip().endswith("COMMIT")


def test_no_pod_no_pod_chain_and_stale_chains_are_emptied():
    text = kube_router_filter([], stale=["KUBE-POD-FW-OLD"])
    assert ":KUBE-POD-FW-OLD - [0:0]" in text and not _rules(text, "KUBE-POD-FW-OLD")
    assert "-d 10.244." not in text
    # the builtin jumps are not in the sync (inserted once, so never doubled)
    assert "-A FORWARD" not in text and "-I FORWARD 1" in netfilter.jumps("-I")
    assert "-D FORWARD " in netfilter.jumps("-D")


def test_pod_chain_names_are_stable_and_fit_iptables():
    name = pod_chain("default", "publisher")
    assert name == pod_chain("default", "publisher") != pod_chain("default", "subscriber")
    assert name.startswith("KUBE-POD-FW-") and len(name) <= 28


def test_pod_chains_read_from_iptables_s():
    listed = "-P INPUT ACCEPT\n-N KUBE-ROUTER-INPUT\n-N KUBE-POD-FW-ABC\n-A X -j KUBE-POD-FW-ABC\n"
    assert pod_chains(listed) == ["KUBE-POD-FW-ABC"]


def test_untracked_on_flushes_before_adding_so_it_never_doubles():
    on = netfilter.UNTRACKED_ON.splitlines()
    assert on[:2] == netfilter.UNTRACKED_OFF.splitlines()
    assert sum("notrack" in line for line in on) == 4  # two rules in each raw chain
