"""The kubernetes backend against a real kube-apiserver (with etcd), kwok playing the kubelets
of a hybrid edge cluster: an amd64 control plane and arm workers (tests/kube_support.py)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from k8sdds import model, schedule
from k8sdds.deployment.kubernetes import KubernetesBackend
from k8sdds.deployment.kubernetes import objects as m
from k8sdds.deployment.options import KubernetesOptions
from k8sdds.engines import registry
from k8sdds.engines.base import Command
from k8sdds.runner import NoProgress, Runner, RunOptions

from . import kube_support as ks
from .builds import needs
from .load_support import STOP_BOUND_S, busy_machine, stop_timed

# skipped with the reason where they cannot run (in CI a skip fails: tests/skip_rule.py)
pytestmark = [pytest.mark.kube, needs("k8s-amd64", why=ks.missing)]

HEAD = "dataLen,multicast,numSubscribers,bestEffort,batchSize,duration\n"
SCHEDULE = HEAD + "1024,false,1,false,0,2\n1024,false,2,false,0,2\n"


@pytest.fixture(scope="module")
def cp(tmp_path_factory):
    plane = ks.ControlPlane(tmp_path_factory.mktemp("k8s")).start()
    try:
        plane.add_nodes(ks.EDGE)
        _install_flannel(plane, "host-gw")
        yield plane
    finally:
        plane.stop()


def _install_flannel(plane, backend: str) -> None:
    """Flannel as its manifest installs it: namespace, ConfigMap, DaemonSet (no pods run:
    no controller-manager here; detection only reads the objects)."""
    from kubernetes import client

    api = plane.api()
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    core.create_namespace({"metadata": {"name": "kube-flannel"}})
    core.create_namespaced_config_map("kube-flannel", {
        "metadata": {"name": "kube-flannel-cfg"},
        "data": {"net-conf.json": json.dumps({"Network": "10.244.0.0/16",
                                              "Backend": {"Type": backend}})}})
    for ns, name, image in (("kube-system", "kube-proxy", "registry.k8s.io/kube-proxy:v1.34.3"),
                            ("kube-flannel", "kube-flannel-ds",
                             "ghcr.io/flannel-io/flannel:v0.26.7")):
        apps.create_namespaced_daemon_set(ns, {
            "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": image}]}}}})


def _env(**extra: str) -> dict:
    return {**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent), **extra}


def _cli(cp, *args: str, timeout: float = 180, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "k8sdds", *args, "--backend", "kubernetes",
                           "--kubeconfig", str(cp.kubeconfig)],
                          capture_output=True, text=True, env=_env(**env), timeout=timeout)


def _start(cp, sch: Path, out: Path, *args: str, **env: str) -> subprocess.Popen:
    """`k8sdds run` on the test cluster, in the background (stderr kept for the assertions)."""
    return subprocess.Popen([sys.executable, "-m", "k8sdds", "run", "--sch", str(sch),
                             "--backend", "kubernetes", "--kubeconfig", str(cp.kubeconfig),
                             "--out", str(out), "--quiet", *args], env=_env(**env),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _interrupt(cp, proc: subprocess.Popen, signum: int = signal.SIGINT,
               loaded: bool = False) -> None:
    """Stop a background run with `signum`: it ends as interrupted within STOP_BOUND_S (on
    a machine loaded on purpose when `loaded`), leaving no object."""
    try:
        with busy_machine() if loaded else contextlib.nullcontext():
            took, err = stop_timed(proc, signum)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert took < STOP_BOUND_S, f"the run took {took:.1f} s to end after signal {signum}"
    assert _managed(cp) == {}


def _managed(cp) -> dict[str, list[str]]:
    """Every object k8sdds labelled, anywhere, by kind (pods, ConfigMaps, Secrets, Services,
    ServiceAccounts, Roles, RoleBindings), and its namespaces that are not terminating."""
    from kubernetes import client

    api = cp.api()
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    sel = m.MANAGED_SELECTOR
    out = {
        "pods": [p.metadata.name for p in core.list_pod_for_all_namespaces(
            label_selector=sel).items],
        "configmaps": [c.metadata.name for c in core.list_config_map_for_all_namespaces(
            label_selector=sel).items],
        "secrets": [c.metadata.name for c in core.list_secret_for_all_namespaces(
            label_selector=sel).items],
        "services": [c.metadata.name for c in core.list_service_for_all_namespaces(
            label_selector=sel).items],
        "serviceaccounts": [c.metadata.name for c in
                            core.list_service_account_for_all_namespaces(
                                label_selector=sel).items],
        "roles": [c.metadata.name for c in rbac.list_role_for_all_namespaces(
            label_selector=sel).items],
        "rolebindings": [c.metadata.name for c in rbac.list_role_binding_for_all_namespaces(
            label_selector=sel).items],
        # no controller-manager finalizes namespaces here: a deleted one stays Terminating
        "namespaces": [n.metadata.name for n in core.list_namespace(label_selector=sel).items
                       if n.metadata.deletion_timestamp is None],
    }
    return {k: v for k, v in out.items() if v}


def _tests(text: str, tmp_path: Path, **over) -> list[model.Test]:
    sch = tmp_path / "schedule.csv"
    sch.write_text(text)
    tests = schedule.expand(schedule.load(sch, limits=model.Limits(paths=model.PATHS)),
                            ["flannel-hostgw"], sch)
    return [replace(t, **over) for t in tests]


def test_cni_detection_reads_the_daemonsets(cp):
    backend = KubernetesBackend(KubernetesOptions(kubeconfig=cp.kubeconfig))
    found = backend.cluster.detected()
    assert found.datapath == "flannel-hostgw"
    assert found.daemonset == "kube-flannel/kube-flannel-ds"
    assert "host-gw" in found.cni
    assert list(backend.datapaths()) == ["flannel-hostgw", "host"]
    assert "flannel-hostgw" in backend.unavailable("weave")


def test_pods_are_placed_pinned_and_unprivileged(cp, tmp_path):
    backend = KubernetesBackend(KubernetesOptions(kubeconfig=cp.kubeconfig, image=ks.IMAGE_HANG,
                                                  arch="arm64", pod_timeout=30))
    [test] = _tests(HEAD + "1024,false,2,false,0,5\n", tmp_path)
    backend.up()
    try:
        from kubernetes import client

        admin = client.CoreV1Api(cp.api())
        backend.use_datapath("flannel-hostgw")
        roles = ["pub", "sub0", "sub1"]
        placed = backend.deploy(test, roles, 1)
        # arm64 workers only (pi3-a is arm): the publisher on the first, the subscribers on
        # the other
        assert {r: p.node for r, p in placed.items()} == {"pub": "pi4-a", "sub0": "pi4-b",
                                                          "sub1": "pi4-b"}
        handles = [backend.start(placed[r], Command(("ddsperf", "sub"), {"A": "1"},
                                                    {f"{r}.xml": "<x/>"}), tmp_path / f"{r}.log")
                   for r in roles]
        backend.ready(handles)
        for role in roles:
            pod = admin.read_namespaced_pod(placed[role].where, backend.namespace)
            assert pod.status.phase == "Running"
            assert pod.spec.node_name == placed[role].node
            assert pod.spec.host_network in (None, False)
            assert pod.spec.security_context.run_as_non_root is True
            assert pod.spec.automount_service_account_token is False
            c = pod.spec.containers[0]
            assert c.command == ["ddsperf", "sub"] and c.name == role
            assert c.security_context.capabilities.drop == ["ALL"]
            assert c.security_context.read_only_root_filesystem is True
            cm = admin.read_namespaced_config_map(f"{placed[role].where}-config",
                                                  backend.namespace)
            assert cm.data == {f"{role}.xml": "<x/>"}
        # least privilege: inside its namespace k8sdds acts as the runner ServiceAccount
        authz = client.AuthorizationV1Api(backend.api.runner)

        def allowed(ns: str, verb: str, resource: str) -> bool:
            review = authz.create_self_subject_access_review({"spec": {"resourceAttributes": {
                "namespace": ns, "verb": verb, "resource": resource}}})
            return review.status.allowed

        assert allowed(backend.namespace, "create", "pods")
        assert not allowed("kube-system", "list", "secrets")
        assert not allowed(backend.namespace, "create", "roles")
        assert allowed(backend.namespace, "create", "pods/exec")  # its own pods only
        assert not allowed("kube-system", "create", "pods/exec")
        assert not allowed("kube-system", "get", "pods")
        backend.teardown()
        assert not admin.list_namespaced_pod(backend.namespace,
                                             label_selector=m.MANAGED_SELECTOR).items
        # the host datapath: the pods use their node's network
        backend.use_datapath("host")
        placed = backend.deploy(test, roles, 2)
        assert all(p.interface == "" for p in placed.values())
        h = backend.start(placed["pub"], Command(("ddsperf", "pub")), tmp_path / "p.log")
        backend.ready([h])
        assert admin.read_namespaced_pod(placed["pub"].where,
                                         backend.namespace).spec.host_network is True
    finally:
        backend.down()
    assert _managed(cp) == {}


def test_run_collects_logs_through_the_api_and_parses_them(cp, tmp_path):
    sch = tmp_path / "s.csv"
    sch.write_text(SCHEDULE)
    # no ddsperf on this machine's PATH: on kubernetes the engines run in the image
    done = _cli(cp, "run", "--sch", str(sch), "--repeats", "2", "--image", ks.IMAGE_OK,
                "--out", str(tmp_path / "out"), "--no-plot", "--json", "--report",
                PATH="/nonexistent")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["repeats"] == 4 and outcome["failed"] == []
    run = Path(outcome["run_dir"])
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["backend"] == "kubernetes"
    cluster = manifest["cluster"]
    assert cluster["datapath"] == "flannel-hostgw" and "host-gw" in cluster["cni"]
    nodes = {n["name"]: n for n in cluster["nodes"]}
    assert nodes["master"]["role"] == "control-plane" and nodes["master"]["arch"] == "amd64"
    assert nodes["pi3-a"]["arch"] == "arm" and nodes["pi3-a"]["kernel"] == "6.1.0-rpi7-rpi-v7"
    assert nodes["pi4-a"]["kubelet"] == "v1.34.3"
    assert any("metrics-server" in line for line in cluster["not_applied"])
    assert manifest["datapaths"] == ["flannel-hostgw"]
    # the publisher on the first worker, subscribers spread over the others (never master)
    assert manifest["repeats"]["test-2/rep-1"]["placement"] == {
        "pub": "pi3-a", "sub0": "pi4-a", "sub1": "pi4-b"}
    # each role's log came from the API server (kwok serves the real ddsperf logs)
    for role in ("pub", "sub0", "sub1"):
        log = run / "test-2" / "rep-1" / f"{role}.log"
        src = ks.LOGS[role]
        assert log.read_bytes() == src.read_bytes()
    import pandas as pd

    df = pd.read_csv(run / "results.csv")
    subs = df[(df.role.str.startswith("sub")) & (df.metric == "throughput_mbps")
              & (df.kind == "summary")]
    assert len(subs) == 6  # (1 + 2 subscribers) x 2 repeats, one summary row each
    assert (subs.value > 0).all() and set(subs.backend) == {"kubernetes"}
    assert (run / "report.html").exists()
    # the nodes' load average, read by exec in the repeat's own pods (kwok runs the command
    # here, so it is this machine's)
    usage = json.loads((run / "test-1" / "rep-1" / "usage.json").read_text())
    assert abs(usage["node_load1"] - os.getloadavg()[0]) < 3
    load = df[(df.role == "datapath") & (df.metric == "node_load1")]
    # each node's, this machine's under kwok: near what the kernel says now
    assert len(load) == 4 and ((load.value - os.getloadavg()[0]).abs() < 3).all()
    # each placed node's fingerprint: its probe pods' logs (kwok serves what the probe
    # script printed on this machine) with the API's versions (kwok's node's kernel)
    prints = manifest["fingerprints"]["flannel-hostgw"]
    assert set(prints) == {"pi3-a", "pi4-a"}  # the first repeat's (one subscriber)
    route = subprocess.run(["ip", "route", "show", "default"], capture_output=True,
                           text=True).stdout.split()
    uplink = route[route.index("dev") + 1]  # this machine's, read by the probe's `ip`
    assert prints["pi3-a"]["interfaces"][uplink]["mtu"] == int(
        (Path("/sys/class/net") / uplink / "mtu").read_text())
    assert prints["pi3-a"]["kernel"] == "6.1.0-rpi7-rpi-v7" and "not_read" not in prints["pi3-a"]
    assert prints["pi3-a"]["sysctls"]["net.core.rmem_max"] == Path(
        "/proc/sys/net/core/rmem_max").read_text().strip()
    # the configuration each pod got is kept beside its log
    cfg = (run / "test-1" / "rep-1" / "pub.cyclonedds.xml").read_text()
    assert "t1-r1-sub0-" in cfg  # peers by the pods' DNS names
    assert _managed(cp) == {}


def test_a_missing_node_name_is_refused_before_anything_is_made(cp, tmp_path):
    sch = tmp_path / "s.csv"
    sch.write_text(SCHEDULE)
    done = _cli(cp, "run", "--sch", str(sch), "--pub-node", "pi5-x", "--out",
                str(tmp_path / "out"))
    assert done.returncode == 2
    assert "--pub-node: node 'pi5-x' does not exist" in done.stderr
    assert "pi4-a" in done.stderr and "Traceback" not in done.stderr
    assert _managed(cp) == {}


def test_a_zenoh_row_is_refused_where_a_worker_is_a_pi_3(cp, tmp_path):
    """k8sdds-zenoh has no armhf build: on the hybrid cluster (pi3-a is arm) a zenoh row is
    refused before anything is made, naming the node (tests/test_engine_mqtt.py has the
    accepted cases of the check itself)."""
    sch = tmp_path / "s.csv"
    sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize,engine,transport\n"
                   "1024,false,1,false,0,zenoh,tcp\n")
    done = _cli(cp, "run", "--sch", str(sch), "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    said = " ".join(done.stderr.split())
    assert "column 'engine': value 'zenoh'" in said and "pi3-a (armhf)" in said, said
    assert "zenoh is built for amd64, arm64 only" in said and "Traceback" not in said
    assert not (tmp_path / "out").exists() and _managed(cp) == {}


def test_pod_failures_end_their_repeat_with_the_reason_and_the_run_goes_on(cp, tmp_path):
    sch = tmp_path / "s.csv"
    sch.write_text(HEAD + "1024,false,1,false,0,2\n")
    t0 = time.monotonic()
    done = _cli(cp, "run", "--sch", str(sch), "--repeats", "2", "--image", ks.IMAGE_MISSING,
                "--pod-timeout", "20", "--out", str(tmp_path / "pull"), "--json")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["repeats"] == 2 and len(outcome["failed"]) == 2  # both ran, both failed
    assert all("ErrImagePull" in f and "not found" in f for f in outcome["failed"])
    assert time.monotonic() - t0 < 40  # well within the pod timeout: the reason is fatal
    done = _cli(cp, "run", "--sch", str(sch), "--image", ks.IMAGE_CRASH,
                "--out", str(tmp_path / "crash"), "--json")
    outcome = json.loads(done.stdout)
    assert len(outcome["failed"]) == 1
    assert "exited with status 3" in outcome["failed"][0]
    assert _managed(cp) == {}


class _NodeGoes(NoProgress):
    """Deletes a node as the first repeat is announced: it vanishes mid-run."""

    def __init__(self, cp, node: str):
        self.cp, self.node, self.done = cp, node, False

    def step(self, description: str) -> None:
        from kubernetes import client

        if not self.done:
            client.CoreV1Api(self.cp.api()).delete_node(self.node)
            self.done = True


def test_a_node_that_vanishes_fails_its_repeats_and_the_run_goes_on(cp, tmp_path):
    cp.add_nodes([ks.node("pi4-temp", "arm64")])
    sch = tmp_path / "s.csv"
    sch.write_text(SCHEDULE)
    tests = _tests(SCHEDULE, tmp_path, repeats=1)
    backend = KubernetesBackend(KubernetesOptions(kubeconfig=cp.kubeconfig, image=ks.IMAGE_OK,
                                                  sub_nodes=("pi4-temp",), pod_timeout=20))
    outcome = Runner(backend, registry(), RunOptions(schedule=sch, out=tmp_path / "out"),
                     _NodeGoes(cp, "pi4-temp")).run(tests)
    assert outcome.repeats == 2 and len(outcome.failed) == 2
    assert all("node pi4-temp does not exist" in f for f in outcome.failed)
    assert _managed(cp) == {}


def _wait_pods_running(cp, count: int, timeout: float = 60) -> None:
    from kubernetes import client

    core = client.CoreV1Api(cp.api())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        # the roles' pods, not the fingerprint and multicast probes that run (and go) before
        pods = core.list_pod_for_all_namespaces(
            label_selector=f"{m.MANAGED_SELECTOR},{m.ROLE_LABEL}!=probe").items
        if sum(p.status.phase == "Running" for p in pods) >= count:
            return
        time.sleep(0.2)  # polling the API from the test: what it waits on is another process
    raise AssertionError("the run's pods did not come up")


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_mid_run_leaves_no_object_behind(cp, tmp_path, signum):
    sch = tmp_path / "s.csv"
    sch.write_text(HEAD + "1024,false,2,false,0,30\n")
    proc = _start(cp, sch, tmp_path / "out", "--image", ks.IMAGE_HANG)
    try:
        _wait_pods_running(cp, 3)
        assert _managed(cp)["pods"]
    finally:
        _interrupt(cp, proc, signum, loaded=True)


def test_cleanup_removes_what_a_killed_run_left(cp, tmp_path):
    sch = tmp_path / "s.csv"
    sch.write_text(HEAD + "1024,false,1,false,0,30\n")
    proc = _start(cp, sch, tmp_path / "out", "--image", ks.IMAGE_HANG)
    try:
        _wait_pods_running(cp, 2)
    finally:
        proc.kill()  # SIGKILL: no handler runs
        proc.wait()
    left = _managed(cp)
    assert left["pods"] and left["namespaces"] and left["roles"]
    done = subprocess.run([sys.executable, "-m", "k8sdds", "cleanup", "--kubeconfig",
                           str(cp.kubeconfig)], capture_output=True, text=True, env=_env(),
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"deleted Namespace/{left['namespaces'][0]}" in done.stdout
    assert _managed(cp) == {}


def test_tls_and_dds_security_credentials_travel_as_a_secret(cp, tmp_path):
    from kubernetes import client

    core = client.CoreV1Api(cp.api())
    sch = tmp_path / "s.csv"
    sch.write_text(HEAD + "1024,false,1,false,0,30\n")
    proc = _start(cp, sch, tmp_path / "out", "--image", ks.IMAGE_HANG, "--transport", "tls",
                  "--secure")
    try:
        _wait_pods_running(cp, 2)
        [secret] = core.list_secret_for_all_namespaces(label_selector=m.MANAGED_SELECTOR).items
        assert secret.metadata.name == m.CREDENTIALS
        keys = set(secret.data)
        assert {"ca.pem", "pub.key", "pub.keystore.pem", "sub0.key", "governance.p7s",
                "pub.permissions.p7s"} <= keys
        assert "ca.key" not in keys  # the CA's key never leaves the run directory
        ns = secret.metadata.namespace
        for pod in core.list_namespaced_pod(ns, label_selector=m.MANAGED_SELECTOR).items:
            vols = {v.name: v for v in pod.spec.volumes}
            assert vols["credentials"].secret.secret_name == m.CREDENTIALS
            mount = {v.name: v for v in pod.spec.containers[0].volume_mounts}["credentials"]
            assert mount.mount_path == m.SECRETS_MOUNT and mount.read_only
            cm = core.read_namespaced_config_map(f"{pod.metadata.name}-config", ns)
            [xml] = cm.data.values()
            role = pod.spec.containers[0].name
            assert f"{m.SECRETS_MOUNT}/{role}.keystore.pem" in xml  # TLS keystore
            assert f"file:{m.SECRETS_MOUNT}/{role}.permissions.p7s" in xml  # DDS Security
            assert "PRIVATE KEY" not in xml
    finally:
        _interrupt(cp, proc)
    [run] = (tmp_path / "out").iterdir()
    assert oct((run / "credentials" / "ca.key").stat().st_mode & 0o777) == "0o600"


def test_baseline_matrix_with_service_paths(cp, tmp_path):
    """`k8sdds baseline` on kubernetes: every path, pod-service through a ClusterIP and
    external-nodeport through a NodePort of the server's node (kwok serves a real iperf3
    capture as every client's log)."""
    done = _cli(cp, "baseline", "--engines", "iperf3", "--no-dds", "--duration", "1",
                "--image", ks.IMAGE_OK, "--out", str(tmp_path / "out"), "--json")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["failed"] == []
    run = Path(outcome["run_dir"])
    manifest = json.loads((run / "manifest.json").read_text())
    tests = {t["number"]: t for t in manifest["tests"]}
    seen = {}
    for key, entry in manifest["repeats"].items():
        t = tests[int(key.split("/")[0].split("-")[1])]
        seen[(t["datapath"], t["path"], t["transport"])] = entry["argv"]["client"]
    assert {(dp, p) for dp, p, _ in seen} == {
        ("flannel-hostgw", p) for p in model.PATHS} | {("host", "node-node")}
    # on `host` every pod runs on its node's network: no pod-network probe, no `pods`
    prints = manifest["fingerprints"]
    assert all(fp["pods"] == {} and fp["interfaces"] for fp in prints["host"].values())
    assert all(fp["pods"]["pod"] for fp in prints["flannel-hostgw"].values())
    argv = seen[("flannel-hostgw", "pod-service", "tcp")]
    server = argv[argv.index("-c") + 1]
    assert server.startswith("10.96.") and argv[argv.index("-p") + 1] == "5201"  # ClusterIP
    for transport in ("tcp", "udp"):
        argv = seen[("flannel-hostgw", "external-nodeport", transport)]
        assert argv[argv.index("-c") + 1] == "127.0.0.1"  # the server node's InternalIP
        assert 30000 <= int(argv[argv.index("-p") + 1]) <= 32767  # its NodePort
    import pandas as pd

    df = pd.read_csv(run / "results.csv")
    assert set(df.path) == set(model.PATHS)
    assert (df[df.metric == "throughput_mbps"].value > 0).all()
    assert _managed(cp) == {}


