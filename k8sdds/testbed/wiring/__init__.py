"""How each datapath is wired on the emulated cluster: one module per wiring kind of the CNI
records (k8sdds.cni.base), chosen by the kind (kinds.BY_KIND), giving the testbed a Wiring
(kinds.WIRING: by datapath).

The wiring follows what the real CNI installs in the node's kernel, so packets take the same
path: plain routes for flannel host-gw, and for kube-router with its firewall rules
(routed), a VXLAN device with static neighbour and FDB entries for flannel vxlan and calico
vxlan (vxlan), an IP-in-IP device for calico ipip (ipip), a WireGuard device per node for
flannel wireguard (wireguard), one L2 segment for weave and weave encrypted (segment),
k8sdds' own tc programs for cilium (ebpf), nothing for the host.

Adding a wiring kind: its record in k8sdds/cni/base.py, its module here with `KIND` (the
record's class) and `wiring(kind, mtu) -> Wiring`, and its module in kinds.MODULES.
"""
