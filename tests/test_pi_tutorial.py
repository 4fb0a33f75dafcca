"""docs/tutorials/pi-cluster.md, read from the page and run as written on the study's hybrid
cluster: two amd64 test hosts that are real kubeadm nodes (tests/kubeadm_support.py) and the
study's 32-bit Pi 3B, the armhf ARM machine (tests/vm_support.py: an emulated Cortex-A7
booting Debian's armhf system, with no Kubernetes part until the page's `cluster install`).
Nodes of its own, apart from tests/test_kubeadm_real.py's, so that the two files run side by
side. The 64-bit machine gets its node parts in
tests/test_cluster_ssh.py::test_the_64_bit_arm_machine_is_checked_and_measured_as_a_bare_host:
a second tutorial on it took 31 minutes of CI's wall clock (2026-11-28)."""

from __future__ import annotations

import contextlib
import difflib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from . import kubeadm_support as ks
from . import vm_support
from .builds import needs, wait
from .ssh_support import check_rows

# the tutorial starts with these, and waits for Perftest's builds at the page's `cluster
# engines` (its image of the engines carries those built by then: none of its runs is
# Zenoh's or MQTT's)
pytestmark = [pytest.mark.kubelet, pytest.mark.ssh,
              needs("k8s-amd64", "k8s-armhf", "vm-armhf", why=ks.missing)]
PREFIX = f"kkt{os.getpid() % 1000}"  # the test hosts' namespaces and links


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    with ks.node_set(tmp_path_factory.mktemp("tutorial"), PREFIX, net=242) as made:
        yield made


TUTORIAL = Path(__file__).parent.parent / "docs" / "tutorials" / "pi-cluster.md"


def _page_commands() -> tuple[dict, list[tuple[str, ...]]]:
    """The tutorial's inventory (its YAML block) and its command lines, in page order."""
    import re

    from .test_docs_commands import blocks

    text = TUTORIAL.read_text()
    [inventory] = re.findall(r"^```yaml\n(.*?)^```", text, flags=re.S | re.M)
    commands = [words for block in blocks() if block.page == TUTORIAL
                for words in block.commands]
    return yaml.safe_load(inventory), commands


@dataclass(frozen=True)
class Board:
    """The page's Pi the ARM machine stands for, and what it reports."""

    arch: str  # Debian's: the machine's board (k8sdds vm --arch)
    page_host: int  # its place in the page's inventory: 1 (pi1, arm) or 2 (pi2, arm64)
    inventory: str  # the inventory's arch
    machine: str  # uname -m
    name: str  # its host name, at the test hosts' address of that number
    index: int


ARMHF = Board("armhf", 1, "arm", "armv7l", "h5", 5)


@contextlib.contextmanager
def arm_machine(nodes, board: Board):
    """The ARM machine on the test hosts' bridge."""
    reason = vm_support.missing(board.arch)
    if reason:
        pytest.skip(f"no {board.arch} test host: {reason}")
    with vm_support.arm_host(nodes, board.index, board.name, board.arch) as machine:
        yield machine


def test_the_pi_tutorial_runs_as_written_on_the_test_hosts(nodes, tmp_path):
    """The page's 32-bit Pi (pi1) is the armhf machine; see `tutorial`."""
    with arm_machine(nodes, ARMHF) as machine:
        tutorial(nodes, machine, ARMHF, tmp_path)


