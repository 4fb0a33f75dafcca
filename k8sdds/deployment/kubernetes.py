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
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from k8sdds import model
from k8sdds.deployment import cni
from k8sdds.deployment import manifests as m
from k8sdds.deployment.base import Handle, Placement, mentions, shippable
from k8sdds.deployment.placement import place, sides
from k8sdds.errors import KubernetesError, UserError
from k8sdds.model import PATHS, SERVICE_PATHS, Limits, Test
from k8sdds.perftest.base import Command
from k8sdds.results import atomic_write

DEFAULT_IMAGE = "ghcr.io/k8sdds/engines:0.1"
MAX_PODS_PER_NODE = 110  # the kubelet's default
GONE_TIMEOUT = 30.0  # seconds deleted pods get to go before they are removed by force
TOKEN_SECONDS = 24 * 3600  # the runner's token; renewed at half its life
# container states that will not get better by waiting
FATAL_WAITING = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
                 "CreateContainerConfigError", "CreateContainerError", "RunContainerError",
                 "CrashLoopBackOff")


def _client():
    try:
        import kubernetes  # noqa: F401
    except ImportError:  # pragma: no cover - a dependency of the package
        raise UserError("the kubernetes backend needs the Python package `kubernetes` "
                        "(pip install kubernetes)") from None
    from kubernetes import client, config, watch

    return client, config, watch


def connect(kubeconfig: Path | None = None, context: str | None = None):
    """An API client from a kubeconfig; a clear error when it cannot be loaded."""
    _, config, _ = _client()
    try:
        return config.new_client_from_config(
            config_file=str(kubeconfig) if kubeconfig else None, context=context)
    except (config.ConfigException, OSError, TypeError, ValueError) as exc:
        where = kubeconfig or "the default kubeconfig (~/.kube/config, $KUBECONFIG)"
        raise UserError(f"cannot load {where}"
                        + (f" context {context!r}" if context else "") + f": {exc}") from None