def test_a_nodeport_forwards_tcp_and_udp_on_one_port(cp, tmp_path):
    from kubernetes import client

    core = client.CoreV1Api(cp.api())
    backend = KubernetesBackend(KubernetesOptions(kubeconfig=cp.kubeconfig, image=ks.IMAGE_HANG))
    [test] = _tests("engine,path,transport,latencyTest," + HEAD.replace("duration\n", "")
                    + "duration\niperf3,external-nodeport,udp,false,1400,false,1,false,0,5\n",
                    tmp_path)
    backend.up()
    try:
        placed = backend.deploy(test, ["client", "server"], 1,
                                registry()["iperf3"].service_ports(test))
        [svc] = core.list_namespaced_service(
            backend.namespace, label_selector=f"{m.REPEAT_LABEL}={backend._repeat}").items
        assert svc.spec.type == "NodePort"
        assert svc.spec.selector == {m.REPEAT_LABEL: backend._repeat, m.ROLE_LABEL: "server"}
        ports = {(p.protocol, p.port, p.target_port, p.node_port) for p in svc.spec.ports}
        [(_, _, _, node_port)] = {p for p in ports if p[0] == "TCP"}
        assert ports == {("TCP", 5201, 5201, node_port), ("UDP", 5201, 5201, node_port)}
        assert placed["server"].ports == {5201: node_port}
        assert placed["client"].interface == ""  # outside the pod network: its node's
    finally:
        backend.down()
    assert _managed(cp) == {}


