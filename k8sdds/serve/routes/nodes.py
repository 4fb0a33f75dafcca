"""The nodes online."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from k8sdds.serve.routes.common import COMMON, Service, authorized, errors, service

router = APIRouter(dependencies=[Depends(authorized)])


@router.get("/api/nodes", responses=errors(*COMMON))
def nodes_online(svc: Service = Depends(service)):
    """The nodes up now: emulated testbeds, the cluster's nodes (--kubeconfig: Ready and
    the kubelet's last heartbeat), the inventory's hosts that answer (--inventory)."""
    return svc.nodes()
