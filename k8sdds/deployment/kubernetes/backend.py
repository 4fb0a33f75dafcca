"""The kubernetes backend: each role is a pod on a real cluster, through the official client.

A run owns a namespace (or its objects in a given one). Inside it k8sdds acts as the
ServiceAccount `k8sdds-runner`, whose Role holds only what a run needs; the kubeconfig's own
credentials serve for what lies outside: the namespace and RBAC objects, nodes, the CNI's
DaemonSets, metrics. Every wait is a watch with a bound; every failure names its reason from
the pod's status and events. Logs come back through the API into the run directory, in the
same layout as the emulated backend's, so parsing and reports do not know the difference.
"""

from __future__ import annotations

import hashlib
import secrets as random
from collections.abc import Mapping, Sequence
from pathlib import Path

from k8sdds import model, stopping
from k8sdds.deployment.base import Handle, Placement, mentions, shippable
from k8sdds.deployment.kubernetes import multicast_pods, pods, watch
from k8sdds.deployment.kubernetes import objects as m
from k8sdds.deployment.kubernetes.api import Api
from k8sdds.deployment.kubernetes.cleanup import delete_repeat, remove
from k8sdds.deployment.kubernetes.services import behind_service, wait_endpoints
from k8sdds.deployment.kubernetes.usage import Usage
from k8sdds.deployment.kubernetes.view import ApiView
from k8sdds.deployment.options import KubernetesOptions
from k8sdds.deployment.placement import place, side
from k8sdds.engines.base import Command
from k8sdds.errors import KubernetesError, UserError
from k8sdds.model import DEBIAN_ARCH, PATHS, SERVICE_PATHS, Limits, Test
from k8sdds.results import atomic_write

MAX_PODS_PER_NODE = 110  # the kubelet's default
GONE_TIMEOUT = 30.0  # seconds deleted pods get to go before they are removed by force


