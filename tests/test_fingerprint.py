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

    got = fp.system(here)
    assert got["kernel"] == os.uname().release
    assert got["cpu_count"] == os.cpu_count()
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


def test_the_probe_script_as_a_pod_runs_it_reads_back_what_the_probes_read_directly(namespace):
    # the kubernetes backend's probe pods run the script with `sh` and k8sdds reads their
    # log: a non-root user in the namespace, as the pods run, reads what root does directly
    script = fp.probe_script()
    done = subprocess.run(["ip", "netns", "exec", namespace, "setpriv", "--reuid=65532",
                           "--regid=65532", "--clear-groups", "sh", "-c", script],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    read = fp.recorded(done.stdout)
    assert fp.network(read) == fp.network(_ns_runner(namespace))
    assert fp.system(read)["governor"] == fp.system(fp.local)["governor"]
    assert fp.system(read)["kernel"] == os.uname().release
    assert read(["containerd", "--version"]) == (127, "")  # not probed: as absent
    only = fp.recorded(subprocess.run(["ip", "netns", "exec", namespace, "sh", "-c",
                                       fp.probe_script(network_only=True)],
                                      capture_output=True, text=True).stdout)
    assert only(["uname", "-r"]) == (127, "")
    assert set(fp.network(only)["interfaces"]) == {"va", "vb", "br9"}


def test_a_probe_log_that_was_cut_short_keeps_what_it_finished():
    text = (f"{fp.MARK}uname -r\n6.1.0\n{fp.END}0\n{fp.MARK}ip -j -d link show\n[{{\"ifn")
    read = fp.recorded(text)
    assert read(["uname", "-r"]) == (0, "6.1.0\n")
    assert read(["ip", "-j", "-d", "link", "show"]) == (127, "")  # never ended: not taken


def test_a_probe_without_ip_or_ethtool_says_so_instead_of_an_empty_reading():
    # what an image without iproute2 prints: the shell's "not found", 127
    text = f"{fp.MARK}ip -j -d link show\n{fp.END}127\n"
    got = fp.network(fp.recorded(text))
    assert got["interfaces"] == {}
    assert got["not_read"] == "interfaces (no `ip`)"
    row = fp.rows({"host": {"n1": {**got, "cpu_model": "x"}}})[0]
    assert "not read: interfaces (no `ip`)" in row["interfaces"]
    # with iproute2 but no ethtool: the interfaces, and the offloads said missing
    link = '[{"ifname": "eth0", "mtu": 1450, "link_type": "ether"}]'
    text = (f"{fp.MARK}ip -j -d link show\n{link}\n{fp.END}0\n"
            f"{fp.MARK}ethtool -k eth0\n{fp.END}127\n")
    got = fp.network(fp.recorded(text))
    assert got["interfaces"] == {"eth0": {"mtu": 1450, "kind": "device", "offloads": {}}}
    assert got["not_read"] == "offloads (no `ethtool`)"