def managed_namespaces(api_client) -> list[str]:
    """The namespaces k8sdds made (labelled managed-by=k8sdds)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    try:
        spaces = client.CoreV1Api(api_client).list_namespace(
            label_selector=m.MANAGED_SELECTOR, _request_timeout=30).items
    except (ApiException, HTTPError, OSError) as exc:
        raise KubernetesError(f"list namespaces on {api_client.configuration.host}: {exc}"
                           ) from None
    return sorted(ns.metadata.name for ns in spaces)


class KubernetesBackend:
    name = "kubernetes"
    local_engines = False  # they run in the engine image, not on this machine
    options = ("kubeconfig", "context", "namespace", "image", "pub_node", "sub_nodes", "arch",
               "pod_timeout", "rtiperftest_image")  # of `k8sdds run`, its own

    def __init__(self, kubeconfig: Path | None = None, context: str | None = None,
                 namespace: str | None = None, image: str = DEFAULT_IMAGE,
                 pub_node: str | None = None, sub_nodes: Sequence[str] = (),
                 arch: str | None = None, pod_timeout: float = 120.0,
                 rtiperftest_image: str | None = None, **_other_backends):
        self._admin = connect(kubeconfig, context)
        self.server = self._admin.configuration.host
        self.context = context
        self.run_id = random.token_hex(3)
        self.namespace = namespace or f"k8sdds-{self.run_id}"
        self._given_namespace = namespace is not None
        self.image = image
        # engine -> the image its pods run, where it is not the engine image
        self.images = {"rtiperftest": rtiperftest_image} if rtiperftest_image else {}
        self._image = image  # the current repeat's
        self.pub_node, self.sub_nodes, self.arch = pub_node, list(sub_nodes), arch
        self.pod_timeout = pod_timeout
        self._ns_client = None  # the runner ServiceAccount's client, once up
        self._token_renew = 0.0
        self._created_namespace = False
        self._nodes: list[dict] | None = None
        self._detected: cni.Detected | None = None
        self._host = False  # the current datapath is `host`: every pod uses the node's network
        self._handles: list[Handle] = []
        self._repeat_labels: set[str] = set()
        self._collected: set[str] = set()  # pods whose log is in the run directory
        self._services: list[str] = []  # the current repeat's Services
        self._nodes_of: dict[str, str] = {}  # pod -> node, of the current repeat
        self._load: float | None = None  # the last node load read in this repeat
        self._repeat = ""  # the current repeat's label value
        self._host_roles: set[str] = set()
        self._secrets_dir: Path | None = None
        self._credentials_digest = ""
        self._not_applied: list[str] = []
        self._metrics: bool | None = None
        self._cni_cpu = _Integral()
        self._node_cpu = _Integral()

    # ---- API access -------------------------------------------------------------------

    def _core(self, admin: bool = False):
        client, _, _ = _client()
        if not admin and self._ns_client is not None:
            if time.monotonic() > self._token_renew:
                self._ns_client = self._runner_client()
            return client.CoreV1Api(self._ns_client)
        return client.CoreV1Api(self._admin)

    def _call(self, what: str, fn: Callable, *args, **kwargs):
        """One API call; its failure becomes a KubernetesError that says what was attempted."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            return fn(*args, _request_timeout=30, **kwargs)
        except ApiException as exc:
            hint = (f" (left by an earlier run? `k8sdds cleanup --namespace {self.namespace}` "
                    "removes it)" if exc.status == 409 else "")
            raise KubernetesError(f"{what}: {exc.status} {exc.reason}: {_api_message(exc)}{hint}"
                               ) from None
        except (HTTPError, OSError) as exc:
            raise KubernetesError(f"{what}: cannot reach the API server {self.server}: {exc}"
                               ) from None

    def _runner_client(self):
        """A client that authenticates as the runner ServiceAccount (a bound token)."""
        client, _, _ = _client()
        token = self._call("request a token for ServiceAccount " + m.RUNNER,
                           client.CoreV1Api(self._admin).create_namespaced_service_account_token,
                           m.RUNNER, self.namespace,
                           {"spec": {"expirationSeconds": TOKEN_SECONDS}})
        conf = client.Configuration()
        admin = self._admin.configuration
        conf.host, conf.verify_ssl, conf.ssl_ca_cert = admin.host, admin.verify_ssl, \
            admin.ssl_ca_cert
        conf.proxy, conf.assert_hostname = admin.proxy, admin.assert_hostname
        conf.api_key = {"authorization": token.status.token}
        conf.api_key_prefix = {"authorization": "Bearer"}
        self._token_renew = time.monotonic() + TOKEN_SECONDS / 2
        return client.ApiClient(conf)

    # ---- the cluster ------------------------------------------------------------------

    def nodes(self) -> list[dict]:
        """Every node: name, role, arch, kernel, kubelet, address, ready (read once)."""
        if self._nodes is None:
            items = self._call("list nodes", self._core(admin=True).list_node).items
            self._nodes = sorted((_node(n) for n in items), key=lambda n: n["name"])
        return self._nodes

    def workers(self) -> list[str]:
        """Ready nodes pods may go to (no control-plane role), of --arch when given."""
        return [n["name"] for n in self.nodes() if n["ready"] and n["role"] == "worker"
                and (self.arch is None or n["arch"] == self.arch)]

    def detected(self) -> cni.Detected:
        """The cluster's CNI, from its DaemonSets (read once)."""
        if self._detected is None:
            client, _, _ = _client()
            apps = client.AppsV1Api(self._admin)
            sets = self._call("list DaemonSets", apps.list_daemon_set_for_all_namespaces).items
            core = self._core(admin=True)
            maps = {}
            for ns, name in cni.CONFIG_MAPS:
                try:
                    cm = self._call("", core.read_namespaced_config_map, name, ns)
                except KubernetesError:
                    continue  # absent (or not ours to read): detection goes without it
                maps[(ns, name)] = {"data": cm.data or {}}
            self._detected = cni.detect(
                [self._admin.sanitize_for_serialization(d) for d in sets], maps)
        return self._detected

    def limits(self) -> Limits:
        return Limits(max_subscribers=max(1, len(self.workers())) * MAX_PODS_PER_NODE,
                      paths=PATHS)

    def datapaths(self) -> Sequence[str]:
        """The cluster's own datapath (the default), and `host`: the nodes' own network."""
        return list(dict.fromkeys([self.detected().datapath, "host"]))

    def unavailable(self, datapath: str) -> str | None:
        found = self.detected()
        if datapath in self.datapaths():
            return None
        return (f"this cluster's datapath is {found.datapath} ({found.cni}); a run uses the "
                "CNI the cluster has (or host: hostNetwork pods), it does not change it")

    def up(self) -> None:
        client, _, _ = _client()
        nodes = self.nodes()
        names = [n["name"] for n in nodes]
        for option, wanted in (("--pub-node", [self.pub_node] if self.pub_node else []),
                               ("--sub-nodes", self.sub_nodes)):
            for name in wanted:
                if name not in names:
                    raise UserError(f"{option}: node {name!r} does not exist in this cluster; "
                                    f"its nodes: {', '.join(names) or 'none'}")
        if not self.workers() and not self.pub_node:
            raise UserError("no Ready worker node"
                            + (f" of architecture {self.arch}" if self.arch else "")
                            + f" to run pods on; nodes: {_node_list(nodes)}")
        core = self._core(admin=True)
        rbac = client.RbacAuthorizationV1Api(self._admin)
        if not self._exists(core.read_namespace, self.namespace):
            self._call(f"create namespace {self.namespace}", core.create_namespace,
                       m.namespace(self.namespace, self.run_id))
            self._created_namespace = True
        try:
            for name in (m.RUNNER, m.ENGINE):
                self._call(f"create ServiceAccount {name}",
                           core.create_namespaced_service_account, self.namespace,
                           m.service_account(name, self.namespace, self.run_id))
            self._call(f"create Role {m.RUNNER}", rbac.create_namespaced_role, self.namespace,
                       m.role(self.namespace, self.run_id))
            self._call(f"create RoleBinding {m.RUNNER}", rbac.create_namespaced_role_binding,
                       self.namespace, m.role_binding(self.namespace, self.run_id))
            self._call(f"create Service {m.SUBDOMAIN}", core.create_namespaced_service,
                       self.namespace, m.headless_service(self.namespace, self.run_id))
            try:
                self._ns_client = self._runner_client()
            except KubernetesError as exc:
                self._not_applied.append(f"least privilege: {exc}; the run acts with the "
                                         "kubeconfig's own credentials")
        except BaseException:
            self.down()
            raise

    def _exists(self, read: Callable, *args) -> bool:
        from kubernetes.client.exceptions import ApiException

        try:
            read(*args, _request_timeout=30)
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise KubernetesError(f"read {args}: {exc.status} {exc.reason}") from None

    def use_datapath(self, name: str) -> None:
        self._host = model.datapath(name).host_network

    # ---- a repeat ---------------------------------------------------------------------

    def deploy(self, test: Test, roles: Sequence[str], repeat: int = 1,
               service_ports: Sequence[tuple[int, str]] = ()) -> Mapping[str, Placement]:
        self._nodes = None  # a node may have gone since the last repeat
        workers = self.workers()
        names = {n["name"]: n for n in self.nodes()}
        pub = self.pub_node or (workers[0] if workers else None)
        subs = self.sub_nodes or [w for w in workers if w != pub] or [pub]
        for node in [pub, *subs]:
            if node not in names:
                raise KubernetesError(f"node {node} does not exist (nodes: "
                                   f"{_node_list(self.nodes())})")
            if not names[node]["ready"]:
                raise KubernetesError(f"node {node} is not Ready")
        on = place(roles, [pub, *subs], test.placement)
        first, other = sides(test.effective_path)
        # pod names carry the run's id: a given namespace may hold another run's pods
        self._repeat = f"t{test.number}-r{repeat}-{self.run_id}"
        self._image = self.images.get(test.engine, self.image)
        out = {}
        for role in roles:
            pod = f"t{test.number}-r{repeat}-{role}-{self.run_id}"
            host = self._host or (first if role == roles[0] else other) == "node"
            out[role] = Placement(role, on[role], m.dns_name(pod), "" if host else "eth0",
                                  pod, pod)
        self._host_roles = {r for r in roles if out[r].interface == ""}
        if test.effective_path in SERVICE_PATHS:
            server = roles[1]  # the first role the driver talks to
            out[server] = self._behind_service(test, out[server], names, service_ports)
        return out

    def _behind_service(self, test: Test, server: Placement, nodes: dict,
                        ports: Sequence[tuple[int, str]]) -> Placement:
        """A Service in front of `server`: its ClusterIP (pod-service), or its node's address
        and the NodePort (external-nodeport) become the address the driver dials."""
        node_port = test.effective_path == "external-nodeport"
        ports = list(ports)
        name = f"{server.where}-svc"
        core = self._core()
        # one NodePort for every protocol of a port (iperf3 -u: TCP control, UDP data): the
        # first is allocated, the others are asked for with its number
        body = m.service(name, self.namespace, self.run_id, self._repeat, server.role,
                         ports[:1] if node_port else ports, node_port)
        svc = self._call(f"create Service {name}", core.create_namespaced_service,
                         self.namespace, body)
        self._services.append(name)
        if not node_port:
            return replace(server, address=svc.spec.cluster_ip)
        allocated = svc.spec.ports[0].node_port
        extra = [{"op": "add", "path": "/spec/ports/-",
                  "value": {"name": f"{proto.lower()}-{port}", "port": port,
                            "targetPort": port, "protocol": proto, "nodePort": allocated}}
                 for port, proto in ports[1:]]
        if extra:
            self._call(f"add ports to Service {name}", core.patch_namespaced_service, name,
                       self.namespace, extra)
        address = nodes[server.node]["address"]
        if not address:
            raise KubernetesError(f"node {server.node} has no InternalIP for its NodePort")
        return replace(server, address=address,
                       ports={port: allocated for port, _ in ports})

    def role_dirs(self, config_dir: Path, secrets_dir: Path) -> tuple[str, str]:
        self._secrets_dir = secrets_dir
        return m.CONFIG_MOUNT, m.SECRETS_MOUNT

    def start(self, placement: Placement, command: Command, log: Path,
              listen: int | None = None) -> Handle:
        core = self._core()
        pod = placement.where
        needs_credentials = mentions(command, m.SECRETS_MOUNT)
        if needs_credentials:
            self._ship_credentials(core)
        config_map = None
        if command.files:
            config_map = f"{pod}-config"
            self._call(f"create ConfigMap {config_map}", core.create_namespaced_config_map,
                       self.namespace, m.config_map(config_map, self.namespace, self.run_id,
                                                    command.files,
                                                    **{m.REPEAT_LABEL: self._repeat}))
        params = m.PodParams(
            name=pod, namespace=self.namespace, run_id=self.run_id, repeat=self._repeat,
            role=placement.role, node=placement.node, image=self._image,
            argv=tuple(command.argv), env=dict(command.env), config_map=config_map,
            credentials=needs_credentials, host_network=placement.role in self._host_roles,
            arch=self.arch, listen=listen)
        self._call(f"create pod {pod} on {placement.node}", core.create_namespaced_pod,
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
        if self._credentials_digest or self._exists(core.read_namespaced_secret,
                                                    m.CREDENTIALS, self.namespace):
            self._call("replace Secret " + m.CREDENTIALS, core.replace_namespaced_secret,
                       m.CREDENTIALS, self.namespace, body)
        else:
            self._call("create Secret " + m.CREDENTIALS, core.create_namespaced_secret,
                       self.namespace, body)
        self._credentials_digest = digest

    def ready(self, handles: Sequence[Handle]) -> None:
        self._watch_until(handles, _started, self.pod_timeout, "running")

    def wait_listening(self, handle: Handle, port: int, timeout: float) -> bool:
        try:
            self._watch_until([handle], _ready_or_done, timeout, f"listening on {port}")
        except KubernetesError:
            return False
        pod = self._pod(handle)
        return pod is not None and _phase(pod) == "Running"

    def wait(self, handle: Handle, timeout: float) -> int | None:
        try:
            self._watch_until([handle], _finished, timeout, "finished", expire_ok=True)
        except _Expired:
            return None
        pod = self._pod(handle)
        code = _exit_code(pod) if pod else None
        self._collect(handle)
        return code if code is not None else (0 if pod and _phase(pod) == "Succeeded" else 1)

    def stop(self, handles: Sequence[Handle], grace: float = 2.0) -> dict[str, int]:
        codes = {}
        for handle in handles:
            pod = self._pod(handle)
            code = _exit_code(pod) if pod else None
            if code is None:
                self._collect(handle)  # what it printed so far: the pod's log goes with it
                handle.stopped = True
                self._delete_pod(handle.ref, grace)
                code = -15
            codes[handle.role] = code
        return codes

    def teardown(self) -> None:
        for handle in self._handles:
            self._collect(handle)
        self._handles = []
        self._nodes_of, self._load = {}, None
        for label in sorted(self._repeat_labels):
            self._delete_repeat(label)
        self._repeat_labels.clear()
        core = self._core()
        for name in self._services:
            self._delete(core.delete_namespaced_service, "Service", name)
        self._services = []

    def down(self) -> None:
        """Everything the run created goes: pods, ConfigMaps, the Secret, RBAC, the
        namespace (when the run made it). Done object by object, as a cluster without a
        namespace controller (or a slow one) would otherwise keep them."""
        try:
            self.teardown()
        finally:
            self._ns_client = None
            remove(self._admin, self.namespace, self.run_id,
                   delete_namespace=self._created_namespace)
            self._created_namespace = False

    # ---- observation ------------------------------------------------------------------

    def usage(self) -> dict[str, float]:
        """CPU seconds of the CNI's pods and of the nodes, integrated from metrics-server's
        rates, and the CNI pods' memory now (said once, in the manifest, when
        metrics-server is absent); the 1-minute load average of the nodes the repeat runs
        on, read in its own pods (kept from the last reading while one still ran)."""
        out: dict[str, float] = {}
        load = self._node_load()
        if load is not None:
            self._load = load
        if self._load is not None and self._handles:
            out["node_load1"] = self._load
        metrics = self._read_metrics()
        if metrics is None:
            return out
        cni_cores, node_cores, cni_mb = metrics
        return {**out, "datapath_cpu_s": self._cni_cpu.add(cni_cores),
                "node_cpu_s": self._node_cpu.add(node_cores), "datapath_memory_mb": cni_mb}

    def _node_load(self) -> float | None:
        """Mean 1-minute load average over the repeat's nodes: `cat /proc/loadavg` by exec
        in one running pod per node (the file is the node's: procfs does not namespace it)."""
        from kubernetes.stream import stream

        per_node: dict[str, Handle] = {}
        for handle in self._handles:
            per_node.setdefault(self._nodes_of.get(handle.ref, ""), handle)
        core = self._core()
        loads = []
        for handle in per_node.values():
            try:
                out = stream(core.connect_get_namespaced_pod_exec, handle.ref, self.namespace,
                             container=handle.role, command=["cat", "/proc/loadavg"],
                             stderr=True, stdin=False, stdout=True, tty=False,
                             _request_timeout=10)
                loads.append(float(str(out).split()[0]))
            except Exception:  # noqa: BLE001 - finished, not running yet, no `cat`: skip it
                continue
        return sum(loads) / len(loads) if loads else None

    def _read_metrics(self) -> tuple[float, float, float] | None:
        if self._metrics is False:
            return None
        client, _, _ = _client()
        custom = client.CustomObjectsApi(self._admin)
        try:
            nodes = custom.list_cluster_custom_object("metrics.k8s.io", "v1beta1", "nodes",
                                                      _request_timeout=10)
            ds = self.detected().daemonset
            pods = {"items": []}
            if ds:
                pods = custom.list_namespaced_custom_object(
                    "metrics.k8s.io", "v1beta1", ds.split("/")[0], "pods", _request_timeout=10)
        except Exception as exc:  # noqa: BLE001 - absent, forbidden or broken: said once
            if self._metrics is None:
                self._not_applied.append(
                    "CNI and node CPU: metrics-server is not installed or not readable "
                    f"({getattr(exc, 'status', '') or type(exc).__name__})")
            self._metrics = False
            return None
        self._metrics = True
        return metrics_totals(nodes, pods, self.detected().daemonset.split("/")[-1])

    def describe(self) -> dict:
        found = self.detected()
        self._read_metrics()  # says now, in not_applied, whether metrics-server is there
        return {"server": self.server, "context": self.context, "namespace": self.namespace,
                "run_id": self.run_id, "image": self.image, "images": dict(self.images),
                "cni": found.cni,
                "datapath": found.datapath, "cni_daemonset": found.daemonset,
                "nodes": self.nodes(), "not_applied": list(self._not_applied)}

    # ---- helpers ----------------------------------------------------------------------

    def _pod(self, handle: Handle) -> dict | None:
        from kubernetes.client.exceptions import ApiException

        try:
            pod = self._core().read_namespaced_pod(handle.ref, self.namespace,
                                                   _request_timeout=30)
        except ApiException:
            return None
        return self._admin.sanitize_for_serialization(pod)

    def _watch_until(self, handles: Sequence[Handle], done: Callable[[dict], bool],
                     timeout: float, goal: str, expire_ok: bool = False) -> None:
        """Watch the repeat's pods until `done` holds for every one of `handles`. A pod that
        cannot get there raises KubernetesError with its reason; running out of time raises it
        too (or _Expired with expire_ok)."""
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        _, _, watch = _client()
        waiting = {h.ref for h in handles}
        if not waiting:
            return
        core = self._core()
        deadline = time.monotonic() + timeout
        last: dict[str, dict] = {}
        while waiting:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            w = watch.Watch()
            try:
                for event in w.stream(core.list_namespaced_pod, self.namespace,
                                      label_selector=f"{m.REPEAT_LABEL}={self._repeat}",
                                      timeout_seconds=max(1, int(left + 0.999)),
                                      _request_timeout=left + 10):
                    pod = event["raw_object"]
                    name = pod["metadata"]["name"]
                    if name not in waiting:
                        continue
                    last[name] = pod
                    if event["type"] == "DELETED":
                        raise KubernetesError(f"pod {name} was deleted before it was {goal}")
                    if done(pod):
                        waiting.discard(name)
                    else:
                        fatal = _fatal(pod)
                        if fatal:
                            raise KubernetesError(f"pod {name} on node "
                                               f"{pod['spec'].get('nodeName')}: {fatal}")
                    if not waiting or time.monotonic() >= deadline:
                        break
            except ApiException as exc:
                raise KubernetesError(f"watch pods: {exc.status} {exc.reason}") from None
            except HTTPError:
                continue  # the watch's connection timed out: watch again while time is left
            finally:
                w.stop()
        if waiting:
            if expire_ok:
                raise _Expired()
            name = sorted(waiting)[0]
            raise KubernetesError(f"pod {name} was not {goal} within {timeout:g} s: "
                               f"{self._why(name, last.get(name))}")

    def _why(self, name: str, pod: dict | None) -> str:
        """The pod's own account of itself: status, conditions, then its latest events."""
        reasons = []
        if pod:
            reasons.append(f"phase {_phase(pod)}")
            for cond in (pod.get("status") or {}).get("conditions") or []:
                if cond.get("status") != "True" and cond.get("message"):
                    reasons.append(f"{cond['type']}: {cond.get('reason')}: {cond['message']}")
            state = _container_state(pod)
            if "waiting" in state:
                reasons.append(f"{state['waiting'].get('reason')}: "
                               f"{state['waiting'].get('message', '')}".rstrip(": "))
        from kubernetes.client.exceptions import ApiException

        try:
            events = self._core().list_namespaced_event(
                self.namespace, field_selector=f"involvedObject.name={name}",
                _request_timeout=30).items
        except ApiException:
            events = []
        for ev in sorted(events, key=lambda e: str(e.last_timestamp or e.event_time or ""))[-2:]:
            reasons.append(f"event {ev.reason}: {ev.message}")
        if not pod or not (pod.get("status") or {}).get("phase"):
            reasons.append("no kubelet has taken it (is the node's kubelet running?)")
        return "; ".join(reasons) or "no status"

    def _collect(self, handle: Handle) -> None:
        """The role's log, through the API, into the run directory (once)."""
        if handle.ref in self._collected:
            return
        from kubernetes.client.exceptions import ApiException
        from urllib3.exceptions import HTTPError

        try:
            resp = self._core().read_namespaced_pod_log(
                handle.ref, self.namespace, container=handle.role, _preload_content=False,
                _request_timeout=60)
            data = resp.data
        except (ApiException, HTTPError, OSError):
            return  # never started, or gone: the parser records the missing log
        atomic_write(handle.log, data)
        self._collected.add(handle.ref)

    def _delete(self, deleter: Callable, kind: str, name: str) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            deleter(name, self.namespace, _request_timeout=30)
        except ApiException as exc:
            if exc.status != 404:
                raise KubernetesError(f"delete {kind} {name}: {exc.status} {exc.reason}"
                                   ) from None

    def _delete_pod(self, name: str, grace: float) -> None:
        from kubernetes.client.exceptions import ApiException

        try:
            self._core().delete_namespaced_pod(name, self.namespace,
                                               grace_period_seconds=int(grace),
                                               _request_timeout=30)
        except ApiException as exc:
            if exc.status != 404:
                raise KubernetesError(f"delete pod {name}: {exc.status} {exc.reason}") from None

    def _delete_repeat(self, label: str) -> None:
        """The repeat's pods (waiting until they are gone, so the next repeat starts on a
        quiet network), then its ConfigMaps."""
        core = self._core()
        selector = f"{m.REPEAT_LABEL}={label}"
        self._call("delete pods", core.delete_collection_namespaced_pod, self.namespace,
                   label_selector=selector, grace_period_seconds=2)
        if not _gone(core, self.namespace, selector, GONE_TIMEOUT):
            # a pod no kubelet confirms (its node is gone): removed from the API by force
            self._call("delete pods by force", core.delete_collection_namespaced_pod,
                       self.namespace, label_selector=selector, grace_period_seconds=0)
        self._call("delete ConfigMaps", core.delete_collection_namespaced_config_map,
                   self.namespace, label_selector=selector)


class _Expired(Exception):
    pass


class _Integral:
    """Cumulative core-seconds from successive rate readings (trapezoids)."""

    def __init__(self) -> None:
        self.total, self._last = 0.0, None

    def add(self, cores: float) -> float:
        now = time.monotonic()
        if self._last is not None:
            t, c = self._last
            self.total += (now - t) * (c + cores) / 2
        self._last = (now, cores)
        return self.total


def remove(api_client, namespace: str, run_id: str | None = None,
           delete_namespace: bool = True) -> list[str]:
    """Delete every object k8sdds made in `namespace` (of one run, or of any), and the
    namespace itself when asked; returns what was deleted, as kind/name."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    selector = m.MANAGED_SELECTOR + (f",{m.RUN_LABEL}={run_id}" if run_id else "")
    core, rbac = client.CoreV1Api(api_client), client.RbacAuthorizationV1Api(api_client)
    gone = []
    kinds = (("Pod", core.list_namespaced_pod, core.delete_namespaced_pod),
             ("ConfigMap", core.list_namespaced_config_map, core.delete_namespaced_config_map),
             ("Secret", core.list_namespaced_secret, core.delete_namespaced_secret),
             ("Service", core.list_namespaced_service, core.delete_namespaced_service),
             ("RoleBinding", rbac.list_namespaced_role_binding,
              rbac.delete_namespaced_role_binding),
             ("Role", rbac.list_namespaced_role, rbac.delete_namespaced_role),
             ("ServiceAccount", core.list_namespaced_service_account,
              core.delete_namespaced_service_account))
    for kind, lister, deleter in kinds:
        try:
            items = lister(namespace, label_selector=selector, _request_timeout=30).items
        except ApiException as exc:
            if exc.status == 404:
                break  # no such namespace: nothing in it
            raise KubernetesError(f"list {kind}s in {namespace}: {exc.status} {exc.reason}"
                               ) from None
        for item in items:
            try:
                kwargs = {"grace_period_seconds": 0} if kind == "Pod" else {}
                deleter(item.metadata.name, namespace, _request_timeout=30, **kwargs)
                gone.append(f"{kind}/{item.metadata.name}")
            except ApiException as exc:
                if exc.status != 404:
                    raise KubernetesError(f"delete {kind} {item.metadata.name}: {exc.status} "
                                       f"{exc.reason}") from None
    if delete_namespace:
        try:
            ns = core.read_namespace(namespace, _request_timeout=30)
            if (ns.metadata.labels or {}).get(next(iter(m.MANAGED_BY))) == "k8sdds":
                core.delete_namespace(namespace, _request_timeout=30)
                gone.append(f"Namespace/{namespace}")
        except ApiException as exc:
            if exc.status != 404:
                raise KubernetesError(f"delete namespace {namespace}: {exc.status} {exc.reason}"
                                   ) from None
    return gone


def _gone(core, namespace: str, selector: str, timeout: float) -> bool:
    """Wait (watching) until no pod matches `selector`; False after `timeout` s."""
    from kubernetes import watch

    pods = core.list_namespaced_pod(namespace, label_selector=selector, _request_timeout=30)
    left = {p.metadata.name for p in pods.items}
    if not left:
        return True
    w = watch.Watch()
    try:
        for event in w.stream(core.list_namespaced_pod, namespace, label_selector=selector,
                              resource_version=pods.metadata.resource_version,
                              timeout_seconds=max(1, int(timeout)),
                              _request_timeout=timeout + 10):
            if event["type"] == "DELETED":
                left.discard(event["raw_object"]["metadata"]["name"])
                if not left:
                    return True
    except Exception:  # noqa: BLE001 - the final list decides
        pass
    finally:
        w.stop()
    return not core.list_namespaced_pod(namespace, label_selector=selector,
                                        _request_timeout=30).items


# ---- pure readings of a pod (dicts, as the API serves them) ---------------------------


def _phase(pod: dict) -> str:
    return (pod.get("status") or {}).get("phase") or "Pending"


def _container_state(pod: dict) -> dict:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    return (statuses[0].get("state") or {}) if statuses else {}


def _exit_code(pod: dict) -> int | None:
    term = _container_state(pod).get("terminated")
    return int(term["exitCode"]) if term and term.get("exitCode") is not None else None


def _started(pod: dict) -> bool:
    return _phase(pod) in ("Running", "Succeeded", "Failed")


def _finished(pod: dict) -> bool:
    return _phase(pod) in ("Succeeded", "Failed") or _exit_code(pod) is not None


def _ready_or_done(pod: dict) -> bool:
    conds = (pod.get("status") or {}).get("conditions") or []
    return _finished(pod) or any(c.get("type") == "Ready" and c.get("status") == "True"
                                 for c in conds)


def _fatal(pod: dict) -> str | None:
    """Why a pod that is not there yet never will be, or None while there is hope."""
    state = _container_state(pod).get("waiting") or {}
    if state.get("reason") in FATAL_WAITING:
        return f"{state['reason']}: {state.get('message', '')}".rstrip(": ")
    status = pod.get("status") or {}
    if status.get("phase") == "Failed" and not _container_state(pod):
        return f"{status.get('reason', 'Failed')}: {status.get('message', '')}".rstrip(": ")
    for cond in status.get("conditions") or []:
        if (cond.get("type") == "PodScheduled" and cond.get("status") == "False"
                and cond.get("reason") == "Unschedulable"):
            return f"Unschedulable: {cond.get('message', '')}"
    return None


def _node(n) -> dict:
    labels = n.metadata.labels or {}
    info = n.status.node_info
    conds = {c.type: c.status for c in (n.status.conditions or [])}
    control = ("node-role.kubernetes.io/control-plane" in labels
               or any(t.effect == "NoSchedule" and "control-plane" in t.key
                      for t in (n.spec.taints or [])))
    address = next((a.address for a in (n.status.addresses or [])
                    if a.type == "InternalIP"), "")
    return {"name": n.metadata.name, "role": "control-plane" if control else "worker",
            "arch": labels.get("kubernetes.io/arch", info.architecture if info else ""),
            "kernel": info.kernel_version if info else "",
            "kubelet": info.kubelet_version if info else "",
            "os": info.os_image if info else "",
            "runtime": info.container_runtime_version if info else "",
            "address": address, "ready": conds.get("Ready") == "True"}


def _node_list(nodes: list[dict]) -> str:
    return ", ".join(f"{n['name']} ({n['role']}, {n['arch']}, "
                     f"{'Ready' if n['ready'] else 'NotReady'})" for n in nodes) or "none"


def metrics_totals(nodes: dict, pods: dict, prefix: str) -> tuple[float, float, float]:
    """metrics-server's NodeMetricsList and PodMetricsList -> (CPU cores of the pods whose
    name starts with `prefix`: the CNI's DaemonSet, CPU cores of every node, MiB of memory of
    those pods)."""
    cni = [c["usage"] for p in pods.get("items", []) if prefix
           and p["metadata"]["name"].startswith(prefix) for c in p.get("containers", [])]
    return (sum(_cores(u["cpu"]) for u in cni),
            sum(_cores(n["usage"]["cpu"]) for n in nodes.get("items", [])),
            sum(_bytes(u["memory"]) for u in cni) / 2**20)


def _bytes(quantity: str) -> float:
    """A memory quantity ("123456Ki", "12Mi", "1000") in bytes."""
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "k": 1e3, "M": 1e6, "G": 1e9}
    for unit, factor in units.items():
        if quantity.endswith(unit):
            return float(quantity[:-len(unit)]) * factor
    return float(quantity)


def _cores(quantity: str) -> float:
    """A CPU quantity of metrics-server ("12345678n", "250m", "2") in cores."""
    units = {"n": 1e-9, "u": 1e-6, "m": 1e-3}
    if quantity and quantity[-1] in units:
        return float(quantity[:-1]) * units[quantity[-1]]
    return float(quantity)


def _api_message(exc) -> str:
    import json

    try:
        return json.loads(exc.body).get("message", "")
    except (TypeError, ValueError, AttributeError):
        return str(exc.body or "")[:200]
