"""What carries a testbed cluster's pods: a real CNI (its own DaemonSet, as its record in
k8sdds/cni says) or the emulated wiring of the datapath (the testbed's routes or VXLAN,
Debian's bridge plugin on each node's cni0). `choose` says which, and why when it falls
back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from k8sdds import cni as cnis
from k8sdds.cni import base
from k8sdds.errors import TestbedError, UserError
from k8sdds.testbed.kube import node as agent
from k8sdds.testbed.kube.watching import watched
from k8sdds.testbed.layout import Node

# where the deployment's CNI detection reads the datapath of an emulated wiring
MARKER = cnis.MARKER
MODES = ("auto", "real", "emulated")


@dataclass
class PodNetwork:
    """The emulated wiring of `datapath`; subclasses run a real CNI instead."""

    datapath: str
    fallback: str = ""  # why the real CNI was not used (auto), shown and recorded
    archives: list[Path] = field(default_factory=list)  # images the nodes import

    real = False
    pods_in = ""  # the namespace of the CNI's own pods, whose usage a run reads

    def describe(self) -> str:
        note = f" ({self.fallback})" if self.fallback else ""
        return f"{self.datapath}, emulated wiring (k8sdds routes, bridge plugin){note}"

    def wires_testbed(self) -> bool:
        """Whether the testbed wires the datapath (else the CNI does)."""
        return True

    def node_mounts(self, cgroup_root: str) -> dict:
        """What each node's mount namespace gives the CNI (node.mount_private's keywords;
        `cgroup_root`: the node's cgroup, its pods' parent)."""
        return {}

    def plugin_env(self, view: Path) -> dict[str, str]:
        """What the container runtime's environment passes on to the CNI's plugin."""
        return {}

    def prepare(self, binaries: Path, say: Callable[[str], None]) -> None:
        """Build (or find cached) what the CNI's pods need, before any node starts."""

    def configure(self, node: Node, files: agent.NodeFiles) -> None:
        (files.own("net.d") / "10-k8sdds.conflist").write_text(
            agent.cni_config(node.pod_cidr, node.gateway, 1500, files))

    def start(self, kubeconfig: Path, view: Path, workers: int) -> None:
        """Once the `workers` are registered: what the cluster learns of its network
        (`view`: the node view, where a DaemonSet's host paths point)."""
        from kubernetes import client, config

        api = client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))
        api.create_namespaced_config_map(MARKER[0], {
            "metadata": {"name": MARKER[1], "labels": {"app.kubernetes.io/managed-by": "k8sdds"}},
            "data": {"datapath": self.datapath, "wiring": "emulated"}})

    def wait(self, kubeconfig: Path, timeout: float) -> None:
        """Until the CNI carries pods."""


@dataclass
class Real(PodNetwork):
    """A CNI's own DaemonSet, from its pinned upstream manifest (adapted to the testbed as its
    record's `testbed.adapt` says), in images built here from its Go modules."""

    record: base.Cni | None = None
    built: dict[str, str] = field(default_factory=dict)  # upstream repository -> tag built here
    real = True

    @property
    def part(self) -> base.ClusterCni:
        assert self.record and self.record.testbed
        return self.record.testbed

    @property
    def pods_in(self) -> str:  # type: ignore[override]
        return self.part.daemonset[0]

    def describe(self) -> str:
        ns, ds = self.part.daemonset
        return f"{self.datapath}, {self.record.name} {self.version} (DaemonSet {ns}/{ds}, real)"

    @property
    def version(self) -> str:
        from k8sdds.caches import k8s_bin as binaries
        from k8sdds.images.kubernetes import built_version

        return built_version(binaries(), self.part.binaries[0])

    def wires_testbed(self) -> bool:
        return False

    def node_mounts(self, cgroup_root: str) -> dict:
        needs = self.part.node
        mounts = {"sysctls": needs.sysctls, "bpf_fs": needs.bpf_fs}
        if needs.cgroup2:
            from k8sdds.testbed import cgroups

            mounts["cgroup2"] = (cgroups.unified_dir(cgroup_root), needs.cgroup2)
        return mounts

    def plugin_env(self, view: Path) -> dict[str, str]:
        return {k: v.format(view=view) for k, v in self.part.node.plugin_env.items()}

    def prepare(self, binaries: Path, say: Callable[[str], None]) -> None:
        """The record's images, built once and cached, named localhost/k8sdds/<name>:<version>."""
        from k8sdds.images.kubernetes import built_version, cni_image, split

        say(f"{self.record.name} {self.version} images (cached after the first build)")
        for image in self.record.images:
            name = split(image.repository)[0].rsplit("/", 1)[-1]
            tag = f"localhost/k8sdds/{name}:{built_version(binaries, image.binary)}"
            self.archives.append(cni_image(image, tag, binaries, say))
            self.built[image.repository] = tag

    def configure(self, node: Node, files: agent.NodeFiles) -> None:
        """The node's own machine id where the CNI reads one (as each machine has its own);
        the CNI's pods write its configuration."""
        if self.part.node.machine_id:
            import uuid

            files.own(self.part.node.machine_id).write_text(uuid.uuid4().hex + "\n")

    def documents(self, view: Path, workers: int) -> list[dict]:
        """The shipped manifest as the testbed applies it: the images built here, then the
        record's own changes (host paths under the node `view`, the pod network, the number
        of `workers`)."""
        from k8sdds.cni import manifests
        from k8sdds.images.kubernetes import split
        from k8sdds.testbed.netfilter import POD_NETWORK

        docs = manifests.documents(manifests.shipped(self.record))
        images = {c["image"]: self.built.get(split(c["image"])[0], c["image"])
                  for d in base.objects(docs) for c in base.containers(d)}
        docs = base.in_view(manifests.pin(docs, images), view, self.part.host_paths)
        docs = base.bounded(docs, agent.bounding_set())
        return self.part.adapt(docs, self.datapath, view, POD_NETWORK, workers)

    def start(self, kubeconfig: Path, view: Path, workers: int) -> None:
        apply(kubeconfig, self.documents(view, workers), self.record.name)

    def wait(self, kubeconfig: Path, timeout: float) -> None:
        """Until every pod of the CNI's DaemonSet is ready, watching its status."""
        from kubernetes import client, config

        ns, name = self.part.daemonset
        api = client.AppsV1Api(config.new_client_from_config(str(kubeconfig)))
        for ds in watched(api.list_namespaced_daemon_set, ns, timeout=timeout,
                          field_selector=f"metadata.name={name}"):
            st = ds.status
            if st.desired_number_scheduled and st.number_ready == st.desired_number_scheduled:
                return
        raise TestbedError(f"{self.record.name} not ready within {timeout:g} s: "
                           f"{self.pods_state(kubeconfig)} (kubectl -n {ns} logs ds/{name})")

    def pods_state(self, kubeconfig: Path) -> str:
        """The CNI's pods as a line: each one's node, phase and waiting containers (why a
        bring-up did not finish)."""
        from kubernetes import client, config

        ns, name = self.part.daemonset
        api = client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))
        try:
            pods = api.list_namespaced_pod(ns, _request_timeout=10).items
        except Exception as exc:  # noqa: BLE001 - only to say what is known
            return f"its pods could not be listed ({exc.__class__.__name__})"
        return "; ".join(pod_line(p) for p in pods if p.metadata.name.startswith(name)) \
            or "no pod of it was created"