class KubernetesBackend:
    name = "kubernetes"
    local_engines = False  # they run in the engine image, not on this machine
    images = True  # roles run in container images (--image, --rtiperftest-image)

    def __init__(self, options: KubernetesOptions = KubernetesOptions()):
        self.options = options
        self.run_id = random.token_hex(3)
        self.namespace = options.namespace or f"k8sdds-{self.run_id}"
        self.api = Api(options.kubeconfig, options.context, self.namespace)
        self.cluster = ApiView(self.api, options.arch)
        self._not_applied: list[str] = []
        self.usage_reader = Usage(self.api, self._not_applied)
        self._created_namespace = False
        self._host = False  # the current datapath is `host`: every pod uses the node's network
        self._handles: list[Handle] = []
        self._samplers: list[Handle] = []  # count_traffic's pods, read at teardown
        self._pods = ""  # the current repeat's pod names' start
        self._repeat_labels: set[str] = set()
        self._collected: set[str] = set()  # pods whose log is in the run directory
        self._services: list[str] = []  # the current repeat's Services
        self._nodes_of: dict[str, str] = {}  # pod -> node, of the current repeat
        self._repeat = ""  # the current repeat's label value
        self._host_roles: set[str] = set()
        self._names: dict[str, str] = {}  # role -> the address its peers are given
        self._secrets_dir: Path | None = None
        self._credentials_digest = ""

    # ---- the cluster ------------------------------------------------------------------

    def limits(self) -> Limits:
        workers = set(self.cluster.workers())
        arches = {n["name"]: DEBIAN_ARCH.get(n["arch"], n["arch"])
                  for n in self.cluster.nodes() if n["name"] in workers}
        return Limits(max_subscribers=max(1, len(workers)) * MAX_PODS_PER_NODE, paths=PATHS,
                      arches=arches)

    def datapaths(self) -> Sequence[str]:
        """The cluster's own datapath (the default), and `host`: the nodes' own network."""
        return list(dict.fromkeys([self.cluster.detected().datapath, "host"]))

    def unavailable(self, datapath: str) -> str | None:
        found = self.cluster.detected()
        if datapath in self.datapaths():
            return None
        return (f"this cluster's datapath is {found.datapath} ({found.cni}); a run uses the "
                "CNI the cluster has (or host: hostNetwork pods), it does not change it")

    def up(self) -> None:
        nodes = self.cluster.nodes()
        names = [n["name"] for n in nodes]
        for option, wanted in (("--pub-node", [self.options.pub_node]
                                if self.options.pub_node else []),
                               ("--sub-nodes", self.options.sub_nodes)):
            for name in wanted:
                if name not in names:
                    raise UserError(f"{option}: node {name!r} does not exist in this cluster; "
                                    f"its nodes: {', '.join(names) or 'none'}")
        if not self.cluster.workers() and not self.options.pub_node:
            arch = self.options.arch
            raise UserError("no Ready worker node" + (f" of architecture {arch}" if arch else "")
                            + f" to run pods on; nodes: {pods.node_list(nodes)}")
        api, ns, run = self.api, self.namespace, self.run_id
        core, rbac = api.core(admin=True), api.rbac()
        if not api.exists(core.read_namespace, ns):
            api.call(f"create namespace {ns}", core.create_namespace, m.namespace(ns, run))
            self._created_namespace = True
        try:
            for name in (m.RUNNER, m.ENGINE):
                api.call(f"create ServiceAccount {name}", core.create_namespaced_service_account,
                         ns, m.service_account(name, ns, run))
            api.call(f"create Role {m.RUNNER}", rbac.create_namespaced_role, ns,
                     m.role(ns, run))
            api.call(f"create RoleBinding {m.RUNNER}", rbac.create_namespaced_role_binding, ns,
                     m.role_binding(ns, run))
            api.call(f"create Service {m.SUBDOMAIN}", core.create_namespaced_service, ns,
                     m.headless_service(ns, run))
            try:
                api.use_runner_token()
            except KubernetesError as exc:
                self._not_applied.append(f"least privilege: {exc}; the run acts with the "
                                         "kubeconfig's own credentials")
        except BaseException:
            self.down()
            raise

    def use_datapath(self, name: str) -> None:
        self._host = model.datapath(name).host_network

    # ---- a repeat ---------------------------------------------------------------------

    def deploy(self, test: Test, roles: Sequence[str], repeat: int = 1,
               service_ports: Sequence[tuple[int, str]] = ()) -> Mapping[str, Placement]:
        self.cluster.refresh()
        workers = self.cluster.workers()
        names = {n["name"]: n for n in self.cluster.nodes()}
        pub = self.options.pub_node or (workers[0] if workers else None)
        subs = list(self.options.sub_nodes) or [w for w in workers if w != pub] or [pub]
        for node in [pub, *subs]:
            if node not in names:
                raise KubernetesError(f"node {node} does not exist (nodes: "
                                      f"{pods.node_list(self.cluster.nodes())})")
            if not names[node]["ready"]:
                raise KubernetesError(f"node {node} is not Ready")
        on = place(roles, [pub, *subs], test.placement)
        # pod names carry the run's id: a given namespace may hold another run's pods
        self._repeat = f"t{test.number}-r{repeat}-{self.run_id}"
        self._pods = f"t{test.number}-r{repeat}"  # the repeat's pods' names begin so
        self.usage_reader.reset()
        out = {}
        for role in roles:
            pod = f"t{test.number}-r{repeat}-{role}-{self.run_id}"
            host = self._host or side(role, roles, test.effective_path) == "node"
            out[role] = Placement(role, on[role], m.dns_name(pod), "" if host else "eth0",
                                  pod, pod)
        self._host_roles = {r for r in roles if out[r].interface == ""}
        self._names = {r: p.address for r, p in out.items()}
        if test.effective_path in SERVICE_PATHS:
            server = roles[1]  # the first role the driver talks to
            out[server], service = behind_service(
                self.api, self.run_id, self._repeat, out[server],
                test.effective_path == "external-nodeport", service_ports,
                names[out[server].node]["address"])
            self._services.append(service)
        return out

    def role_dirs(self, config_dir: Path, secrets_dir: Path) -> tuple[str, str]:
        self._secrets_dir = secrets_dir
        return m.CONFIG_MOUNT, m.SECRETS_MOUNT

    def count_traffic(self, nodes: Sequence[str], folder: Path, start: float) -> None:
        """The sampler (parsers.counters) in a pod on each placed node's own network (the
        engine image's bash), each running before this returns; its log is read at
        teardown, the pod goes with the repeat."""
        from k8sdds.parsers import counters

        core = self.api.core()
        for i, node in enumerate(nodes):
            pod = f"{self._pods}-c{i}-{self.run_id}"
            params = m.PodParams(
                name=pod, namespace=self.namespace, run_id=self.run_id, repeat=self._repeat,
                role=counters.ROLE, node=node, image=self.options.image,
                argv=counters.argv(start), host_network=True, arch=self.options.arch)
            self.api.call(f"create pod {pod} on {node}", core.create_namespaced_pod,
                          self.namespace, m.pod(params))
            self._repeat_labels.add(self._repeat)
            self._samplers.append(Handle(counters.ROLE, None,
                                         folder / f"{counters.PREFIX}{node}.log", ref=pod))
        # running before the roles are started: its first sample comes before `start`
        self._until(self._samplers, pods.started, self.options.pod_timeout, "running")

    def start_lead(self, roles: int) -> float:
        """A pod a role, created one after the other and each waited for (its image
        already on the node): seconds each."""
        return 5.0 + 1.0 * roles

    def start(self, placement: Placement, command: Command, log: Path,
              listen: int | None = None) -> Handle:
        api, core, pod = self.api, self.api.core(), placement.where
        needs_credentials = mentions(command, m.SECRETS_MOUNT)
        if needs_credentials:
            self._ship_credentials(core)
        config_map = None
        if command.files:
            config_map = f"{pod}-config"
            api.call(f"create ConfigMap {config_map}", core.create_namespaced_config_map,
                     self.namespace, m.config_map(config_map, self.namespace, self.run_id,
                                                  command.files,
                                                  **{m.REPEAT_LABEL: self._repeat}))
        params = m.PodParams(
            name=pod, namespace=self.namespace, run_id=self.run_id, repeat=self._repeat,
            role=placement.role, node=placement.node, image=command.image or self.options.image,
            argv=tuple(command.argv), env=dict(command.env), config_map=config_map,
            credentials=needs_credentials, host_network=placement.role in self._host_roles,
            arch=self.options.arch, listen=listen,
            # the roles started before it: theirs exist (later ones find it themselves)
            peers=m.peers({h.role: self._names[h.role] for h in self._handles},
                          placement.role))
        api.call(f"create pod {pod} on {placement.node}", core.create_namespaced_pod,
                 self.namespace, m.pod(params))
        self._repeat_labels.add(self._repeat)
        handle = Handle(placement.role, None, log, ref=pod)
        self._handles.append(handle)
        self._nodes_of[pod] = placement.node
        return handle

    def _ship_credentials(self, core) -> None:
        """The run's credentials as one Secret (no CA key), replaced when they change."""
        files = shippable(self._secrets_dir)
        if not files:
            return
        digest = hashlib.sha256(repr(sorted(files.items())).encode()).hexdigest()
        if digest == self._credentials_digest:
            return
        body = m.secret(m.CREDENTIALS, self.namespace, self.run_id, files)
        if self._credentials_digest or self.api.exists(core.read_namespaced_secret,
                                                       m.CREDENTIALS, self.namespace):
            self.api.call("replace Secret " + m.CREDENTIALS, core.replace_namespaced_secret,
                          m.CREDENTIALS, self.namespace, body)
        else:
            self.api.call("create Secret " + m.CREDENTIALS, core.create_namespaced_secret,
                          self.namespace, body)
        self._credentials_digest = digest

    def _until(self, handles: Sequence[Handle], done, timeout: float, goal: str,
               expire_ok: bool = False) -> None:
        watch.until(self.api, f"{m.REPEAT_LABEL}={self._repeat}", [h.ref for h in handles],
                    done, timeout, goal, expire_ok)

    def ready(self, handles: Sequence[Handle]) -> None:
        self._until(handles, pods.started, self.options.pod_timeout, "running")

    def wait_listening(self, handle: Handle, port: int, timeout: float) -> bool:
        try:
            self._until([handle], pods.ready_or_done, timeout, f"listening on {port}")
        except KubernetesError:
            return False
        pod = self.api.pod(handle.ref)
        return (pod is not None and pods.phase(pod) == "Running"
                and all(wait_endpoints(self.api, svc, timeout) for svc in self._services))

    def wait(self, handle: Handle, timeout: float) -> int | None:
        try:
            self._until([handle], pods.finished, timeout, "finished", expire_ok=True)
        except watch.Expired:
            return None
        pod = self.api.pod(handle.ref)
        code = pods.exit_code(pod) if pod else None
        self._collect(handle)
        return code if code is not None else (0 if pod and pods.phase(pod) == "Succeeded"
                                              else 1)

    def stop(self, handles: Sequence[Handle], grace: float = 2.0) -> dict[str, int]:
        codes = {}
        for handle in handles:
            pod = self.api.pod(handle.ref)
            code = pods.exit_code(pod) if pod else None
            if code is None:
                self._collect(handle)  # what it printed so far: the pod's log goes with it
                handle.stopped = True
                self.api.delete(self.api.core().delete_namespaced_pod, "pod", handle.ref,
                                grace_period_seconds=int(grace))
                code = -15
            codes[handle.role] = code
        return codes

    def teardown(self) -> None:
        for handle in (*self._handles, *self._samplers):
            self._collect(handle)
        self._handles, self._nodes_of, self._samplers = [], {}, []
        core = self.api.core()
        for label in sorted(self._repeat_labels):
            delete_repeat(self.api, f"{m.REPEAT_LABEL}={label}",
                          stopping.bound(GONE_TIMEOUT))
        self._repeat_labels.clear()
        for name in self._services:
            self.api.delete(core.delete_namespaced_service, "Service", name)
        self._services = []

    def _collect(self, handle: Handle) -> None:
        """The role's log, through the API, into the run directory (once)."""
        if handle.ref not in self._collected:
            data = self.api.pod_log(handle.ref, handle.role)
            if data is not None:  # None: never started, or gone; the parser says so
                atomic_write(handle.log, data)
                self._collected.add(handle.ref)

    def down(self) -> None:
        """Everything the run created goes: pods, ConfigMaps, the Secret, RBAC, the
        namespace (when the run made it), object by object."""
        try:
            self.teardown()
        finally:
            self.api.drop_runner_token()
            remove(self.api.admin, self.namespace, self.run_id,
                   delete_namespace=self._created_namespace)
            self._created_namespace = False

    # ---- observation ------------------------------------------------------------------

    def role_cpu(self, handles: Sequence[Handle]) -> dict:
        """Not read yet on this backend."""
        return {}

    def node_cpu(self) -> dict[str, float]:
        """Not read yet on this backend."""
        return {}

    def usage(self) -> dict[str, float]:
        return self.usage_reader.read(self._handles, self._nodes_of,
                                      self.cluster.detected().daemonset)

    def fingerprint(self, placement: Mapping[str, Placement]) -> dict[str, dict]:
        """Each placed node: what its probes read (`probes`: one pod on the host's network,
        one on the pod network, before any role starts) and what the API shows (kernel, OS,
        runtime and kubelet versions), with the CNI (its DaemonSet's images for the version,
        the detected datapath for the mode). A node whose probes cannot run gets the API's
        part and, in `not_read`, why the rest is missing."""
        from k8sdds import fingerprint as fp
        from k8sdds.deployment.kubernetes import probes

        found = self.cluster.detected()
        version = "unknown"
        if found.daemonset:
            ns, name = found.daemonset.split("/", 1)
            try:
                ds = self.api.call("", self.api.apps().read_namespaced_daemon_set, name, ns)
                version = ", ".join(sorted({c.image for c in ds.spec.template.spec.containers}))
            except KubernetesError:
                pass  # not ours to read: the version stays unknown
        try:
            mode = found.mode or model.datapath(found.datapath).encapsulation
        except KeyError:
            mode = found.cni
        cni = {"name": found.cni, "version": version, "mode": mode}
        engines = {"image": self.options.image}
        nodes = {n["name"]: n for n in self.cluster.nodes()}
        placed = list(dict.fromkeys(p.node for p in placement.values()))
        read_on = ("host",) if self._host else probes.SIDES  # `host`: no pod on the pod network
        unread = "interfaces, offloads, sysctls, CPU governor"
        # the multicast probe's receivers start beside the fingerprint's pods: on an ARM
        # node each pod's start is seconds, and one after the other cost a Pi's run twice
        multicast = multicast_pods.begin(
            self.api, self.run_id, self.options.image, placed, self.options.pod_timeout,
            self._host, {n: nodes.get(n, {}).get("address", "") for n in placed},
            self.options.arch)
        try:
            logs = probes.read(self.api, self.run_id, self.options.image, placed,
                               self.options.pod_timeout, self.options.arch, read_on)
            why = f"{unread} (its probe printed nothing of them)"  # for a node whose did not
        except KubernetesError as exc:
            logs, why = {}, f"{unread} (its probe: {exc})"
        except BaseException:  # a stop: the probe's pods go too (`outcome` deletes them)
            multicast_pods.abandon(multicast)
            raise
        probed = multicast_pods.outcome(multicast)
        out = {}
        for name in placed:
            info = nodes.get(name, {})
            api_part = {"kernel": info.get("kernel", "unknown"), "os": info.get("os", ""),
                        "arch": info.get("arch", ""),
                        "runtime": info.get("runtime", "unknown"),
                        "kubelet": info.get("kubelet", "unknown")}
            if all(fp.END in logs.get((name, where), "") for where in read_on):
                read = fp.node(fp.recorded(logs[name, "host"]), cni, engines,
                               {"pod": fp.recorded(logs[name, "pod"])}
                               if "pod" in read_on else {})
                out[name] = {**read, **api_part}
            else:
                out[name] = {**api_part, "cni": cni, "engines": engines, "not_read": why}
            if probed:
                out[name]["multicast"] = probed
        return out

    def describe(self) -> dict:
        found = self.cluster.detected()
        self.usage_reader.metrics(found.daemonset)  # says now whether metrics-server is there
        return {"server": self.api.server, "context": self.options.context,
                "namespace": self.namespace, "run_id": self.run_id, "image": self.options.image,
                "cni": found.cni, "datapath": found.datapath, "cni_daemonset": found.daemonset,
                "nodes": self.cluster.nodes(), "not_applied": list(self._not_applied)}
