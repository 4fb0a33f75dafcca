"""The host network: processes in the node itself, no CNI on the path (the baseline)."""

from __future__ import annotations

from k8sdds.cni.base import Cni, Datapath

HOST_NETWORK = "host"  # the baseline datapath's name, every figure's reference

CNI = Cni(
    HOST_NETWORK,
    (Datapath(HOST_NETWORK, "hostNetwork: processes in the node itself (the baseline)",
              "none", 1500, True, host_network=True),),
    aliases={"host": HOST_NETWORK, "baremetal": HOST_NETWORK, "hostnetwork": HOST_NETWORK},
)