def test_service_paths_are_refused_on_the_emulated_backend(tmp_path):
    sch = tmp_path / "s.csv"
    sch.write_text("engine,path,transport,latencyTest," + HEAD.replace("duration\n", "")
                   + "duration\niperf3,pod-service,tcp,false,1400,false,1,false,0,5\n")
    with pytest.raises(schedule.ScheduleError, match="pod-service.*--backend kubernetes"):
        schedule.load(sch)
    sch.write_text("engine,path,latencyTest," + HEAD.replace("duration\n", "")
                   + "duration\nping,pod-service,true,64,false,1,false,0,5\n")
    with pytest.raises(schedule.ScheduleError, match="ping cannot go through a Service"):
        schedule.load(sch, limits=model.Limits(paths=model.PATHS))


def test_rti_perftest_runs_from_its_image_with_cds_and_the_license_as_a_secret(cp, tmp_path):
    """RTI Perftest cannot be had here: what is checked is k8sdds' side on a real API server
    (its image, the Cloud Discovery Service role, NDDS_DISCOVERY_PEERS, the license)."""
    import base64

    from kubernetes import client

    core = client.CoreV1Api(cp.api())
    lic = tmp_path / "rti_license.dat"
    lic.write_text("RTI LICENSE")
    sch = tmp_path / "s.csv"
    sch.write_text(HEAD.rstrip("\n") + ",engine,discovery\n"
                   "1024,false,2,false,0,30,rtiperftest,cds\n")
    # the engine image does not exist: every pod must come from --rtiperftest-image; and no
    # perftest_cpp on this machine's PATH
    proc = _start(cp, sch, tmp_path / "out", "--image", ks.IMAGE_MISSING,
                  "--rtiperftest-image", ks.IMAGE_HANG, "--rti-license", str(lic),
                  PATH="/nonexistent")
    try:
        _wait_pods_running(cp, 4)
        pods = {p.spec.containers[0].name: p for p in core.list_pod_for_all_namespaces(
            label_selector=m.MANAGED_SELECTOR).items}
        assert set(pods) == {"pub", "cds", "sub0", "sub1"}
        assert {p.spec.containers[0].image for p in pods.values()} == {ks.IMAGE_HANG}
        assert pods["cds"].spec.containers[0].command == ["rticlouddiscoveryservice",
                                                          "-transport", "7400"]
        cds_name = pods["cds"].metadata.name
        for role in ("pub", "sub0", "sub1"):
            env = {e.name: e.value for e in pods[role].spec.containers[0].env}
            assert env["NDDS_DISCOVERY_PEERS"] == f"rtps@udpv4://{cds_name}.k8sdds:7400"
            assert env["RTI_LICENSE_FILE"] == f"{m.SECRETS_MOUNT}/rti_license.dat"
            assert "-peer" not in pods[role].spec.containers[0].command
        ns = pods["pub"].metadata.namespace
        secret = core.read_namespaced_secret(m.CREDENTIALS, ns)
        assert base64.b64decode(secret.data["rti_license.dat"]) == b"RTI LICENSE"
    finally:
        _interrupt(cp, proc)


