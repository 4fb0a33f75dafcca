"""`k8sdds cluster check` and `tune` over real SSH: sshd in network namespaces, real keys,
a real known_hosts; the inventory's validation without any host."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
import yaml

from k8sdds.cluster import inventory as inv

from . import ssh_support as ss
from . import vm_support
from .builds import ENGINES, needs
from .containerd_support import collect_garbage
from .load_support import STOP_BOUND_S, busy_machine, stop_timed

HOSTS_REASON = ss.missing()


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "k8sdds", *args], capture_output=True,
                          text=True, timeout=timeout,
                          env={**os.environ, "COLUMNS": "250",
                               "PYTHONPATH": str(Path(__file__).parent.parent)})


def test_inventory_validation_names_host_field_and_value(tmp_path):
    good = {"defaults": {"user": "pi", "key": "~/.ssh/id"},
            "hosts": [{"name": "master", "address": "10.0.0.1", "role": "control-plane"},
                      {"name": "pi1", "address": "10.0.0.2", "arch": "arm", "port": 2222}]}
    loaded = inv.parse(good)
    assert [h.name for h in loaded.workers()] == ["pi1"]
    assert loaded.control_plane().user == "pi" and loaded.hosts[1].port == 2222
    assert loaded.hosts[0].key == str(Path("~/.ssh/id").expanduser())
    assert loaded.hosts[1].engine_bin == ""
    given = inv.parse({**good, "defaults": {**good["defaults"], "engine_bin": "/opt/k8sdds/bin"}})
    assert {h.engine_bin for h in given.hosts} == {"/opt/k8sdds/bin"}
    bad = [
        ({**good, "hosts": [good["hosts"][0], {**good["hosts"][1], "engine_bin": "bin; rm"}]},
         "host 2 (pi1), field engine_bin: value 'bin; rm': an absolute directory"),
        ({**good, "hosts": [{**good["hosts"][0]}, {**good["hosts"][1], "arch": "riscv"}]},
         "host 2 (pi1), field arch: value 'riscv'; allowed: amd64, arm64, arm"),
        ({**good, "hosts": [good["hosts"][0], {**good["hosts"][1], "address": "-oProxy=x"}]},
         "field address"),
        ({**good, "hosts": [good["hosts"][1]]}, "exactly one host must have role"),
        ({**good, "hosts": [good["hosts"][0], {**good["hosts"][1], "name": "master"}]},
         "is given twice"),
        ({**good, "hosts": [good["hosts"][0], {**good["hosts"][1], "port": 70000}]},
         "field port: value 70000"),
        ({**good, "extra": 1}, "unknown field 'extra'"),
        ({**good, "defaults": {"user": "root; rm -rf /"}}, "field user"),
        ([], "expected a mapping"),
    ]
    for data, message in bad:
        with pytest.raises(inv.InventoryError, match=None) as info:
            inv.parse(data, "inv.yaml")
        assert message in str(info.value) and str(info.value).startswith("inv.yaml")
    path = tmp_path / "i.yaml"
    path.write_text("hosts: [unclosed")
    done = _cli("cluster", "check", "--inventory", str(path))
    assert done.returncode == 2 and "i.yaml, line 1, column 17: not valid YAML" in done.stderr
    assert "Traceback" not in done.stderr


def test_dry_run_prints_every_command_and_connects_to_none(tmp_path):
    path = tmp_path / "i.yaml"
    path.write_text("known_hosts: /nonexistent\nhosts:\n"
                    "  - {name: m, address: 192.0.2.1, user: root, role: control-plane}\n"
                    "  - {name: w, address: 192.0.2.2, user: pi}\n")
    done = _cli("cluster", "tune", "--inventory", str(path), "--dry-run",
                "--log-dir", str(tmp_path / "logs"))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "m (root@192.0.2.1:22)" in out and "w (pi@192.0.2.2:22)" in out
    assert "$ sysctl -n net.core.rmem_max" in out
    assert "$ sysctl -w 'net.ipv4.tcp_rmem=4096 87380 2147483647'" in out  # shlex-quoted
    assert "$ sudo -n -- tee /etc/sysctl.d/90-k8sdds.conf.k8sdds-" in out  # pi: sudo
    done = _cli("cluster", "check", "--inventory", str(path), "--dry-run",
                "--log-dir", str(tmp_path / "logs2"))
    assert done.returncode == 0 and "$ kubeadm version -o short" in done.stdout
    # the engines, as an air-gapped Pi gets them: nothing downloaded, nothing connected
    pi = tmp_path / "pi.yaml"
    pi.write_text("known_hosts: /nonexistent\nhosts:\n"
                  "  - {name: m, address: 192.0.2.1, user: root, role: control-plane}\n"
                  "  - {name: w, address: 192.0.2.2, user: pi, arch: arm64, "
                  "engine_bin: /opt/k8sdds/bin}\n")
    done = _cli("cluster", "engines", "--inventory", str(pi), "--dry-run", "--debian",
                "always", "--log-dir", str(tmp_path / "logs3"))
    assert "w: would fail" not in done.stderr  # what is built for arm64 or not, w is done
    assert "$ sudo -n -- rm -rf /opt/k8sdds/bin/debian-arm64" in done.stdout
    assert "$ sudo -n -- tar -x --no-same-owner -f /tmp/k8sdds-debian-engines.XXXXXX " \
        "-C /opt/k8sdds/bin" in done.stdout
    assert "sftp put debian-engines-bookworm-arm64.tar" in done.stdout
    assert done.returncode == 1 and "m: would fail: m: no engine_bin in the inventory" in \
        " ".join(done.stderr.split()), done.stderr
    wrong = _cli("cluster", "engines", "--inventory", str(pi), "--debian", "sometimes")
    assert wrong.returncode == 2 and "--debian" in wrong.stderr and "always" in wrong.stderr
    assert "Traceback" not in wrong.stderr


def test_engines_without_any_build_copy_debians_and_say_what_they_skip(tmp_path):
    """A machine without Go, Rust or Perftest's sources (an empty engines' cache): `cluster
    engines` still gives a Pi 3 Debian's ddsperf and mosquitto, and names each engine it
    skipped with how to build it, or why it cannot be."""
    pi = tmp_path / "pi.yaml"
    pi.write_text("known_hosts: /nonexistent\nhosts:\n"
                  "  - {name: pi3, address: 192.0.2.3, user: pi, arch: arm, role: "
                  "control-plane, engine_bin: /opt/k8sdds/bin}\n")
    (tmp_path / "empty").mkdir()
    done = subprocess.run([sys.executable, "-m", "k8sdds", "cluster", "engines", "--inventory",
                           str(pi), "--dry-run", "--log-dir", str(tmp_path / "logs")],
                          capture_output=True, text=True, timeout=120, env={
                              **os.environ, "COLUMNS": "250",
                              "K8SDDS_ENGINE_BIN": str(tmp_path / "empty"),
                              "PYTHONPATH": str(Path(__file__).parent.parent)})
    assert done.returncode == 0, done.stderr
    assert "sftp put debian-engines-bookworm-armhf.tar" in done.stdout
    assert "$ sudo -n -- install" not in done.stdout  # nothing of k8sdds' own to copy
    said = " ".join(done.stderr.split())
    assert "pi3: skipped: " in said
    for expected in ('perftest_cpp (not built for armhf: make perftest PERFTEST_SRC=DIR '
                     'PERFTEST_ARCHES="armhf"', "k8sdds-zenoh (runs on amd64, arm64 only)",
                     "k8sdds-mqtt (not built for armhf: `make engines`, or ARCH=armhf "
                     "ENGINES=mqtt engines/build)"):
        assert expected in said, said


# real sshd hosts in network namespaces: marked `ssh`, skipped with the reason where they
# cannot run (and a skip fails in CI: tests/skip_rule.py)
requires_hosts = pytest.mark.skipif(HOSTS_REASON is not None, reason=HOSTS_REASON or "")


@pytest.fixture(scope="module")
def hosts(tmp_path_factory):
    h = ss.Hosts(tmp_path_factory.mktemp("ssh"), f"kss{os.getpid() % 1000}")
    try:
        yield h.up()
    finally:
        h.down()


@pytest.mark.ssh
@requires_hosts
def test_check_runs_on_every_host_and_names_the_fix(hosts, tmp_path):
    # ip_forward is per network namespace: on for h1, off (the default) for h2
    subprocess.run(["ip", "netns", "exec", hosts.ns(1), "sysctl", "-w",
                    "net.ipv4.ip_forward=1"], check=True, capture_output=True)
    invf = hosts.inventory((1, 2), hosts.known_hosts((1, 2)))
    done = _cli("cluster", "check", "--inventory", str(invf), "--log-dir", str(tmp_path))
    assert done.returncode == 1  # no kubeadm here: failures, each with its fix
    rows = ss.check_rows(done.stdout)
    assert "pass" in rows[("h1", "reachable")] and "pass" in rows[("h2", "reachable")]
    # the inventory's h2 is a 32-bit Pi (arm); the test host is this machine's
    assert "pass" in rows[("h1", "architecture")] and "x86_64" in rows[("h1", "architecture")]
    assert "fail" in rows[("h2", "architecture")]
    assert "x86_64 (amd64); the inventory says arm" in rows[("h2", "architecture")]
    assert "pass" in rows[("h1", "ip_forward")]
    assert "fail" in rows[("h2", "ip_forward")] and "sysctl -w" in rows[("h2", "ip_forward")]
    assert "fail" in rows[("h1", "kubeadm")] and "cluster install" in rows[("h1", "kubeadm")]
    assert "fail" in rows[("h1", "images")] and "cluster images" in rows[("h1", "images")]
    assert "pass" in rows[("h2", "time skew")]
    # what a bare-host run would lack: said, with the command that delivers it, not a failure
    engines = rows[("h1", "engines (ssh runs)")]
    assert "note" in engines and "missing: perftest_cpp, k8sdds-zenoh, k8sdds-mqtt" in engines
    assert "k8sdds cluster engines -i INVENTORY (after giving the host an engine_bin)" in \
        engines
    # every command and its output, per host
    log = (tmp_path / "h2.log").read_text()
    assert re.search(r"\$ cat /proc/sys/net/ipv4/ip_forward\n0\n\[exit 0, \d+\.\d\d s\]", log)


@pytest.mark.ssh
@requires_hosts
def test_a_long_output_is_read_whole(hosts, tmp_path):
    """A long output, on stdout and stderr, is read to its end: not only until the exit
    status, which sshd may send before the last of it (a reset restores iptables rules from
    what iptables-save printed)."""
    from k8sdds.cluster.remote import Remote

    invf = hosts.inventory((1,), hosts.known_hosts((1,)))
    host = inv.load(invf).hosts[0]
    with Remote(host, str(hosts.known_hosts((1,))), tmp_path / "h1.log") as remote:
        for _ in range(5):
            r = remote.run(["python3", "-c", "import sys; sys.stdout.write('x' * 3_000_000); "
                            "sys.stderr.write('y' * 300_000)"])
            assert (r.code, len(r.out), len(r.err)) == (0, 3_000_000, 300_000)


@pytest.mark.ssh
@requires_hosts
def test_a_handshake_the_host_drops_is_tried_again(hosts, tmp_path):
    """A host too busy to finish the SSH handshake closes it (as the emulated Pi did while it
    started its pods: paramiko said "No existing session"): the connection is tried again,
    and the host's commands run. Here a relay in front of h1's sshd closes the first
    connection it is given and relays the next."""
    import socket
    import threading

    from k8sdds.cluster.remote import Remote

    relay = socket.create_server(("127.0.0.1", 0))
    port, accepted = relay.getsockname()[1], []

    def pipe(a, b):
        with a, b:
            while data := a.recv(65536):
                b.sendall(data)

    def serve():
        while True:
            try:
                conn, _ = relay.accept()
            except OSError:
                return
            accepted.append(conn)
            if len(accepted) == 1:
                conn.close()  # the dropped handshake
                continue
            upstream = socket.create_connection((hosts.address(1), 22))
            for a, b in ((conn, upstream), (upstream, conn)):
                threading.Thread(target=pipe, args=(a, b), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    known = tmp_path / "known_hosts"
    known.write_text(hosts.known_hosts((1,)).read_text().replace(
        f"{hosts.address(1)} ", f"[127.0.0.1]:{port} ", 1))
    host = inv.load(hosts.inventory((1,), known)).hosts[0]
    host = inv.Host(**{**host.__dict__, "address": "127.0.0.1", "port": port})
    try:
        with Remote(host, str(known), tmp_path / "h1.log") as remote:
            assert remote.run(["echo", "reached"]).out.strip() == "reached"
    finally:
        relay.close()
    assert len(accepted) == 2


@pytest.mark.ssh
@requires_hosts
def test_unknown_host_key_and_a_host_down_stop_only_themselves(hosts, tmp_path):
    invf = hosts.inventory((1, 2, 3), hosts.known_hosts((1, 3)))  # h2 unknown, h3 no sshd
    done = _cli("cluster", "check", "--inventory", str(invf), "--log-dir", str(tmp_path))
    assert done.returncode == 1
    text = " ".join(done.stdout.split())
    assert f"{hosts.address(2)}:22 is not in" in text
    assert hosts.fingerprint(2) in text.replace("│ ", "").replace(" │", "")  # SHA256:...
    assert f"ssh-keyscan -p 22 {hosts.address(2)} >>" in text
    assert f"cannot reach {hosts.address(3)}:22" in text
    from k8sdds.cluster.checks import CHECKS

    # h1 fully checked: its architecture, every check's command, the clock and the images'
    # (which stop at kubeadm's version: no kubeadm here), and the engines row's look for
    # ddsperf and mosquitto (no engine_bin: nothing more to look in), in its log
    log = (tmp_path / "h1.log").read_text()
    assert log.startswith("$ uname -m\n")
    assert log.count("$ ") == 1 + len(CHECKS) + 2 + 2
    assert "$ sh -c 'command -v ddsperf'" in log and "$ sh -c 'command -v mosquitto'" in log


@pytest.mark.ssh
@requires_hosts
def test_tune_is_idempotent_and_revert_restores(hosts, tmp_path):
    keys = "net.ipv4.tcp_rmem,net.ipv4.ipfrag_high_thresh"  # per network namespace
    root = tmp_path / "root-{host}"  # one file system per host, as real hosts have
    invf = hosts.inventory((1, 2), hosts.known_hosts((1, 2)))
    before = {i: {k: hosts.sysctl(i, k) for k in keys.split(",")} for i in (1, 2)}
    host_before = subprocess.run(["sysctl", "-n", "net.ipv4.tcp_rmem"], capture_output=True,
                                 text=True).stdout
    args = ("--inventory", str(invf), "--keys", keys, "--root", str(root), "--log-dir",
            str(tmp_path / "logs"))
    for _ in range(2):  # twice: the second changes nothing and keeps the first record
        done = _cli("cluster", "tune", *args)
        assert done.returncode == 0, done.stderr
        for i in (1, 2):
            assert hosts.sysctl(i, "net.ipv4.tcp_rmem") == "4096 87380 2147483647"
            assert hosts.sysctl(i, "net.ipv4.ipfrag_high_thresh") == "8388608"
    h1 = tmp_path / "root-h1"
    drop_in = (h1 / "etc/sysctl.d/90-k8sdds.conf").read_text()
    assert "net.ipv4.tcp_rmem = 4096 87380 2147483647" in drop_in
    record = (h1 / "etc/k8sdds/sysctl-previous.conf").read_text()
    assert f"net.ipv4.tcp_rmem = {before[1]['net.ipv4.tcp_rmem']}" in record
    assert "tuned 2/2 hosts" in done.stdout
    done = _cli("cluster", "tune", "--revert", *args)
    assert done.returncode == 0, done.stderr
    for i in (1, 2):
        assert {k: hosts.sysctl(i, k) for k in keys.split(",")} == before[i]
    for i in (1, 2):
        assert not (tmp_path / f"root-h{i}/etc/sysctl.d/90-k8sdds.conf").exists()
        assert not (tmp_path / f"root-h{i}/etc/k8sdds/sysctl-previous.conf").exists()
    # only the hosts' namespaces changed, never this machine
    assert subprocess.run(["sysctl", "-n", "net.ipv4.tcp_rmem"], capture_output=True,
                          text=True).stdout == host_before


@pytest.mark.ssh
@requires_hosts
def test_tune_with_a_host_down_says_which_and_does_the_others(hosts, tmp_path):
    invf = hosts.inventory((1, 3), hosts.known_hosts((1, 3)))
    root = tmp_path / "root-{host}"
    done = _cli("cluster", "tune", "--inventory", str(invf), "--keys",
                "net.ipv4.ipfrag_high_thresh", "--root", str(root), "--log-dir",
                str(tmp_path / "logs"))
    assert done.returncode == 1
    assert "h3: failed" in done.stderr and "not done on: h3 (the others are)" in done.stderr
    assert "tuned 1/2 hosts" in done.stdout
    assert hosts.sysctl(1, "net.ipv4.ipfrag_high_thresh") == "8388608"
    assert _cli("cluster", "tune", "--revert", "--inventory", str(invf), "--root", str(root),
                "--log-dir", str(tmp_path / "logs")).returncode == 1  # h3 still down
    assert hosts.sysctl(1, "net.ipv4.ipfrag_high_thresh") != "8388608"


# the recorded-command tests: for the CNIs whose images for these manifests cannot be built
# here (weave, calico) these are the tests; flannel's and kube-router's run for real in
# test_kubeadm_real.py (and are recorded here too).
# These stand-ins, first on the PATH of the SSH sessions, record each command they get (with
# the host it ran on, from SSH_CONNECTION, and the files it was given) and answer as kubeadm
# and kubectl would; `rm` and `find` are too (`rm` removes only k8sdds's temporary files)
STANDIN = """#!{python}
import json, os, sys
args = sys.argv[1:]
name = os.path.basename(sys.argv[0])
stdin = sys.stdin.read() if "--from-file=weave-passwd=/dev/stdin" in args else None
files = {{a: open(a).read() for a in args if a.startswith("/tmp/k8sdds-")
         and name != "rm" and os.path.exists(a)}}
