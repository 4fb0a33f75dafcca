"""The kubernetes backend's pure parts: manifests, CNI detection, readings of pod status."""

from __future__ import annotations

import json

from k8sdds import cni
from k8sdds.deployment.kubernetes import metrics, pods
from k8sdds.deployment.kubernetes import objects as m


def _params(**over) -> m.PodParams:
    base = dict(name="t1-r1-pub-abc123", namespace="k8sdds-abc123", run_id="abc123",
                repeat="t1-r1-abc123", role="pub", node="pi4-a", image="img:1",
                argv=("ddsperf", "-D", "10", "pub"), env={"CYCLONEDDS_URI": "file:///x"})
    base.update(over)
    return m.PodParams(**base)


def test_pod_is_pinned_labelled_and_unprivileged():
    pod = m.pod(_params())
    spec, meta = pod["spec"], pod["metadata"]
    assert spec["nodeName"] == "pi4-a"
    assert spec["restartPolicy"] == "Never"
    assert meta["labels"][m.RUN_LABEL] == "abc123"
    assert meta["labels"][m.REPEAT_LABEL] == "t1-r1-abc123"
    assert meta["labels"]["app.kubernetes.io/managed-by"] == "k8sdds"
    assert spec["automountServiceAccountToken"] is False
    assert spec["serviceAccountName"] == m.ENGINE
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["runAsUser"] != 0
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    [c] = spec["containers"]
    assert c["name"] == "pub"  # the role: `kubectl logs POD -c pub`
    assert c["command"] == ["ddsperf", "-D", "10", "pub"]  # an argv, never a shell line
    assert c["env"] == [{"name": "CYCLONEDDS_URI", "value": "file:///x"}]
    assert c["securityContext"] == {"allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True, "runAsNonRoot": True,
                                    "capabilities": {"drop": ["ALL"]}}
    assert "hostNetwork" not in spec
    assert spec["hostname"] == "t1-r1-pub-abc123" and spec["subdomain"] == m.SUBDOMAIN
    assert "readinessProbe" not in c
    # no config, no credentials: only the scratch directory
    assert [v["name"] for v in spec["volumes"]] == ["scratch"]


def test_pod_options_host_network_arch_config_credentials_listen():
    pod = m.pod(_params(host_network=True, arch="arm64", config_map="cm", credentials=True,
                        listen=5201))
    spec = pod["spec"]
    assert spec["hostNetwork"] is True
    assert spec["dnsPolicy"] == "ClusterFirstWithHostNet"
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux", "kubernetes.io/arch": "arm64"}
    vols = {v["name"]: v for v in spec["volumes"]}
    assert vols["config"]["configMap"]["name"] == "cm"
    assert vols["credentials"]["secret"] == {"secretName": m.CREDENTIALS, "defaultMode": 0o440}
    mounts = {v["name"]: v for v in spec["containers"][0]["volumeMounts"]}
    assert mounts["config"] == {"name": "config", "mountPath": m.CONFIG_MOUNT,
                                "readOnly": True}
    assert mounts["credentials"]["mountPath"] == m.SECRETS_MOUNT
    probe = spec["containers"][0]["readinessProbe"]["exec"]["command"]
    assert "tcpSocket" not in spec["containers"][0]["readinessProbe"]  # it never connects
    import re
    line = "   3: 00000000:1451 00000000:0000 0A 00000000:00000000 00:00000000 00000000\n"
    assert probe[:2] == ["grep", "-qE"] and re.search(probe[2], line, re.M)
    assert not re.search(probe[2], line.replace(" 0A ", " 01 "), re.M)  # connected, not
    assert not re.search(probe[2], line.replace(":1451", ":1452"), re.M)  # listening


def test_runner_role_is_namespaced_and_minimal():
    role = m.role("ns1", "abc123")
    assert role["kind"] == "Role" and role["metadata"]["namespace"] == "ns1"
    assert role["apiVersion"] == "rbac.authorization.k8s.io/v1"
    resources = {r for rule in role["rules"] for r in rule["resources"]}
    assert resources == {"pods", "pods/log", "pods/exec", "configmaps", "secrets", "services",
                         "events", "endpointslices"}
    [slices] = [r for r in role["rules"] if "endpointslices" in r["resources"]]
    assert slices["verbs"] == ["list", "watch"]  # read only: whether a Service has endpoints
    verbs = {v for rule in role["rules"] for v in rule["verbs"]}
    assert "*" not in verbs and "escalate" not in verbs and "bind" not in verbs
    binding = m.role_binding("ns1", "abc123")
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": m.RUNNER,
                                    "namespace": "ns1"}]
    assert binding["roleRef"]["name"] == m.RUNNER


def test_secret_leaves_out_the_ca_key_and_encodes(tmp_path):
    from k8sdds.deployment.base import shippable

    folder = tmp_path / "credentials"
    folder.mkdir()
    for name in ("ca.key", "ca.pem", "pub.key", "pub.pem"):
        (folder / name).write_text(name)
    assert shippable(folder) == {"ca.pem": b"ca.pem", "pub.key": b"pub.key",
                                 "pub.pem": b"pub.pem"}
    assert shippable(None) == {} and shippable(tmp_path / "absent") == {}
    s = m.secret("s", "ns", "r", {"pub.key": b"\x00key"})
    assert s["data"] == {"pub.key": "AGtleQ=="}


