"""The ssh backend's pure parts: which interface DDS is told to use on a host; when a started
role counts as running (its output's first line, read from a channel)."""

from __future__ import annotations

import threading

from k8sdds.deployment.ssh import PID_LINE, _pump, interface_of

# `ip -o addr show` on a Kubernetes node with flannel (iproute2 6.1's one-line form)
NODE = """\
1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever
1: lo    inet6 ::1/128 scope host \\       valid_lft forever preferred_lft forever
2: eth0    inet 192.168.1.12/24 brd 192.168.1.255 scope global eth0\\       valid_lft forever
2: eth0    inet6 fe80::ba27:ebff:fe01:2/64 scope link \\       valid_lft forever
4: flannel.1    inet 10.244.1.0/32 scope global flannel.1\\       valid_lft forever
5: cni0    inet 10.244.1.1/24 brd 10.244.1.255 scope global cni0\\       valid_lft forever
7: veth0a1b2c3d@if3    inet6 fe80::1/64 scope link \\       valid_lft forever
"""


def test_the_interface_holding_the_host_s_address_not_the_pods_bridge():
    assert interface_of("192.168.1.12", NODE) == "eth0"
    assert interface_of("10.244.1.1", NODE) == "cni0"
    assert interface_of("fe80::1", NODE) == "veth0a1b2c3d"  # its peer's index left off


def test_an_address_no_interface_holds_leaves_the_choice_to_dds():
    assert interface_of("203.0.113.7", NODE) == ""  # behind NAT
    assert interface_of("192.168.1.1", NODE) == ""  # a prefix's other address
    assert interface_of("192.168.1.12", "") == ""


class _Channel:
    """What paramiko's channel gives `_pump`: chunks, then b"" once closed; each chunk only
    once the test lets it through."""

    def __init__(self, chunks):
        self.chunks, self.gate = list(chunks), threading.Semaphore(0)

    def recv(self, size):
        self.gate.acquire()
        return self.chunks.pop(0) if self.chunks else b""


def test_a_role_is_started_once_its_shell_has_said_its_pid(tmp_path):
    chan = _Channel([PID_LINE.encode()[:5], PID_LINE.encode()[5:] + b"4242\nddsperf says", b""])
    state = {"pid": None, "data": bytearray(), "started": threading.Event()}
    pump = threading.Thread(target=_pump, args=(chan, state, tmp_path / "log"))
    pump.start()
    chan.gate.release()  # half of the PID line: not started yet
    assert not state["started"].wait(0.2)
    chan.gate.release()
    assert state["started"].wait(5) and state["pid"] == 4242
    chan.gate.release()
    pump.join(5)
    assert (tmp_path / "log").read_bytes() == b"ddsperf says"


def test_a_channel_closed_before_any_line_counts_as_started_its_log_says_why(tmp_path):
    chan = _Channel([b"sh: 1: exec: ddsperf: not found", b""])
    state = {"pid": None, "data": bytearray(), "started": threading.Event()}
    chan.gate.release()
    chan.gate.release()
    _pump(chan, state, tmp_path / "log")
    assert state["started"].is_set() and state["pid"] is None
    assert (tmp_path / "log").read_bytes() == b"sh: 1: exec: ddsperf: not found"