def tutorial(nodes, arm, board: Board, tmp_path: Path) -> None:
    """Every command of docs/tutorials/pi-cluster.md, read from the page, in its order, in a
    folder of its own (the repository's schedules and Dockerfile reachable as from a clone).
    What differs, and why:
    - the inventory's names, addresses, key, known_hosts and user are the test hosts': the
      control plane is h1, an amd64 test host; one of the page's Pis is the ARM machine
      (`board`: the 32-bit pi1), the other the amd64 test host h2; the image is still built
      for the page's three architectures and each host takes its own;
    - init and join get the test nodes' kubeadm configuration and ignore kubeadm's
      preflight (cgroup v1, swap: tests/kubeadm_support.py);
    - `cluster tune` is not run: its keys include host-wide sysctls (net.core.rmem_max) that
      the test hosts share with this machine; tests/test_cluster_ssh.py runs it on
      per-namespace keys;
    - every run gets one repeat, not the page's three: each repeat of a pod pair on the
      emulated ARM machine takes about 25 s, and three would add about 10 minutes
      (repeats are the runner's, tested elsewhere);
    - a kubernetes run's pods get `--pod-timeout 900`, not the default 120 s: on a 2-core
      machine half as fast, beside the rest of the suite, a pod on the emulated Cortex-A7
      (qemu's TCG, far slower than a Pi) sat in ContainerCreating past 120 s once (CI,
      2026-12-03); the bound is a wait, and `--pod-timeout`'s failure is tested elsewhere;
    - RUN_A and RUN_B are the two kubernetes runs;
    - one command more, after the page's ssh run: RTI Perftest built on Cyclone DDS for the
      board (`make perftest`, which `cluster engines` copied) measures from it over ssh, as
      docs/how-to/rti-perftest.md says it does.
    Each host starts bare (no kubelet, kubeadm, kubectl, unit or CNI plugin; the ARM machine
    no containerd, runc or plugin package either) and is as it was after the page's last
    command (`reset --purge`)."""
    import pandas as pd
    from kubernetes import client, config

    started = time.monotonic()
    said, commands = _page_commands()
    hosts = said["hosts"]
    assert [h["arch"] for h in hosts] == ["amd64", "arm", "arm64"]  # the page's hybrid
    known = nodes.directory / "known_hosts-tutorial"
    known.write_text(nodes.known_hosts((1, 2)).read_text() + arm.known_host)
    said["known_hosts"] = str(known)
    said["defaults"].update(user="root", key=str(nodes.directory / "id_ed25519"))
    vm = board.name
    other = 3 - board.page_host  # the page's other Pi: the amd64 test host h2
    hosts[0].update(name="h1", address=nodes.address(1), arch="amd64", user="root")
    hosts[other].update(name="h2", address=nodes.address(2), arch="amd64", user="root")
    hosts[board.page_host].update(name=vm, address=arm.spec.ip, arch=board.inventory,
                                  user="root")
    work = tmp_path / "clone"
    work.mkdir()
    (work / "hosts.yaml").write_text(yaml.safe_dump(said))
    for shared in ("schedules", "docker"):
        (work / shared).symlink_to(Path(__file__).parent.parent / shared)
    extra = work / "node.yaml"
    extra.write_text(yaml.safe_dump_all(ks.NODE_CONFIG))
    test_only = ("--kubeadm-config", str(extra), "--ignore-preflight-errors", "all")
    before = {i: ks.snapshot(nodes, i) for i in (1, 2)}
    before[vm] = vm_support.ssh(nodes, arm, known, ks.SNAPSHOT).stdout
    assert "/usr/local/bin/kubelet" not in before[1] + before[vm]
    assert "/opt/cni/bin/bridge" not in before[1] + before[vm]
    assert "containerd install ok installed" not in before[vm]  # a fresh Pi: none
    runs: list[Path] = []
    steps = []
    for words in commands:
        words = list(words)
        assert words[0] == "k8sdds", words
        if words[1:3] == ["cluster", "tune"]:
            steps.append("tune (not run: host-wide sysctls)")
            continue
        if words[1:3] == ["cluster", "init"]:
            words += test_only
        elif words[1:3] == ["cluster", "join"]:
            words += test_only[2:]
        elif words[1] == "report":
            words = [str(runs[0]) if w == "logs/RUN_A" else str(runs[1]) if w == "logs/RUN_B"
                     else w for w in words]
        elif words[1] == "run":
            words[words.index("--repeats") + 1] = "1"
            words.append("--json")
            if "kubernetes" in words:
                words += ["--pod-timeout", "900"]
        elif words[1:3] == ["cluster", "engines"]:  # Perftest for both ends of its run
            waited = wait("perftest-amd64", "perftest-armhf")
            steps.append(f"waited {waited:.0f} s for Perftest's builds")
        step = time.monotonic()
        # a guard against a hang, not a speed: beside the rest of the suite one kubernetes
        # run here (6 repeats, the ARM node's pods seconds each to start) took over 900 s
        done = subprocess.run([sys.executable, "-m", "k8sdds", *map(str, words[1:])],
                              cwd=work, capture_output=True, text=True, timeout=1800,
                              env={**os.environ, "COLUMNS": "250",
                                   "PYTHONPATH": str(Path(__file__).parent.parent)})
        if words[1:3] == ["cluster", "install"]:
            said = " ".join(done.stdout.split())
            assert "install: 3/3 hosts" in said, said
            # the amd64 test hosts have this machine's packages; the ARM machine had none:
            # Debian's, installed by its own dpkg
            assert said.count("containerd, runc, CNI plugins: the host's own") == 2, said
            assert "containerd 1.6.20~ds1-1+deb12u3" in said, said
            print("cluster install:", done.stdout)  # each host's bytes and time
        if words[1:3] == ["cluster", "check"]:  # before any image is loaded: those fail
            failing = {key for key, line in check_rows(done.stdout).items() if "fail" in line}
            assert {check for _, check in failing} <= {"images"}, (failing, done.stdout)
            assert {host for host, _ in failing} == {h["name"] for h in hosts}
            rows = check_rows(done.stdout)
            for check in ("kubelet service", "CNI plugins", "containerd cgroups", "kubelet"):
                assert "pass" in rows[(vm, check)], rows[(vm, check)]
            assert "pass" in rows[(vm, "architecture")]  # the ARM machine's uname -m
            assert board.machine in rows[(vm, "architecture")], rows[(vm, "architecture")]
            assert "x86_64" in rows[("h1", "architecture")]
        else:
            assert done.returncode == 0, (words, done.stdout[-3000:], done.stderr[-3000:])
        steps.append(f"{' '.join(map(str, words[1:3]))}: {time.monotonic() - step:.0f} s")
        if words[1] == "run":
            outcome = json.loads(done.stdout)
            assert outcome["failed"] == [], outcome
            run = work / outcome["run_dir"]  # as the page's command gave --out: relative
            manifest = json.loads((run / "manifest.json").read_text())
            df = pd.read_csv(run / "results.csv")
            thr = df[(df.kind == "summary") & (df.metric == "throughput_mbps")]
            got = df[(df.kind == "summary") & (df.metric == "received")]
            # data crossed to every subscriber; no floor on the rate: the emulated ARM core,
            # beside the rest of the suite on 2 cores, read 0.74 Mb/s at 1 KiB (CI, 2026-11-26)
            assert len(thr) > 0 and (thr.value > 0).all() and (got.value > 0).all()
            assert len(got) == len(thr)
            steps.append("Mb/s " + ", ".join(f"{v:.1f}" for v in thr.value))
            if "kubernetes" in words:
                runs.append(run)
                assert manifest["datapaths"] == (["flannel-vxlan", "host"] if len(runs) == 1
                                                 else ["flannel-hostgw"])
                assert len(manifest["repeats"]) == 3 * len(manifest["datapaths"])
                placed = {n for e in manifest["repeats"].values() for n in
                          e["placement"].values()}
                assert placed <= {"h2", vm}  # the workers: pods stay off the control plane
                # the publisher on amd64 (the first worker by name), the subscriber (or pong)
                # on the ARM machine
                assert {(e["placement"]["pub"], e["placement"]["sub0"])
                        for e in manifest["repeats"].values()} == {("h2", vm)}
                arches = {n["name"]: n["arch"] for n in manifest["cluster"]["nodes"]}
                assert (arches["h2"], arches[vm]) == ("amd64", board.inventory)
                summary = df[df.kind == "summary"]
                assert set(summary[summary.role == "sub0"].arch) == {board.inventory}
                assert set(summary[summary.role == "pub"].arch) == {"amd64"}
                assert (summary[summary.metric == "lost"].value == 0).all()  # reliable
            else:  # the bare hosts, the baseline: from the inventory's first worker (pi1)
                assert manifest["backend"] == "ssh" and len(manifest["repeats"]) == 3
                summary = df[df.kind == "summary"]
                first, second = ((board.inventory, "amd64") if board.page_host == 1
                                 else ("amd64", board.inventory))
                assert set(summary[summary.role == "pub"].arch) == {first}
                assert set(summary[summary.role == "sub0"].arch) == {second}
                steps.append(_perftest_on_the_pi(work, board))
        if words[1:3] == ["cluster", "init"]:  # a fresh kubeconfig where the run looks
            api = config.new_client_from_config(str(work / "admin.conf"))
            assert client.VersionApi(api).get_code().git_version == "v1.34.3"
            api.close()
        if words[1:3] == ["cluster", "images"]:
            assert "images for kubeadm and flannel-vxlan: 3/3 hosts" in " ".join(
                done.stdout.split())
        if words[1:3] == ["cluster", "init"]:
            h1_log = (work / "logs" / "cluster" / "h1.log").read_text()
            assert "apply -f https://" not in h1_log  # the shipped manifest: no network
        if words[1:3] == ["cluster", "join"]:
            api = config.new_client_from_config(str(work / "admin.conf"))
            ready = {n.metadata.name for n in client.CoreV1Api(api).list_node().items}
            assert ready == {h["name"] for h in hosts}
            core = client.CoreV1Api(api)
            assert core.read_node(vm).status.node_info.architecture == board.inventory
            cni = core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={vm}").items
            assert any(p.metadata.name.startswith("kube-flannel") and
                       p.status.phase == "Running" for p in cni), [p.metadata.name for p in cni]
            api.close()
            if not runs:  # flannel-vxlan: its VXLAN device on the nodes
                assert "flannel.1" in nodes.in_node(2, "ip", "-o", "link").stdout
    assert (work / "report" / "report.html").is_file()
    page = (work / "report" / "report.html").read_text()
    assert "flannel-vxlan" in page and "flannel-hostgw" in page
    assert steps[-1].startswith("cluster reset")  # the page's last: --purge
    for i in (1, 2):
        after = ks.snapshot(nodes, i)
        assert after == before[i], f"h{i} differs after reset --purge:\n" + "\n".join(
            difflib.unified_diff(before[i].splitlines(), after.splitlines(), lineterm=""))
    after = vm_support.ssh(nodes, arm, known, ks.SNAPSHOT).stdout
    assert after == before[vm], "the ARM machine differs after reset --purge:\n" + "\n".join(
        difflib.unified_diff(before[vm].splitlines(), after.splitlines(), lineterm=""))
    print(f"the Pi tutorial ({board.arch}): {time.monotonic() - started:.0f} s; "
          + "; ".join(steps))