def test_headless_service_names_pods_before_they_are_ready():
    svc = m.headless_service("ns", "abc")
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["publishNotReadyAddresses"] is True
    assert m.dns_name("t1-r1-pub-abc") == "t1-r1-pub-abc.k8sdds"


def _ds(name: str, ns: str = "kube-system", image: str = "", env: dict | None = None):
    return {"metadata": {"name": name, "namespace": ns},
            "spec": {"template": {"spec": {"containers": [
                {"name": "c", "image": image or name,
                 "env": [{"name": k, "value": v} for k, v in (env or {}).items()]}]}}}}


def _flannel_cm(kind: str) -> dict:
    return {("kube-flannel", "kube-flannel-cfg"):
            {"data": {"net-conf.json": json.dumps({"Network": "10.244.0.0/16",
                                                   "Backend": {"Type": kind}})}}}


def test_cni_detection_of_each_plugin():
    proxy = _ds("kube-proxy", image="registry.k8s.io/kube-proxy:v1.34.3")
    flannel = _ds("kube-flannel-ds", "kube-flannel", "ghcr.io/flannel-io/flannel:v0.26.7")
    assert cni.detect([proxy, flannel], _flannel_cm("vxlan")).datapath == "flannel-vxlan"
    assert cni.detect([flannel], _flannel_cm("host-gw")).datapath == "flannel-hostgw"
    assert cni.detect([flannel], _flannel_cm("wireguard")).datapath == "flannel-wireguard"
    assert cni.detect([flannel], {}).datapath == "flannel-vxlan"  # flannel's default
    assert cni.detect([flannel], {}).daemonset == "kube-flannel/kube-flannel-ds"
    assert cni.detect([_ds("kube-router")], {}).datapath == "kube-router"
    weave = _ds("weave-net", image="weaveworks/weave-kube:2.8.1")
    assert cni.detect([weave], {}).datapath == "weave"
    secret_env = _ds("weave-net", image="weaveworks/weave-kube:2.8.1")
    secret_env["spec"]["template"]["spec"]["containers"][0]["env"] = [
        {"name": "WEAVE_PASSWORD", "valueFrom": {"secretKeyRef": {"name": "weave-passwd",
                                                                  "key": "weave-passwd"}}}]
    assert cni.detect([secret_env], {}).datapath == "weave-encrypted"
    assert cni.detect([_ds("calico-node", env={"CALICO_IPV4POOL_IPIP": "Always"})],
                      {}).datapath == "calico-ipip"
    assert cni.detect([_ds("calico-node", env={"CALICO_IPV4POOL_VXLAN": "Always"})],
                      {}).datapath == "calico-vxlan"
    assert cni.detect([_ds("calico-node")], {}).datapath == "calico"
    # cilium-config as Cilium 1.14+ writes it (routing-mode, tunnel-protocol), and before
    # (tunnel: vxlan, geneve or disabled)
    config = ("kube-system", "cilium-config")
    assert cni.detect([_ds("cilium")], {}).datapath == "cilium-vxlan"  # Cilium's default
    for data, datapath in (({"routing-mode": "tunnel", "tunnel-protocol": "vxlan"},
                            "cilium-vxlan"),
                           ({"routing-mode": "native"}, "cilium-native"),
                           ({"tunnel": "disabled"}, "cilium-native"),
                           ({"tunnel": "vxlan"}, "cilium-vxlan"),
                           ({"routing-mode": "tunnel", "tunnel-protocol": "geneve"}, "unknown")):
        found = cni.detect([_ds("cilium")], {config: {"data": data}})
        assert found.datapath == datapath, data
    assert "geneve" in found.cni
    found = cni.detect([proxy], {})
    assert found.datapath == "unknown" and "no known CNI" in found.cni


def test_pod_readings():
    pulling = {"status": {"phase": "Pending", "containerStatuses": [
        {"state": {"waiting": {"reason": "ImagePullBackOff", "message": "not found"}}}]}}
    assert pods.fatal(pulling) == "ImagePullBackOff: not found"
    creating = {"status": {"phase": "Pending", "containerStatuses": [
        {"state": {"waiting": {"reason": "ContainerCreating"}}}]}}
    assert pods.fatal(creating) is None
    unschedulable = {"status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
         "message": "0/3 nodes are available"}]}}
    assert pods.fatal(unschedulable) == "Unschedulable: 0/3 nodes are available"
    rejected = {"status": {"phase": "Failed", "reason": "OutOfcpu", "message": "no cpu"}}
    assert pods.fatal(rejected) == "OutOfcpu: no cpu"
    done = {"status": {"phase": "Failed", "containerStatuses": [
        {"state": {"terminated": {"exitCode": 3}}}]}}
    assert pods.exit_code(done) == 3 and pods.finished(done)
    assert metrics.cores("250m") == 0.25 and metrics.cores("1500000000n") == 1.5
    assert metrics.cores("2") == 2.0


