"""The kernel's share at the board's pace: the charge's rules (k8sdds.testbed.hopcost), the
fit and each path's rules (k8sdds.testbed.kernel_pace), and a calibration file's record of
them."""

from __future__ import annotations

import json

import pytest

from k8sdds.testbed import calibration, hopcost, kernel_pace
from k8sdds.testbed.kernel_pace import PathCost, Step


def test_a_node_charges_a_pod_path_s_packets_at_its_uplink_once_each_way():
    text = hopcost.table(3)
    assert text.count("meta mark 0x6b386870") == 3  # the idle rules, once, in burn
    assert "counter" in text.split("chain burn")[1].split("}")[0]
    assert "type filter hook postrouting priority 0" in text
    assert "type filter hook prerouting priority 0" in text
    for hook in ("input", "forward", "output"):  # a packet is charged twice at most
        assert f"hook {hook} " not in text
    assert 'oifname "eth0" ip saddr 10.244.0.0/16 goto burn' in text  # flannel's network
    assert 'iifname "eth0" ip daddr 10.244.0.0/16 goto burn' in text
    for port in ("4789", "8472"):  # VXLAN's IANA port (RFC 7348), and Linux's (flannel)
        assert port in text.split("udp dport")[1].split("goto")[0]
    count = hopcost.table(0, hopcost.COUNT)  # the count: the same packets, no idle rule
    assert count.count("meta mark") == 0 and "priority -1;" in count
    assert count.replace("priority -1", "priority 0").replace(hopcost.COUNT, hopcost.TABLE) \
        == hopcost.table(0)


def _cell(extra: float = 5.0, packets: float = 1.0) -> PathCost:
    return PathCost("flannel-vxlan", host_us=40.0, pod_us=40.0 + extra, host_system_us=10.0,
                    pod_system_us=10.0 + extra, packets=packets, rounds=3)


def _path(name: str, extra: float, packets: float) -> PathCost:
    # the user time differs too (qemu-user's spread): only the system time is the kernel's
    return PathCost(name, 40.0, 47.0 + extra, 10.0, 10.0 + extra, packets, 3)


def test_the_fit_reads_the_rules_off_a_line_in_the_ratio_s_inverse():
    # a CPU-bound sender at 45 us a message (15 of them system) beside a host at 40 (ratio
    # 0.889), each rule 10 ns to each of its 1.0 packets: 1/ratio = 45/40 + rules * 0.01 / 40
    steps = [Step(r, (40 / (45 + r * 0.01),) * 3, 15 + r * 0.01) for r in (0, 200, 400, 800)]
    fit = kernel_pace.fit(steps, 0.77, _cell())
    # 1/0.77 = 1.2987 = 1.125 + r / 4000  ->  r = 694.8
    assert fit.rules == 695
    assert fit.residual == 0
    assert fit.rule_ns == 10.0
    assert fit.factor == pytest.approx(1 + 695 * 0.01 / 5, abs=1e-3)  # 2.39


def test_the_fit_needs_four_rule_counts_and_never_charges_less_than_nothing():
    three = [Step(r, (0.8, 0.8, 0.8), 45.0) for r in (0, 100, 200)]
    with pytest.raises(ValueError, match="at least 4"):
        kernel_pace.fit(three, 0.77, _cell())
    flat = [Step(r, (0.7,), 45.0 + r) for r in (0, 100, 200, 400)]  # already under target
    assert kernel_pace.fit(flat, 0.77, _cell()).rules == 0


def test_each_path_is_charged_by_the_cell_s_rule_per_packet_of_its_own_extra():
    paths = {"flannel-vxlan": _cell(5.0, 1.0),
             "flannel-hostgw": _path("flannel-hostgw", 2.5, 1.0),  # half the extra
             "weave": _path("weave", 10.0, 2.0),  # twice, over twice the packets
             "kube-router": _path("kube-router", -1.0, 1.0)}  # cheaper than the host
    assert kernel_pace.path_rules(paths, "flannel-vxlan", 600) == {
        "flannel-vxlan": 600, "flannel-hostgw": 300, "weave": 600, "kube-router": 0}


def test_the_first_steps_bracket_the_guess_with_none_among_them():
    # to reach 0.8 of a 40 us host the cell needs 50 us: 5 us more at 10 ns a rule = 500
    assert kernel_pace.first_steps(_cell(), 0.8, 10.0) == [0, 500, 1000, 2000]
    # already near: at least a tenth of the host's 40 us, 4 us = 400 rules
    assert kernel_pace.first_steps(_cell(), 0.9, 10.0) == [0, 400, 800, 1600]


def test_a_calibration_file_of_the_old_cost_per_hop_reads_as_no_charge(tmp_path):
    old = {"version": 1, "boards": {"rpi3b-armhf": {
        "board": "rpi3b-armhf", "cpu": 0.3221, "target_ratio": 0.8719, "ratio": 0.86,
        "link_mbps": 90.0, "hop_rules": 8, "hop_cell": "flannel-vxlan", "hop_target": 0.77,
        "hop_ratio": 0.72, "hop_steps": [[0, 0.87], [16, 0.85]]}}}
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(old))
    cal = calibration._read(path)["rpi3b-armhf"]
    assert cal.cpu == 0.3221 and cal.path_rules() == {}
