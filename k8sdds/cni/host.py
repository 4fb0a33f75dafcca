"""The host network: processes in the node itself, no CNI on the path (the baseline)."""

from __future__ import annotations

from k8sdds.cni.base import Cni, Datapath

CNI = Cni(
    "host",
    (Datapath("host", "hostNetwork: processes in the node itself (the baseline)", "none",
              1500, True, host_network=True),),
    aliases={"host": "host", "baremetal": "host", "hostnetwork": "host"},
)
