"""The nodes' fingerprints (k8sdds/fingerprint.py): the probes run for real in a network
namespace the test makes (a veth pair of MTU 1450 with GRO turned on at one end, a bridge),
and what two runs' fingerprints differ in."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid

import pytest

from k8sdds import fingerprint as fp


def _ns_runner(ns: str) -> fp.Runner:
    def run(argv):
        done = subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True,
                              text=True, timeout=30)
        return done.returncode, done.stdout
    return run


@pytest.fixture
def namespace():
    if os.geteuid() != 0 or not shutil.which("ethtool"):
        pytest.skip("needs root (a network namespace) and ethtool")
    ns = f"k8sdds-fp-{uuid.uuid4().hex[:8]}"  # a name the hosts snapshots leave out
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        for argv in (["ip", "link", "add", "va", "mtu", "1450", "type", "veth", "peer", "name",
                      "vb", "mtu", "1450"],
                     ["ip", "link", "add", "br9", "type", "bridge"],
                     ["ethtool", "-K", "va", "gro", "on"],
                     ["ethtool", "-K", "vb", "gro", "off"]):
            subprocess.run(["ip", "netns", "exec", ns, *argv], check=True,
                           capture_output=True)
        yield ns
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=True)


def test_a_namespaces_interfaces_mtu_kind_and_offloads_are_read(namespace):
    got = fp.network(_ns_runner(namespace))
    ifs = got["interfaces"]
    assert set(ifs) == {"va", "vb", "br9"}  # no loopback
    assert (ifs["va"]["mtu"], ifs["va"]["kind"]) == (1450, "veth")
    assert ifs["br9"]["kind"] == "bridge"
    assert ifs["va"]["offloads"]["generic-receive-offload"] == "on"
    assert ifs["vb"]["offloads"]["generic-receive-offload"] == "off"
    assert "tx-checksumming" in ifs["va"]["offloads"]
    # what the namespace shows of the sysctls (the per-namespace ones at least)
    assert got["sysctls"]["net.ipv4.tcp_rmem"].count(" ") == 2


def test_the_machine_is_this_one():
    def here(argv):
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        except FileNotFoundError:
            return 127, ""  # the Runner's contract: an absent program is exit 127
        return done.returncode, done.stdout

    got = fp.machine(here)
    assert got["kernel"] == os.uname().release
    assert got["cpus"] == os.cpu_count()
    assert got["cpu_model"] != "unknown"
    assert got["governor"]  # "none (no cpufreq)" on a VM without cpufreq
    assert got["kubelet"] == ("absent" if not shutil.which("kubelet") else got["kubelet"])


def test_offloads_and_sysctls_parse_their_tools_text():
    text = ("Features for eth0:\nrx-checksumming: on [fixed]\ntx-checksumming: off\n"
            "\ttx-checksum-ipv4: off [fixed]\ngeneric-receive-offload: on\n")
    assert fp.offloads(text) == {"rx-checksumming": "on", "tx-checksumming": "off",
                                 "generic-receive-offload": "on"}
    assert fp.sysctls("/proc/sys/net/core/rmem_max:212992\n"
                      "/proc/sys/net/ipv4/tcp_rmem:4096\t131072\t6291456\n") == {
        "net.core.rmem_max": "212992", "net.ipv4.tcp_rmem": "4096 131072 6291456"}


A = {"flannel-vxlan": {"w1": {"kernel": "6.1.0", "governor": "performance",
                              "sysctls": {"net.core.rmem_max": "212992"},
                              "interfaces": {"flannel.1": {"mtu": 1450, "offloads": {
                                  "generic-receive-offload": "on"}}},
                              "pods": {"sub0": {"eth0": {"mtu": 1450}}},
                              "cni": {"name": "flannel (vxlan)", "version": "v0.27.4"}}}}


def test_what_differs_between_two_runs_fingerprints_is_said_field_by_field():
    import copy

    b = copy.deepcopy(A)
    node = b["flannel-vxlan"]["w1"]
    node["interfaces"]["flannel.1"]["offloads"]["generic-receive-offload"] = "off"
    node["sysctls"]["net.core.rmem_max"] = "4194304"
    node["cni"]["version"] = "v0.28.0"
    node["pods"]["sub0"]["eth0"]["mtu"] = 1400
    assert fp.differences(A, b) == [
        "flannel-vxlan w1 cni version: v0.27.4 against v0.28.0",
        "flannel-vxlan w1 flannel.1 generic-receive-offload: on against off",
        "flannel-vxlan w1 net.core.rmem_max: 212992 against 4194304",
        "flannel-vxlan w1 pod sub0 eth0 mtu: 1450 against 1400"]
    assert fp.differences(A, A) == []
    # a datapath or node only one run measured is not a difference
    assert fp.differences(A, {"host": A["flannel-vxlan"]}) == []
    assert fp.differences(A, b, limit=2)[-1] == "and 2 more fingerprint fields"
