"""Multicast probed on a real cluster: testbed.multicast's probe (its group, port, TTL and
nonce) between pods the engine image runs, whose k8sdds-discovery carries it (`probe`
mode, engines/discovery/probe.c; the image has no Python). A receiver pod on each other
node, and a control receiver beside the sender on its own node (on the pod network), join
the group and say `ready`; then the sender pod sends; each receiver's log says whether the
nonce arrived. On the host's network (datapath `host`) the pods are the nodes'
(hostNetwork) and there is no control. A run starts the receivers (`begin`) beside its
fingerprint's probe pods and reads them after (`outcome`). The pods go either way."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from k8sdds import stopping
from k8sdds.deployment.kubernetes import objects as m
from k8sdds.deployment.kubernetes import pods, watch
from k8sdds.deployment.kubernetes.api import Api
from k8sdds.deployment.kubernetes.cleanup import delete_repeat
from k8sdds.deployment.kubernetes.probes import ROLE as PROBE
from k8sdds.engines.discovery import BINARY  # in the engine image (`make engines`)
from k8sdds.errors import KubernetesError
from k8sdds.testbed.multicast import LISTEN, READY, SAME_NODE, MulticastProbe

ROLE = PROBE  # the role label and container of every pod k8sdds runs before the roles
ANY = "0.0.0.0"  # a pod's own interface: the one its default route takes


def label(tag: str) -> str:
    return f"mc-{tag}"


def heard_for(timeout: float) -> float:
    """Seconds a receiver listens at most (it is deleted once the probe is read): the pods
    started beside it get `timeout` to finish, the sender as much to run, and READY and
    LISTEN besides."""
    return 3 * timeout + READY + LISTEN


def argv(mode: str, address: str, nonce: str, heard: float) -> tuple[str, ...]:
    """The probe's argv in a pod: `recv` listens `heard` seconds at most."""
    return (BINARY, "probe", mode, address, nonce, *((f"{heard:g}",) if mode == "recv" else ()))


@dataclass(frozen=True)
class ProbePod:
    """One pod of the probe: its name, node and interface address, and under which name its
    outcome is told (its node; SAME_NODE for the control beside the sender)."""

    name: str
    node: str
    address: str
    told_as: str


def plan(tag: str, nodes: Sequence[str], host_network: bool,
         addresses: Mapping[str, str]) -> tuple[ProbePod, list[ProbePod]]:
    """(sender, receivers), their names ending in `tag`: the sender on the first node, a
    receiver on each other, and the control beside the sender on the pod network. Pure."""
    def address(node: str) -> str:
        return addresses.get(node, ANY) if host_network else ANY

    first = nodes[0]
    sender = ProbePod(f"mc0-send-{tag}", first, address(first), first)
    receivers = [ProbePod(f"mc{i}-recv-{tag}", node, address(node), node)
                 for i, node in enumerate(nodes) if i]
    if not host_network:
        receivers.append(ProbePod(f"mc0-beside-{tag}", first, ANY, SAME_NODE))
    return sender, receivers


def heard(log: str) -> bool | None:
    """A receiver's log -> whether the nonce arrived (None: it has not said yet)."""
    said = log.split()
    if "arrived" in said:
        return True
    return False if "none" in said else None


@dataclass(frozen=True)
class Probing:
    """A probe whose receivers were created (`start`) and may still be starting: the run's
    other probe pods start beside them; `finish` sends, reads and deletes the pods;
    `close` deletes them where `finish` is not reached."""

    api: Api
    selector: str
    sender: ProbePod
    receivers: list[ProbePod]
    create: Callable[[ProbePod, str], None]
    timeout: float
    host_network: bool

    def finish(self) -> MulticastProbe:
        """Once every receiver has joined the group, the sender sends; each receiver's
        outcome is read. Raises KubernetesError when a probe pod cannot run; the pods go
        either way."""
        try:
            names = [r.name for r in self.receivers]
            watch.until(self.api, self.selector, names, pods.started, self.timeout, "running")
            _until_ready(self.api, names, READY)
            late = [n for n in names if heard(_log(self.api, n)) is False]
            if late:  # its listening ran out before the sender was made: no verdict
                raise KubernetesError(f"the multicast probe's receiver {late[0]} stopped "
                                      "listening before the sender sent")
            self.create(self.sender, "send")
            watch.until(self.api, self.selector, [self.sender.name], pods.finished,
                        self.timeout, "finished")
            sent = _log(self.api, self.sender.name)
            if "sent" not in sent.split():
                raise KubernetesError(
                    f"the multicast probe's sender said: {sent.strip()[:200]}")
            arrived = _listen(self.api, self.receivers, LISTEN)
        finally:
            self.close()
        same = arrived.pop(SAME_NODE, None)
        return MulticastProbe(sender=self.sender.node,
                              between="nodes" if self.host_network else "pods",
                              arrived=arrived, control=same)

    def close(self) -> None:
        delete_repeat(self.api, self.selector, stopping.bound(30.0))