with open({calls!r}, "a") as fh:
    fh.write(json.dumps({{"host": os.environ["SSH_CONNECTION"].split()[2],
                         "argv": [name] + args, "stdin": stdin, "files": files}}) + "\\n")
if name == "rm":
    for a in args:
        if a.startswith("/tmp/k8sdds-") and os.path.isfile(a):
            os.remove(a)
if args[:3] == ["token", "create", "--print-join-command"]:
    print("kubeadm join 10.252.0.11:6443 --token abcdef.0123456789abcdef "
          "--discovery-token-ca-cert-hash sha256:" + "ab" * 32)
if args == ["version", "-o", "short"]:
    print("v1.34.3")
if args[-4:] == ["get", "nodes", "-o", "name"]:
    print("node/h1\\nnode/h2")
if args[-3:] == ["config", "view", "--raw"]:
    print("apiVersion: v1\\nkind: Config\\nclusters: []")
if args[-4:] == ["daemonsets", "-A", "-o", "json"]:
    print(json.dumps({{"items": [{{"metadata": {{"namespace": "kube-system",
        "name": "kube-proxy", "generation": 1}}, "status": {{"observedGeneration": 1,
        "desiredNumberScheduled": 2, "numberReady": 2, "updatedNumberScheduled": 2}}}}]}}))