def test_metrics_server_readings_sum_the_cni_pods_and_nodes():
    # the shapes of metrics.k8s.io/v1beta1 NodeMetricsList and PodMetricsList
    nodes = {"kind": "NodeMetricsList", "items": [
        {"metadata": {"name": "pi4-a"}, "usage": {"cpu": "250000000n", "memory": "512Mi"}},
        {"metadata": {"name": "pi4-b"}, "usage": {"cpu": "750m", "memory": "1Gi"}}]}
    pods = {"kind": "PodMetricsList", "items": [
        {"metadata": {"name": "kube-flannel-ds-x7k2p"},
         "containers": [{"name": "kube-flannel", "usage": {"cpu": "10m", "memory": "20Mi"}}]},
        {"metadata": {"name": "kube-flannel-ds-9qz4m"},
         "containers": [{"name": "kube-flannel", "usage": {"cpu": "30m",
                                                           "memory": "12288Ki"}}]},
        {"metadata": {"name": "coredns-abc"},
         "containers": [{"name": "coredns", "usage": {"cpu": "500m", "memory": "100Mi"}}]}]}
    cni_cores, node_cores, cni_mb = metrics.metrics_totals(nodes, pods, "kube-flannel-ds")
    assert abs(cni_cores - 0.04) < 1e-9 and node_cores == 1.0 and cni_mb == 32.0
    assert metrics.metrics_totals(nodes, pods, "")[0] == 0  # no CNI found: nothing counted


def test_usage_gauges_are_kept_and_counters_differenced(tmp_path):
    from k8sdds import records, repeat

    repeat._write_usage(tmp_path, {"datapath_cpu_s": 10.0, "node_cpu_s": 100.0,
                                   "datapath_memory_mb": 30.0},
                        {"datapath_cpu_s": 10.5, "node_cpu_s": 102.0,
                         "datapath_memory_mb": 31.5}, 5.0)
    usage = json.loads((tmp_path / records.USAGE).read_text())
    assert usage == {"wall_s": 5.0, "datapath_cpu_s": 0.5, "node_cpu_s": 2.0,
                     "datapath_memory_mb": 31.5}
    values = {v.metric: v.value for v in records.datapath_usage(json.dumps(usage)).values}
    assert values == {"datapath_cpu_pct": 10.0, "node_cpu_pct": 40.0,
                      "datapath_memory_mb": 31.5}


def test_a_pod_waits_for_the_names_of_the_roles_started_before_it():
    names = {"pub": "t1-r1-pub-abc.k8sdds", "sub0": "t1-r1-sub0-abc.k8sdds",
             "server": "10.96.4.2"}
    assert m.peers(names, "pub") == ("t1-r1-sub0-abc.k8sdds",)  # a Service's IP is no name
    params = m.PodParams(name="t1-r1-pub-abc", namespace="k8sdds-abc", run_id="abc",
                         repeat="t1-r1-abc", role="pub", node="node1", image="img:1",
                         argv=("ddsperf", "pub"), peers=m.peers(names, "pub"))
    spec = m.pod(params)["spec"]
    [init] = spec["initContainers"]
    assert init["image"] == "img:1" and init["command"][:2] == ["sh", "-c"]
    assert init["command"][3:] == ["sh", "t1-r1-sub0-abc.k8sdds"]  # $0, then the names
    assert init["securityContext"]["runAsNonRoot"] is True  # as restricted as the engine
    # the names are arguments of the script, never part of it
    assert "t1-r1-sub0" not in init["command"][2]
    no_peers = m.pod(m.PodParams(**{**params.__dict__, "peers": ()}))["spec"]
    assert "initContainers" not in no_peers


def test_the_fingerprint_probes_are_one_host_and_one_pod_network_pod_per_node_unprivileged():
    from k8sdds.deployment.kubernetes import probes

    made = probes.specs("ns1", "abc123", "img:1", ["node.a", "node2"], arch="arm")
    assert [p["metadata"]["name"] for p in made] == [
        "fp0-host-abc123", "fp0-pod-abc123", "fp1-host-abc123", "fp1-pod-abc123"]
    for pod in made:
        spec, box = pod["spec"], pod["spec"]["containers"][0]
        assert spec["nodeName"] in ("node.a", "node2") and spec["restartPolicy"] == "Never"
        assert spec.get("hostNetwork", False) is ("-host-" in pod["metadata"]["name"])
        assert box["securityContext"]["capabilities"] == {"drop": ["ALL"]}
        assert box["securityContext"]["readOnlyRootFilesystem"] is True
        assert "privileged" not in box["securityContext"]
        assert box["command"][:2] == ["sh", "-c"] and "ethtool -k" in box["command"][2]
        assert spec["nodeSelector"]["kubernetes.io/arch"] == "arm"
        assert spec["automountServiceAccountToken"] is False
    # the pod-network probe reads the network only (its kernel is the node's anyway)
    assert "uname" not in made[1]["spec"]["containers"][0]["command"][2]