def start(api: Api, run_id: str, image: str, nodes: Sequence[str], timeout: float,
          host_network: bool, addresses: Mapping[str, str], arch: str | None = None,
          pull_policy: str = "IfNotPresent") -> Probing:
    """Create the receivers of a probe from the first of `nodes` to the others (two at
    least), pods pinned to each, and return without waiting for them; raises
    KubernetesError when one cannot be made. `addresses`: each
    node's InternalIP, for hostNetwork. A receiver listens for `heard(timeout)` seconds: the
    pods started beside it get `timeout` to finish, its own wait and the sender's as much."""
    if len(nodes) < 2:
        raise KubernetesError("the multicast probe needs two nodes")
    nonce = secrets.token_hex(8)
    tag = f"{run_id}-{nonce[:4]}"  # a probe's own pods: a run probes each of its datapaths
    core, selector = api.core(), f"{m.REPEAT_LABEL}={label(tag)}"
    sender, receivers = plan(tag, nodes, host_network, addresses)

    def create(place: ProbePod, mode: str) -> None:
        spec = m.pod(m.PodParams(
            name=place.name, namespace=api.namespace, run_id=run_id, repeat=label(tag),
            role=ROLE, node=place.node, image=image,
            argv=argv(mode, place.address, nonce, heard_for(timeout)),
            host_network=host_network, arch=arch, pull_policy=pull_policy))
        api.call(f"create pod {place.name} on {place.node}", core.create_namespaced_pod,
                 api.namespace, spec)

    probing = Probing(api, selector, sender, receivers, create, timeout, host_network)
    try:
        for place in receivers:
            create(place, "recv")
    except BaseException:
        probing.close()
        raise
    return probing


def _until_ready(api: Api, names: Sequence[str], timeout: float) -> None:
    """Each receiver has joined the group (its log says `ready`); one that ended without
    (an image without the probe's program) is said at once."""
    deadline = time.monotonic() + timeout
    waiting = list(names)
    while waiting:
        waiting = [n for n in waiting if "ready" not in _log(api, n).split()]
        for name in waiting:
            if pods.finished(api.pod(name) or {}):
                raise KubernetesError(f"the multicast probe's receiver {name} ended: "
                                      f"{_log(api, name).strip()[-200:] or 'no output'}")
        if waiting and time.monotonic() >= deadline:
            raise KubernetesError(f"the multicast probe's receiver {waiting[0]} did not join "
                                  f"the group within {timeout:g} s")
        if waiting:
            stopping.check()
            time.sleep(0.2)


def _listen(api: Api, receivers: Sequence[ProbePod], listen: float) -> dict[str, bool]:
    """Each receiver's `told_as` -> whether the nonce arrived, read once the sender is done:
    at once where it did, `listen` seconds more for the others."""
    deadline = time.monotonic() + listen
    out: dict[str, bool] = {}
    while True:
        for place in receivers:
            if not out.get(place.told_as):
                out[place.told_as] = bool(heard(_log(api, place.name)))
        if all(out.values()) or time.monotonic() >= deadline:
            return out
        stopping.check()
        time.sleep(0.1)


def _log(api: Api, name: str) -> str:
    return (api.pod_log(name, ROLE) or b"").decode(errors="replace")


def begin(api: Api, run_id: str, image: str, nodes: Sequence[str], timeout: float,
          host_network: bool, addresses: Mapping[str, str],
          arch: str | None = None) -> Probing | dict | None:
    """`start` for a run's fingerprint: None on one node, or why the probe could not start
    (said in the fingerprint, never the repeat's end)."""
    if len(nodes) < 2:
        return None
    try:
        return start(api, run_id, image, nodes, timeout, host_network, addresses, arch)
    except KubernetesError as exc:
        return {"error": f"the multicast probe failed: {exc}"[:300]}


def outcome(begun: Probing | dict | None) -> dict | None:
    """What `begin` started, finished: testbed.multicast's record, or why it did not run."""
    if not isinstance(begun, Probing):
        return begun
    try:
        return begun.finish().record()
    except KubernetesError as exc:
        return {"error": f"the multicast probe failed: {exc}"[:300]}


def abandon(begun: Probing | dict | None) -> None:
    """What `begin` started, deleted without reading it (a stop came first)."""
    if isinstance(begun, Probing):
        begun.close()