"""


@pytest.fixture(scope="module")
def kube_hosts(tmp_path_factory):
    d = tmp_path_factory.mktemp("kubeadm")
    bin_dir = d / "bin"
    bin_dir.mkdir()
    for name in ("kubeadm", "kubectl", "rm", "find"):
        (bin_dir / name).write_text(STANDIN.format(python=sys.executable,
                                                   calls=str(d / "calls.jsonl")))
        (bin_dir / name).chmod(0o755)
    h = ss.Hosts(d / "hosts", f"ksk{os.getpid() % 1000}", standins=bin_dir, net=252)
    try:
        yield h.up(), d / "calls.jsonl"
    finally:
        h.down()


def _calls(path: Path) -> list[dict]:
    import json

    calls = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("")
    return calls


def _config(call: dict) -> dict:
    """The kubeadm configuration documents kubeadm init was given, by kind."""
    (text,) = call["files"].values()
    return {d["kind"]: d for d in yaml.safe_load_all(text)}


@pytest.mark.ssh
@requires_hosts
def test_init_join_reset_run_the_exact_commands_over_ssh(kube_hosts, tmp_path):
    hosts, calls_file = kube_hosts
    invf = hosts.inventory((1, 2), hosts.known_hosts((1, 2)))
    args = ("--inventory", str(invf), "--log-dir", str(tmp_path))
    kubeconfig = tmp_path / "admin.conf"
    extra = tmp_path / "extra.yaml"
    extra.write_text("apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
                     "cgroupDriver: cgroupfs\n---\napiVersion: kubeadm.k8s.io/v1beta4\n"
                     "kind: ClusterConfiguration\nnetworking: {serviceSubnet: 10.97.0.0/16}\n")
    done = _cli("cluster", "init", "--cni", "weave-encrypted", "--kubeadm-config", str(extra),
                "--kubeconfig", str(kubeconfig), *args)
    assert done.returncode == 0, done.stderr
    calls = _calls(calls_file)
    # the new cluster's kubeconfig, fetched as root from the control plane, kept 0600
    assert calls[-1]["argv"] == ["kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf",
                                 "config", "view", "--raw"]
    assert kubeconfig.read_text() == "apiVersion: v1\nkind: Config\nclusters: []\n"
    assert kubeconfig.stat().st_mode & 0o777 == 0o600
    assert f"kubeconfig: {kubeconfig}" in " ".join(done.stdout.split())
    cp = hosts.address(1)
    assert {c["host"] for c in calls} == {cp}  # the control plane only
    argvs = [c["argv"] for c in calls]
    assert argvs[0] == ["kubeadm", "version", "-o", "short"]
    assert argvs[1][:3] == ["kubeadm", "init", "--config"] and len(argvs[1]) == 4
    config = _config(calls[1])
    assert config["InitConfiguration"]["localAPIEndpoint"]["advertiseAddress"] == cp
    assert config["InitConfiguration"]["nodeRegistration"]["name"] == "h1"
    cluster = config["ClusterConfiguration"]
    assert cluster["kubernetesVersion"] == "v1.34.3"  # the host's kubeadm: no lookup online
    assert cluster["networking"] == {"podSubnet": "10.32.0.0/12",
                                     "serviceSubnet": "10.97.0.0/16"}  # merged
    assert config["KubeletConfiguration"]["cgroupDriver"] == "cgroupfs"  # added
    assert argvs[2] == ["rm", "-f", argvs[1][3]]  # the configuration copy removed
    secret = calls[3]
    assert secret["argv"][-5:] == ["create", "secret", "generic", "weave-passwd",
                                   "--from-file=weave-passwd=/dev/stdin"]
    password = secret["stdin"]
    assert len(password) >= 40  # generated, 32 random bytes
    apply = calls[4]
    assert apply["argv"][-3:-1] == ["apply", "-f"]
    assert apply["argv"][-1].startswith("/tmp/k8sdds-weave-encrypted.")
    objects = [o for d in yaml.safe_load_all(apply["files"][apply["argv"][-1]]) if d
               for o in d.get("items", [d])]
    (daemonset,) = [o for o in objects if o["kind"] == "DaemonSet"]
    containers = daemonset["spec"]["template"]["spec"]["containers"]
    # 2.8.1's manifest for the 2.6.5 images built here: the router installs the CNI itself
    assert {c["image"] for c in containers} == {"weaveworks/weave-kube:2.6.5",
                                                "weaveworks/weave-npc:2.6.5"}
    assert all(c["imagePullPolicy"] == "IfNotPresent" for c in containers)
    assert "initContainers" not in daemonset["spec"]["template"]["spec"]
    weave = next(c for c in containers if c["name"] == "weave")
    assert {m["mountPath"] for m in weave["volumeMounts"]} >= {
        "/host/opt", "/host/home", "/host/etc"}
    assert {"name": "WEAVE_PASSWORD", "valueFrom": {"secretKeyRef": {
        "name": "weave-passwd", "key": "weave-passwd"}}} in weave["env"]
    for copy in (argvs[1][3], apply["argv"][-1]):  # removed (the hosts share this /tmp)
        assert not Path(copy).exists()
    # never printed, never logged
    assert password not in done.stdout + done.stderr
    assert all(password not in f.read_text() for f in tmp_path.iterdir() if f.is_file())

    done = _cli("cluster", "join", "--ignore-preflight-errors", "Swap,SystemVerification",
                *args)
    assert done.returncode == 0, done.stderr
    calls = _calls(calls_file)
    assert [(c["host"], c["argv"][:3]) for c in calls] == [
        (cp, ["kubeadm", "token", "create"]),
        (hosts.address(2), ["kubeadm", "join", "10.252.0.11:6443"]),
        (cp, ["kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf"]),
        (cp, ["kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf"]),
        (cp, ["kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf"])]
    assert calls[1]["argv"][3:] == ["--token", "abcdef.0123456789abcdef",
                                    "--discovery-token-ca-cert-hash", "sha256:" + "ab" * 32,
                                    "--node-name=h2",
                                    "--ignore-preflight-errors=Swap,SystemVerification"]
    assert calls[2]["argv"][3:] == ["get", "nodes", "-o", "name"]  # until every one is there
    assert calls[3]["argv"][3:6] == ["wait", "--for=condition=Ready", "node/h1"]
    # then the DaemonSets' pods (the CNI's, kube-proxy) ready on every node
    assert calls[4]["argv"][3:] == ["get", "daemonsets", "-A", "-o", "json"]
    assert "every DaemonSet's pods ready" in " ".join(done.stdout.split())

    done = _cli("cluster", "reset", *args)
    assert done.returncode == 0, done.stderr
    # (these hosts have no crictl: kubeadm reset alone removes the pods)
    assert ("h1: 2 nodes drained; no crictl: the pods left to kubeadm reset; kubeadm reset;"
            in " ".join(done.stdout.split()))
    calls = _calls(calls_file)
    # first every node cordoned, then drained, from the control plane: the pods leave
    # through the CNI while it runs
    kubectl = ["kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf"]
    assert [c["argv"] for c in calls[:3]] == [
        [*kubectl, "get", "nodes", "-o", "name"], [*kubectl, "cordon", "h1", "h2"],
        [*kubectl, "drain", "h1", "h2", "--ignore-daemonsets", "--delete-emptydir-data",
         "--force", "--timeout=180s"]]
    assert {c["host"] for c in calls[:3]} == {cp}
    for addr in (cp, hosts.address(2)):
        mine = [c["argv"] for c in calls[3:] if c["host"] == addr]
        assert mine[0] == ["kubeadm", "reset", "-f"]
        assert mine[1] == ["find", "/etc/cni/net.d", "-mindepth", "1", "-delete"]
        assert mine[2][:4] == ["rm", "-rf", "/var/lib/cni", "/run/flannel"]


@pytest.mark.ssh
@requires_hosts
def test_each_cni_gets_its_pod_network_and_manifest(kube_hosts, tmp_path):
    from k8sdds import cni as cnis
    from k8sdds.cni import manifests

    hosts, calls_file = kube_hosts
    invf = hosts.inventory((1, 2), hosts.known_hosts((1, 2)))
    for cni in cnis.PLANS.values():
        done = _cli("cluster", "init", "--cni", cni.name, "--inventory", str(invf),
                    "--log-dir", str(tmp_path), "--kubeconfig", str(tmp_path / "a.conf"))
        assert done.returncode == 0, done.stderr
        calls = _calls(calls_file)[:-1]  # the last: the kubeconfig fetched
        config = _config(calls[1])
        assert config["ClusterConfiguration"]["networking"]["podSubnet"] == cni.pod_cidr
        applied = [c for c in calls if c["argv"][0] == "kubectl" and "apply" in c["argv"]]
        (apply,) = applied
        text = apply["files"][apply["argv"][-1]]
        assert manifests.adapt(cni, manifests.shipped(cni.cni)) == text  # shipped, adapted
        for image in manifests.images(cni):
            assert f"image: {image}" in text
    # the online way: the published manifest by URL, then the same changes as patches
    url = "https://example.org/kube-flannel.yml"
    done = _cli("cluster", "init", "--cni", "flannel-hostgw", "--manifest-url", url,
                "--inventory", str(invf), "--log-dir", str(tmp_path),
                "--kubeconfig", str(tmp_path / "a.conf"))
    assert done.returncode == 0, done.stderr
    argvs = [c["argv"] for c in _calls(calls_file)]
    assert argvs[3][-3:] == ["apply", "-f", url]
    assert 'host-gw' in argvs[4][-1] and argvs[5][-1] == "daemonset/kube-flannel-ds"


@pytest.mark.ssh
@requires_hosts
def test_join_with_a_worker_down_says_which(kube_hosts, tmp_path):
    hosts, calls_file = kube_hosts
    invf = hosts.inventory((1, 2, 3), hosts.known_hosts((1, 2, 3)))
    done = _cli("cluster", "join", "--inventory", str(invf), "--log-dir", str(tmp_path))
    assert done.returncode == 1
    assert "h3: failed" in done.stderr and f"cannot reach {hosts.address(3)}:22" in done.stderr
    assert "not done on: h3 (the others are)" in done.stderr
    calls = _calls(calls_file)
    assert [c["argv"][1] for c in calls if c["host"] == hosts.address(2)] == ["join"]
    # no wait for Ready while a worker is missing: the failure is the answer
    assert not any("wait" in c["argv"] for c in calls)


@pytest.fixture(scope="module")
def bare(tmp_path_factory):
    """Three hosts all serving: master (h1) and two workers where the engines run."""
    h = ss.Hosts(tmp_path_factory.mktemp("bare"), f"ksb{os.getpid() % 1000}", serving=(1, 2, 3),
                 net=253)
    try:
        yield h.up()
    finally:
        h.down()


def _ddsperf_in(hosts, i: int) -> list[str]:
    out = subprocess.run(["ip", "netns", "pids", hosts.ns(i)], capture_output=True,
                         text=True).stdout.split()
    return [p for p in out if Path(f"/proc/{p}/comm").exists()
            and Path(f"/proc/{p}/comm").read_text().strip() == "ddsperf"]


@pytest.mark.ssh
@requires_hosts
def test_ssh_backend_runs_ddsperf_on_the_bare_hosts(bare, tmp_path):
    import json

    import pandas as pd

    invf = bare.inventory((1, 2, 3), bare.known_hosts((1, 2, 3)))
    sch = tmp_path / "s.csv"
    sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize\n"
                   "1024,false,1,false,0\n")
    done = _cli("run", "--backend", "ssh", "--inventory", str(invf), "--sch", str(sch),
                "--duration", "3", "--out", str(tmp_path / "out"), "--json", "--no-plot")
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["failed"] == [], outcome["failed"]
    run = Path(outcome["run_dir"])
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["backend"] == "ssh" and manifest["datapaths"] == ["host"]
    assert manifest["repeats"]["test-1/rep-1"]["placement"] == {"pub": "h2", "sub0": "h3"}
    assert {h["name"] for h in manifest["cluster"]["hosts"]} == {"h2", "h3"}
    # each host's fingerprint, read over its SSH connection: the host's own namespace
    prints = manifest["fingerprints"]["host"]
    assert set(prints) == {"h2", "h3"}
    for name, fp in prints.items():
        assert fp["kernel"] == os.uname().release and fp["cni"]["name"] == "host"
        assert fp["interfaces"] and all(link["mtu"] >= 1280 for link in
                                        fp["interfaces"].values()), (name, fp)
        assert "net.ipv4.tcp_rmem" in fp["sysctls"]
    # DDS told the interface holding each host's inventory address, as the kernel names it
    for host in manifest["cluster"]["hosts"]:
        i = int(host["name"][1:])
        owner = subprocess.run(["ip", "-n", bare.ns(i), "-o", "addr", "show", "to",
                                host["address"]], capture_output=True, text=True).stdout
        assert host["interface"] and owner.split()[1] == host["interface"], (host, owner)
    config = (run / "test-1" / "rep-1" / "pub.cyclonedds.xml").read_text()
    h2 = next(h for h in manifest["cluster"]["hosts"] if h["name"] == "h2")
    assert f'<NetworkInterface name="{h2["interface"]}"' in config, config
    df = pd.read_csv(run / "results.csv")
    thr = df[(df.kind == "summary") & (df.metric == "throughput_mbps") & (df.role == "sub0")]
    assert len(thr) == 1 and thr.value.iloc[0] > 1  # real samples across the hosts' LAN
    assert "participant" in (run / "test-1" / "rep-1" / "pub.log").read_text()
    assert (run / "test-1" / "rep-1" / "usage.json").exists()
    assert not list(Path("/tmp").glob(manifest["cluster"]["workdir"].split("/")[-1]))
    assert _ddsperf_in(bare, 2) == [] and _ddsperf_in(bare, 3) == []


@pytest.mark.ssh
@requires_hosts
@needs("vm-arm64", "k8s-arm64", "mqtt-arm64", "zenoh-arm64", "perftest-arm64", *ENGINES)
def test_the_64_bit_arm_machine_is_checked_and_measured_as_a_bare_host(bare, tmp_path):
    """The study's 64-bit Pi as a bare host: `k8sdds vm`'s arm64 machine (qemu-system-aarch64,
    an emulated Cortex-A53 running Debian's arm64 system, no node part) on the hosts' LAN.
    `cluster install` puts the node parts on it (Debian's arm64 packages by its dpkg, k8sdds'
    arm64 builds), `cluster check` finds aarch64 and them, `cluster engines` gives it the
    arm64 builds, and a run of the ssh backend measures from h2 (amd64) to it with Debian's
    arm64 ddsperf and with RTI Perftest built on Cyclone DDS for arm64 (`make perftest`). Its
    speed is an emulator's: the test asserts that data crossed, not a rate. The 32-bit
    machine takes the same path in tests/test_pi_tutorial.py, to a cluster."""
    import pandas as pd

    reason = vm_support.missing("arm64")
    if reason:
        pytest.skip(f"no 64-bit ARM test host: {reason}")
    with vm_support.arm_host(bare, 4, "h4", "arm64") as pi:
        known = tmp_path / "known_hosts"
        known.write_text(bare.known_hosts((1, 2)).read_text() + pi.known_host)
        invf = tmp_path / "inventory.yaml"
        invf.write_text(yaml.safe_dump({
            "known_hosts": str(known),
            "defaults": {"user": "root", "key": str(bare.directory / "id_ed25519")},
            "hosts": [{"name": "h1", "address": bare.address(1), "arch": "amd64",
                       "role": "control-plane", "engine_bin": str(tmp_path / "bin-h1")},
                      {"name": "h2", "address": bare.address(2), "arch": "amd64",
                       "engine_bin": str(tmp_path / "bin-h2")},
                      {"name": "h4", "address": pi.spec.ip, "arch": "arm64",
                       "engine_bin": "/opt/k8sdds/bin"}]}))
        # the node parts onto the 64-bit Pi only (h1 and h2 share this machine's /usr)
        started = time.monotonic()
        done = _cli("cluster", "install", "--inventory", str(invf), "--host", "h4",
                    "--log-dir", str(tmp_path / "logs"), timeout=1200)  # an emulated A53
        assert done.returncode == 0, done.stdout + done.stderr
        said = " ".join(done.stdout.split())
        assert "install: 1/1 hosts" in said and "kubelet, kubeadm v1.34.3 in /usr/local/bin" \
            in said and "containerd 1.6.20~ds1-1+deb12u3" in said, said
        print(f"cluster install on the arm64 machine: {time.monotonic() - started:.0f} s; "
              + said)
        done = _cli("cluster", "check", "--inventory", str(invf), "--log-dir",
                    str(tmp_path / "logs"))
        rows = ss.check_rows(done.stdout)
        for check, found in (("architecture", "aarch64"), ("kubeadm", "v1.34.3"),
                             ("kubelet", "v1.34.3"), ("container runtime", "containerd"),
                             ("CNI plugins", "bridge"), ("kubelet service", "enabled"),
                             ("containerd cgroups", "SystemdCgroup = true"),
                             ("swap off", "off"), ("br_netfilter", "= 1")):
            assert "pass" in rows[("h4", check)] and found in rows[("h4", check)], (
                rows.get(("h4", check)), done.stdout[-2000:])
        copied = _cli("cluster", "engines", "--inventory", str(invf), "--log-dir",
                      str(tmp_path / "logs"))
        assert copied.returncode == 0 and "engines: 3/3 hosts" in copied.stdout, \
            copied.stdout + copied.stderr
        assert "perftest_cpp (arm64) in /opt/k8sdds/bin" in copied.stdout.replace(
            "k8sdds-mqtt, ", ""), copied.stdout
        sch = tmp_path / "s.csv"
        sch.write_text("engine,dataLen,multicast,numSubscribers,bestEffort,batchSize\n"
                       "ddsperf,1024,false,1,false,0\n"
                       "rtiperftest,1024,false,1,false,0\n")
        done = _cli("run", "--backend", "ssh", "--inventory", str(invf), "--sch", str(sch),
                    "--duration", "4", "--out", str(tmp_path / "out"), "--json", "--no-plot")
        assert done.returncode == 0, done.stderr[-3000:]
        outcome = json.loads(done.stdout)
        assert outcome["failed"] == [], outcome["failed"]
        run = Path(outcome["run_dir"])
        manifest = json.loads((run / "manifest.json").read_text())
        for test in (1, 2):
            assert manifest["repeats"][f"test-{test}/rep-1"]["placement"] == {
                "pub": "h2", "sub0": "h4"}
        df = pd.read_csv(run / "results.csv")
        summary = df[df.kind == "summary"]
        assert set(summary[summary.role == "sub0"].arch) == {"arm64"}
        assert set(summary[summary.role == "pub"].arch) == {"amd64"}
        for test, engine in ((1, "ddsperf"), (2, "rtiperftest")):
            sub = summary[(summary.role == "sub0") & (summary.test == test)]
            received = sub[sub.metric == "received"].value
            assert len(received) == 1 and received.iloc[0] > 0, (engine, sub)
            assert (sub[sub.metric == "lost"].value == 0).all(), (engine, sub)
            thr = sub[sub.metric == "throughput_mbps"].value.iloc[0]
            print(f"{engine}, amd64 to the arm64 machine, 1 KiB: {thr:.1f} Mb/s, "
                  f"{received.iloc[0]:.0f} samples")
        # Perftest's own banner on the Pi: the arm64 build, on Cyclone DDS
        assert (run / "test-2" / "rep-1" / "sub0.log").read_text().startswith(
            "RTI Perftest 4.3.0 (Eclipse Cyclone DDS")
        assert "0xd03" in vm_support.ssh(bare, pi, known, "cat /proc/cpuinfo").stdout  # A53


@pytest.mark.ssh
@requires_hosts
@needs("mqtt-amd64", "zenoh-amd64")
def test_ssh_backend_runs_zenoh_and_mqtt_from_the_hosts_engine_bin(bare, tmp_path):
    import json

    import pandas as pd

    from k8sdds.engines.base import engine_bin
    from k8sdds.engines.mqtt import Mqtt
    from k8sdds.engines.rtiperftest import RtiPerftest
    from k8sdds.engines.zenoh import Zenoh

    for engine in (Mqtt(), Zenoh(), RtiPerftest()):  # make test installs mosquitto and
        # builds the engines (Perftest on Cyclone DDS: make perftest)
        assert engine.unavailable() is None, engine.unavailable()
    # the test hosts are this machine's namespaces: amd64, as the engines built here are
    # (an armhf host would have the zenoh row refused: tests/test_engine_mqtt.py)
    # air-gapped hosts: each gets the engines built here from `cluster engines`, into an
    # engine_bin of its own, and the run finds them there only
    invf = bare.inventory((1, 2, 3), bare.known_hosts((1, 2, 3)), arch="amd64")
    said = yaml.safe_load(invf.read_text())
    for host in said["hosts"]:
        host["engine_bin"] = str(tmp_path / f"bin-{host['name']}")
    invf = tmp_path / "inventory.yaml"
    invf.write_text(yaml.safe_dump(said))
    # the hosts have ddsperf and mosquitto (this machine's): by default they keep them
    kept = _cli("cluster", "engines", "--inventory", str(invf), "--log-dir",
                str(tmp_path / "logs"))
    assert kept.returncode == 0 and "engines: 3/3 hosts" in kept.stdout, kept.stdout + \
        kept.stderr
    assert "ddsperf, mosquitto: the host's own (/usr/bin/ddsperf, /usr/sbin/mosquitto)" in \
        kept.stdout
    assert not (tmp_path / "bin-h2" / "ddsperf").exists()
    # as an air-gapped host would have them: Debian's, with their libraries, from k8sdds
    done = _cli("cluster", "engines", "--inventory", str(invf), "--log-dir",
                str(tmp_path / "logs"), "--debian", "always")
    assert done.returncode == 0 and "engines: 3/3 hosts" in done.stdout, done.stdout + \
        done.stderr
    assert done.stdout.count("ddsperf, mosquitto of Debian bookworm (amd64, with their "
                             "libraries)") == 3, done.stdout
    import hashlib

    for host in ("h1", "h2", "h3"):
        for name in ("k8sdds-mqtt", "k8sdds-zenoh", "perftest_cpp", "k8sdds-discovery"):
            copy, built = tmp_path / f"bin-{host}" / name, engine_bin() / name
            assert copy.stat().st_mode & 0o777 == 0o755
            assert hashlib.sha256(copy.read_bytes()).digest() == hashlib.sha256(
                built.read_bytes()).digest()
    # the copy runs with its own libraries: Cyclone's from the copy, not this machine's
    bundle = tmp_path / "bin-h2" / "debian-amd64"
    loads = subprocess.run([str(tmp_path / "bin-h2" / "ddsperf"), "help"],
                           capture_output=True, text=True, env={"LD_DEBUG": "files"})
    assert f"needed by {bundle}/lib/libddsc.so.0debian" in loads.stderr, loads.stderr
    # Perftest on Cyclone finds that copy too (its RPATH: $ORIGIN/debian-ARCH/lib), so a
    # host without Cyclone DDS runs it
    loads = subprocess.run([str(tmp_path / "bin-h2" / "perftest_cpp"), "-help"],
                           capture_output=True, text=True, env={"LD_DEBUG": "files"})
    assert f"needed by {bundle}/lib/libddsc.so.0debian" in loads.stderr, loads.stderr[-3000:]
    version = subprocess.run([str(tmp_path / "bin-h2" / "mosquitto"), "-h"],
                             capture_output=True, text=True, env={"LD_DEBUG": "files"})
    assert "mosquitto version 2.0.11" in version.stdout  # bookworm's (Debian 12)
    assert f"needed by {bundle}/lib/libwrap.so.0" in version.stderr
    sch = tmp_path / "s.csv"
    sch.write_text("engine,transport,topology,dataLen,multicast,numSubscribers,bestEffort,"
                   "batchSize\n"
                   "zenoh,tcp,routed,1024,false,1,false,0\n"
                   "mqtt,tcp,,1024,false,1,false,0\n"
                   "ddsperf,udp,,1024,false,1,false,0\n"
                   "rtiperftest,udp,,1024,false,1,false,0\n"
                   "dds-discovery,udp,,64,false,1,false,0\n")
    env = {**os.environ, "PATH": "/usr/bin:/bin"}  # the engines only through engine_bin
    done = subprocess.run([sys.executable, "-m", "k8sdds", "run", "--backend", "ssh",
                           "--inventory", str(invf), "--sch", str(sch), "--duration", "3",
                           "--out", str(tmp_path / "out"), "--json", "--no-plot"],
                          capture_output=True, text=True, timeout=300, env={
                              **env, "PYTHONPATH": str(Path(__file__).parent.parent)})
    assert done.returncode == 0, done.stderr
    outcome = json.loads(done.stdout)
    assert outcome["failed"] == [], outcome["failed"]
    # the same hosts said to be Pi 3s (armhf): the zenoh row is refused before any host
    pis = bare.inventory((1, 2, 3), bare.known_hosts((1, 2, 3)),
                         engine_bin=str(engine_bin()))
    refused = subprocess.run([sys.executable, "-m", "k8sdds", "run", "--backend", "ssh",
                              "--inventory", str(pis), "--sch", str(sch), "--out",
                              str(tmp_path / "pis")], capture_output=True, text=True,
                             timeout=120,
                             env={**env, "PYTHONPATH": str(Path(__file__).parent.parent)})
    assert refused.returncode == 2 and "h2 (armhf), h3 (armhf)" in refused.stderr, refused.stderr
    assert not (tmp_path / "pis").exists()
    run = Path(outcome["run_dir"])
    manifest = json.loads((run / "manifest.json").read_text())
    # two workers: the router and the broker share the publisher's host
    assert manifest["repeats"]["test-1/rep-1"]["placement"] == {
        "pub": "h2", "router": "h2", "sub0": "h3"}
    assert manifest["repeats"]["test-2/rep-1"]["placement"] == {
        "pub": "h2", "broker": "h2", "sub0": "h3"}
    df = pd.read_csv(run / "results.csv")
    s = df[(df.kind == "summary") & (df.role == "sub0")].set_index(["test", "metric"]).value
    for test in (1, 2, 3, 4):  # real messages across the hosts' LAN, none lost
        assert s[(test, "throughput_mbps")] > 1 and s[(test, "lost")] == 0
    assert set(df.topology.fillna("")) == {"routed", ""}
    # Perftest on Cyclone, the copy in the hosts' engine_bin: its own banner
    assert manifest["repeats"]["test-4/rep-1"]["argv"]["sub0"][0] == "perftest_cpp"
    assert (run / "test-4" / "rep-1" / "sub0.log").read_text().startswith(
        "RTI Perftest 4.3.0 (Eclipse Cyclone DDS")
    # DDS discovery on the bare hosts (k8sdds-discovery from their engine_bin, by multicast
    # on their LAN), and each host's uplink sampled over SSH
    assert manifest["repeats"]["test-5/rep-1"]["placement"] == {"p0": "h2", "p1": "h3"}
    found = df[(df.test == 5) & (df.kind == "summary")].set_index(["role", "metric"]).value
    assert 0 < found[("p0", "discovery_s")] < 5 and 0 < found[("p1", "discovery_s")] < 5
    # multicast probed between the hosts (their engine_bin's k8sdds-discovery probe): their
    # LAN carries it from h2 to h3
    probe = manifest["fingerprints"]["host"]["h2"]["multicast"]
    assert probe == {"from": "h2", "between": "nodes", "group": "239.255.0.1:7400",
                     "arrived": {"h3": True}}, probe
    for host in ("h2", "h3"):
        rx = df[(df.test == 5) & (df.node == host) & (df.metric == "node_rx_bytes")]
        assert len(rx) > 20 and rx.value.iloc[-1] > rx.value.iloc[0]


@pytest.mark.ssh
@requires_hosts
def test_ssh_backend_interrupted_stops_the_remote_processes(bare, tmp_path):
    import signal
    import time

    invf = bare.inventory((1, 2, 3), bare.known_hosts((1, 2, 3)))
    sch = tmp_path / "s.csv"
    sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize\n"
                   "1024,false,1,false,0\n")
    proc = subprocess.Popen([sys.executable, "-m", "k8sdds", "run", "--backend", "ssh",
                             "--inventory", str(invf), "--sch", str(sch), "--duration", "60",
                             "--out", str(tmp_path / "out"), "--quiet"],
                            env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)},
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while not (_ddsperf_in(bare, 2) and _ddsperf_in(bare, 3)):
            assert time.monotonic() < deadline, "ddsperf did not start on the hosts"
            time.sleep(0.1)  # processes in other namespaces: nothing to wait on but /proc
        with busy_machine():
            took, err = stop_timed(proc, signal.SIGINT)
    finally:
        proc.kill()
    assert proc.returncode == 130, err
    assert took < STOP_BOUND_S, f"the run took {took:.1f} s to end after SIGINT"
    assert _ddsperf_in(bare, 2) == [] and _ddsperf_in(bare, 3) == []


def _containerd(hosts, i: int) -> tuple[subprocess.Popen, Path]:
    """A real containerd in host i's namespace (its own root, state and socket)."""
    d = hosts.directory / f"containerd{i}"
    d.mkdir(exist_ok=True)
    sock = d / "containerd.sock"
    (d / "config.toml").write_text(
        f'version = 2\nroot = "{d / "root"}"\nstate = "{d / "state"}"\n'
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
        f'[grpc]\n  address = "{sock}"\n[ttrpc]\n  address = "{d / "ttrpc.sock"}"\n'
        f'[plugins."io.containerd.internal.v1.opt"]\n  path = "{d / "opt"}"\n')
    proc = subprocess.Popen(["ip", "netns", "exec", hosts.ns(i), "containerd", "--config",
                             str(d / "config.toml")], stdout=subprocess.DEVNULL,
                            stderr=open(d / "log", "wb"))
    deadline = time.monotonic() + 20
    while not sock.exists():
        assert proc.poll() is None and time.monotonic() < deadline, (d / "log").read_text()
        time.sleep(0.05)  # a socket appearing: nothing else to wait on
    return proc, sock


@pytest.mark.ssh
@requires_hosts
@pytest.mark.skipif(shutil.which("containerd") is None, reason="needs containerd (make test)")
def test_load_image_puts_it_into_each_hosts_containerd_over_ssh(hosts, tmp_path):
    from k8sdds.images.build import busybox_image

    tag = f"localhost/k8sdds/air-gapped:{os.getpid()}"
    archive = busybox_image(tag, {}, [], "air-gapped", cache=tmp_path)
    daemons = [_containerd(hosts, i) for i in (1, 2)]
    try:
        # both containerds listen on the same path inside their hosts: h1's is given
        invf = hosts.inventory((1, 2), hosts.known_hosts((1, 2)))
        done = _cli("cluster", "load-image", "--inventory", str(invf), "--archive",
                    str(archive), "--containerd-address", str(daemons[0][1]), "--log-dir",
                    str(tmp_path / "logs"))
        assert done.returncode == 1  # h2 is an arm host of the inventory: refused by name
        text = " ".join(done.stdout.split() + done.stderr.split())
        assert "h2 is arm; the image is amd64" in text, text
        assert "load-image: 1/2 hosts" in text
        listed = subprocess.run(["ctr", "--address", str(daemons[0][1]), "-n", "k8s.io",
                                 "images", "ls", "-q"], capture_output=True, text=True,
                                check=True).stdout.split()
        assert tag in listed
        log = (tmp_path / "logs" / "h1.log").read_text()
        assert "$ sha256sum /tmp/k8sdds-image." in log and "images import" in log
        assert "$ rm -f /tmp/k8sdds-image." in log  # the copy is removed
        assert not list(Path("/tmp").glob("k8sdds-image.*"))  # (the hosts share this /tmp)
    finally:
        for proc, _ in daemons:
            proc.terminate()
            proc.wait(timeout=10)


@pytest.mark.ssh
@requires_hosts
@pytest.mark.skipif(shutil.which("containerd") is None, reason="needs containerd (make test)")
def test_load_image_gives_each_host_its_platform_of_a_multi_arch_archive(hosts, tmp_path):
    """One archive, one tag (an OCI image index of amd64 and arm): h1 (amd64) and h2 (arm)
    both get it, each importing its own platform's image."""
    from k8sdds.images.build import busybox_image
    from k8sdds.images.index import combine

    tag = f"localhost/k8sdds/hybrid:{os.getpid()}"
    parts = [busybox_image(tag, {}, [], "hybrid", cache=tmp_path, arch=arch)
             for arch in ("amd64", "armhf")]
    archive = combine(parts, tmp_path / "hybrid.tar")
    with tarfile.open(archive) as tf:
        [entry] = json.load(tf.extractfile("index.json"))["manifests"]
        index = json.load(tf.extractfile("blobs/sha256/" + entry["digest"][7:]))
    digest = {m["platform"]["architecture"]: m["digest"] for m in index["manifests"]}
    daemons = [_containerd(hosts, i) for i in (1, 2)]
    try:
        # the hosts share a file system: each host's containerd is given in an inventory of
        # its own (the same file, the same tag, for h1 amd64 and h2 arm)
        known = hosts.known_hosts((1, 2))
        for i, arch, platform in ((1, "amd64", "linux/amd64"), (2, "arm", "linux/arm/v7")):
            invf = hosts.inventory((i,), known, arch)
            sock = str(daemons[i - 1][1])
            done = _cli("cluster", "load-image", "--inventory", str(invf), "--archive",
                        str(archive), "--containerd-address", sock, "--log-dir",
                        str(tmp_path / "logs"))
            text = " ".join(done.stdout.split() + done.stderr.split())
            assert done.returncode == 0, text
            assert "(amd64, arm)" in text and "load-image: 1/1 hosts" in text
            log = (tmp_path / "logs" / f"h{i}.log").read_text()
            assert f"images import --platform {platform} /tmp/k8sdds-image." in log, log
            # the archive cut to the host's platform: less than the whole was sent
            [sent] = re.findall(r"sftp put \S+/(\w+)\.tar \S+\n\[([0-9.]+) MB in", log)[-1:]
            assert sent[0] == arch and float(sent[1]) * 1e6 < archive.stat().st_size * 0.9, (
                sent, archive.stat().st_size)
            ctr = ["ctr", "--address", sock, "-n", "k8s.io"]
            assert tag in subprocess.run([*ctr, "images", "ls", "-q"], capture_output=True,
                                         text=True, check=True).stdout.split()
            collect_garbage(ctr, tag)  # what no image refers to is gone
            content = subprocess.run([*ctr, "content", "ls", "-q"], capture_output=True,
                                     text=True, check=True).stdout.split()
            other = "arm" if arch == "amd64" else "amd64"
            # its own platform's image, not the other's
            assert digest[arch] in content and digest[other] not in content
    finally:
        for proc, _ in daemons:
            proc.terminate()
            proc.wait(timeout=10)


def test_load_image_refuses_a_file_that_is_not_an_image(tmp_path):
    bogus = tmp_path / "engines.tar"
    bogus.write_text("not a tar")
    invf = tmp_path / "inv.yaml"
    invf.write_text("hosts:\n  - {name: a, address: 10.0.0.1, role: control-plane, user: pi}\n")
    done = _cli("cluster", "load-image", "--inventory", str(invf), "--archive", str(bogus),
                "--known-hosts", str(tmp_path / "kh"))
    assert done.returncode == 2 and "not an image archive" in done.stderr
    assert "Traceback" not in done.stderr