def pod_line(pod) -> str:
    """`pod`'s node, phase and, per container not running, its state's reason and message."""
    parts = [f"{pod.metadata.name} on {pod.spec.node_name or '-'}: {pod.status.phase}"]
    for st in [*(pod.status.init_container_statuses or []),
               *(pod.status.container_statuses or [])]:
        waiting = st.state and st.state.waiting
        if waiting:
            parts.append(f"{st.name} waiting ({waiting.reason}: {waiting.message or '-'}, "
                         f"{st.restart_count} restarts)")
    return ", ".join(parts)


def apply(kubeconfig: Path, docs: list[dict], what: str) -> None:
    """Create the manifest's objects, as `kubectl apply` of a fresh cluster would."""
    from kubernetes import client, config, utils

    api = config.new_client_from_config(str(kubeconfig))
    for doc in docs:
        for c in base.containers(doc):  # numbers where the client wants quantity strings
            for kind in ("limits", "requests"):
                amounts = (c.get("resources") or {}).get(kind) or {}
                amounts.update({k: str(v) for k, v in amounts.items()})
        try:
            utils.create_from_dict(api, doc)
        except utils.FailToCreateError as exc:
            reasons = "; ".join(str(getattr(e, "reason", e)) for e in exc.api_exceptions)
            raise TestbedError(f"{what}: {doc['kind']} {doc['metadata']['name']}: "
                               f"{reasons}") from None
    client.ApiClient.close(api)


# the datapaths a real CNI carries on the testbed cluster -> its record
REAL = {d.name: c for c in cnis.CNIS.values() if c.testbed for d in c.datapaths
        if d.name in c.testbed.datapaths}


def missing(record: base.Cni, binaries: Path) -> str | None:
    """Why the real CNI cannot run here, or None."""
    import hashlib

    from k8sdds.cni import manifests

    assert record.testbed and record.manifest
    lacking = [b for b in record.testbed.binaries if not (binaries / b).exists()]
    if lacking:
        return f"{', '.join(lacking)} not built in {binaries} (run .ci/k8s-test-binaries)"
    where = manifests.path(record.manifest)
    try:
        if hashlib.sha256(where.read_bytes()).hexdigest() != record.manifest.sha256:
            return f"{where} is not the pinned {record.name} manifest (its digest differs)"
    except OSError as exc:
        return f"{where}: {exc.strerror}"
    return None


def choose(datapath: str, mode: str, binaries: Path) -> PodNetwork:
    """The CNI for `datapath`: `real` (refused when it cannot run here), `emulated`, or
    `auto` (real where it can run here, else emulated with the reason)."""
    if mode not in MODES:
        raise UserError(f"--pod-network {mode}: use one of {', '.join(MODES)}")
    record = REAL.get(datapath)
    if mode == "emulated":
        return PodNetwork(datapath)
    if record is None:
        if mode == "real":
            raise UserError(f"--pod-network real: k8sdds runs no real CNI for {datapath} here "
                            f"(real: {', '.join(REAL)}); use --pod-network emulated")
        return PodNetwork(datapath, fallback=f"no real CNI for {datapath} here")
    reason = missing(record, binaries)
    if reason:
        if mode == "real":
            raise UserError(f"--pod-network real: {reason}")
        return PodNetwork(datapath, fallback=f"real {record.name} unavailable: {reason}")
    return Real(datapath, record=record)