def test_a_given_namespace_is_used_and_kept(cp, tmp_path):
    """--namespace: the user's own namespace is used, never deleted; what a SIGKILLed run
    left there blocks the next run with the remedy, and `cleanup` removes it."""
    from kubernetes import client

    core = client.CoreV1Api(cp.api())
    core.create_namespace({"metadata": {"name": "edge-bench"}})
    sch = tmp_path / "s.csv"
    sch.write_text(HEAD + "1024,false,1,false,0,30\n")
    proc = _start(cp, sch, tmp_path / "out", "--image", ks.IMAGE_HANG, "--namespace",
                  "edge-bench")
    try:
        _wait_pods_running(cp, 2)
    finally:
        proc.kill()
        proc.wait()
    done = _cli(cp, "run", "--sch", str(sch), "--namespace", "edge-bench", "--image",
                ks.IMAGE_OK, "--out", str(tmp_path / "out"))
    assert done.returncode == 1
    assert "already exists" in done.stderr and "k8sdds cleanup --namespace edge-bench" in \
        done.stderr.replace("\n", " ")
    done = subprocess.run([sys.executable, "-m", "k8sdds", "cleanup", "--namespace",
                           "edge-bench", "--kubeconfig", str(cp.kubeconfig)],
                          capture_output=True, text=True, env=_env(), timeout=60)
    assert done.returncode == 0 and "Namespace/" not in done.stdout  # not ours to delete
    sch.write_text(HEAD + "1024,false,1,false,0,2\n")
    done = _cli(cp, "run", "--sch", str(sch), "--namespace", "edge-bench", "--image",
                ks.IMAGE_OK, "--out", str(tmp_path / "out"), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["failed"] == []
    assert core.read_namespace("edge-bench").metadata.deletion_timestamp is None
    assert _managed(cp) == {}


def test_a_service_task_is_checked_with_the_clusters_own_limits(cp, tmp_path):
    """`k8sdds serve` checks a kubernetes task as `k8sdds run --backend kubernetes` does: a
    path through a Service is the cluster's to offer (it was refused with a 422 when tasks
    were checked against the default limits)."""
    from sqlalchemy import select

    from k8sdds.errors import UserError
    from k8sdds.serve.options import TaskOptions
    from k8sdds.serve.schema import tasks
    from k8sdds.serve.store import default_url, open_db
    from k8sdds.serve.tasks import Worker

    engine = open_db(default_url(tmp_path))
    worker = Worker(engine, tmp_path)
    text = ("engine,path,transport,multicast,dataLen,latencyTest,numSubscribers,bestEffort,"
            "batchSize,duration\niperf3,pod-service,tcp,false,1400,false,1,false,0,5\n")
    task_id = worker.submit(text, TaskOptions(backend="kubernetes",
                                              kubeconfig=str(cp.kubeconfig)))
    with engine.connect() as conn:
        assert conn.execute(select(tasks.c.status).where(tasks.c.id == task_id)).scalar() \
            == "queued"
    with pytest.raises(UserError, match="pod-service"):  # the emulated backend has none
        worker.submit(text, TaskOptions(backend="emulated"))
