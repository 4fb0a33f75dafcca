"""The kernel's cost per hop (k8sdds.testbed.hopcost) and its fit (calibration.fit_hop)."""

from __future__ import annotations

from k8sdds.testbed import calibration, hopcost


def test_a_pod_s_namespace_charges_every_hook_a_node_s_only_a_pod_s_or_a_tunnel_s_packets():
    pod, node = hopcost.table(3, pod=True), hopcost.table(3, pod=False)
    for text in (pod, node):
        assert text.count("meta mark 0x6b386870") == 3  # the idle rules, once, in burn
        for hook in ("prerouting", "input", "forward", "output", "postrouting"):
            assert f"type filter hook {hook} priority 0" in text
    assert pod.count("goto burn") == 5 and "ip saddr" not in pod
    assert "ip saddr 10.244.0.0/16 goto burn" in node  # kubeadm's flannel pod network
    assert "ip daddr 10.244.0.0/16 goto burn" in node
    for port in ("4789", "8472"):  # VXLAN's IANA port (RFC 7348), and Linux's (flannel)
        assert port in node.split("udp dport")[1].split("goto")[0]


def test_the_fit_doubles_then_bisects_and_keeps_the_step_measured_nearest():
    target = 0.77
    fit = calibration.fit_hop(lambda rules: 1 / (1 + rules / 100), target)
    assert [s[0] for s in fit.steps] == [0, 16, 32, 24, 28, 30]
    assert fit.rules == 30 and fit.ratio == round(1 / 1.3, 4)


def test_no_cost_where_the_pod_path_already_costs_what_the_board_s_does():
    fit = calibration.fit_hop(lambda rules: 0.70 - rules / 1000, 0.77)
    assert (fit.rules, fit.steps) == (0, [[0, 0.7]])


def test_the_fit_stops_at_its_ceiling_and_says_what_it_measured_there():
    fit = calibration.fit_hop(lambda rules: 0.9, 0.5)
    assert fit.steps[-1][0] == calibration.HOP_MOST and fit.ratio == 0.9