def _perftest_on_the_pi(work: Path, board: Board) -> str:
    """RTI Perftest on Cyclone DDS, the board's build, from the page's first worker (the
    board, as pi1) to the second over ssh: one 4 s test at 1 KiB."""
    import pandas as pd

    sch = work / "perftest.csv"
    sch.write_text("engine,dataLen,multicast,numSubscribers,bestEffort,batchSize\n"
                   "rtiperftest,1024,false,1,false,0\n")
    step = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "k8sdds", "run", "--backend", "ssh",
                           "--inventory", "hosts.yaml", "--sch", str(sch), "--duration", "4",
                           "--out", "perftest", "--json", "--no-plot"],
                          cwd=work, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(Path(__file__).parent.parent)})
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout)
    assert outcome["failed"] == [], outcome["failed"]
    run = work / outcome["run_dir"]
    assert board.page_host == 1  # the board publishes
    assert (run / "test-1" / "rep-1" / "pub.log").read_text().startswith(
        "RTI Perftest 4.3.0 (Eclipse Cyclone DDS")
    df = pd.read_csv(run / "results.csv")
    sub = df[(df.kind == "summary") & (df.role == "sub0")]
    received = sub[sub.metric == "received"].value
    assert len(received) == 1 and received.iloc[0] > 0, sub
    assert (sub[sub.metric == "lost"].value == 0).all(), sub
    assert set(df[(df.kind == "summary") & (df.role == "pub")].arch) == {board.inventory}
    thr = sub[sub.metric == "throughput_mbps"].value.iloc[0]
    return (f"rtiperftest from the {board.arch} machine, 1 KiB: {thr:.1f} Mb/s "
            f"({time.monotonic() - step:.0f} s)")
