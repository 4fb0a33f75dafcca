"""The emulated Pi running the Pi's own program (profile rpi3b-armhf), on the real emulated
cluster: Debian's armhf ddsperf under qemu-user, inside the node's namespace and cgroup,
discovering its peers by unicast, measured end to end."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest

from k8sdds.deployment.emulated import EmulatedBackend
from k8sdds.deployment.options import EmulatedOptions
from k8sdds.engines.base import Command
from k8sdds.images import board_root
from k8sdds.model import Test
from k8sdds.testbed import hopcost
from k8sdds.testbed.profiles import resolve

from .emulated_support import cli, namespaces, requires_namespaces

pytestmark = [pytest.mark.emulated, requires_namespaces(),
              pytest.mark.skipif(shutil.which("qemu-arm-static") is None,
                                 reason="needs qemu-arm-static (make test installs it)")]

EM_ARM = 40  # the ELF header's e_machine for 32-bit ARM (System V ABI, ARM supplement)


def _elf(path: Path) -> tuple[int, int]:
    """(EI_CLASS, e_machine) of an ELF file: 1 is 32-bit; little-endian here."""
    head = path.read_bytes()[:20]
    assert head[:4] == b"\x7fELF", path
    return head[4], int.from_bytes(head[18:20], "little")


@pytest.fixture(scope="module")
def state(tmp_path_factory):
    old = os.environ.get("K8SDDS_STATE_DIR")
    os.environ["K8SDDS_STATE_DIR"] = str(tmp_path_factory.mktemp("state"))
    yield os.environ["K8SDDS_STATE_DIR"]
    if old is None:
        os.environ.pop("K8SDDS_STATE_DIR")
    else:
        os.environ["K8SDDS_STATE_DIR"] = old


def test_the_node_runs_the_board_s_armhf_build_under_qemu_in_its_namespace_and_cgroup(state):
    name = "kdu" + str(os.getpid() % 1000)
    backend = EmulatedBackend(EmulatedOptions(testbed=name, nodes=3, profile="rpi3b-armhf",
                                              no_calibrate=True))
    backend.up()
    try:
        backend.use_datapath("host")
        test = Test(row=0, line=2, data_len=1024, multicast=False, num_subscribers=1,
                    best_effort=False, batch_size=0, datapath="host")
        placement = backend.deploy(test, ["pub", "sub0"])
        pub = placement["pub"]
        # unicast only: qemu-user refuses the multicast socket option (userspace.NO_MULTICAST)
        unicast = "<General><AllowMulticast>false</AllowMulticast></General>"
        handle = backend.start(pub, Command(argv=("ddsperf", "-D", "20", "sub"),
                                            env={"CYCLONEDDS_URI": unicast}),
                               Path(state) / "sub.log")
        time.sleep(1.0)
        pid = handle.proc.pid
        exe = os.readlink(f"/proc/{pid}/exe")
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        group = Path(f"/proc/{pid}/cgroup").read_text()
        node_ns = os.stat(f"/run/netns/{pub.where}").st_ino
        proc_ns = os.stat(f"/proc/{pid}/ns/net").st_ino
        backend.stop([handle])
        backend.teardown()
        crossings = _hops_on_a_pod_s_path(backend)
    finally:
        backend.down()
    assert Path(exe).name == "qemu-arm-static"
    program = Path(args[3].decode())
    assert program == board_root.path("armhf") / "usr/bin/ddsperf"
    assert _elf(program) == (1, EM_ARM)  # a 32-bit ARM program, not this machine's
    assert proc_ns == node_ns  # in the node's network namespace
    assert name in group  # under the node's CPU budget
    assert namespaces(name) == []
    # the kernel's share of a pod path: 5 pings between pods, each echo and reply a VXLAN
    # packet out of one node's uplink and into the other's, each charged there once
    assert crossings["pods"] == 5 * 2 * 2, crossings
    assert crossings["host"] == 0, crossings  # a node's own traffic is not charged


def _hops_on_a_pod_s_path(backend) -> dict[str, int]:
    """Packets charged with the kernel's share at the Pi's pace, over flannel-vxlan, on the
    workers' uplinks: a pod's packets, then the nodes' own (host) packets."""
    tb = backend.testbed
    workers = tb.workers()
    calibrated = resolve("rpi3b-armhf").hop_rules  # the board's calibration's, per path
    assert calibrated["flannel-vxlan"] > 0
    backend.use_datapath("flannel-vxlan")
    assert [hopcost.rules_in(n.ns) for n in workers] == \
        [calibrated["flannel-vxlan"]] * len(workers)
    assert hopcost.rules_in(tb.node("node0").ns) == 0  # the control plane is cloud
    backend.use_datapath("host")  # the host network: no charge, the count kept
    assert [hopcost.rules_in(n.ns) for n in workers] == [0] * len(workers)
    backend.use_datapath("flannel-vxlan")
    test = Test(row=0, line=2, data_len=1024, multicast=False, num_subscribers=1,
                best_effort=False, batch_size=0, datapath="flannel-vxlan")
    pods = backend.deploy(test, ["pub", "sub0"])
    a, b = pods["pub"], pods["sub0"]

    def ping(ns: str, address: str) -> None:
        subprocess.run(["ip", "netns", "exec", ns, "ping", "-c", "5", "-i", "0.2", "-W", "1",
                        address], check=True, capture_output=True)

    def counted() -> int:
        return sum(hopcost.crossings(n.ns) for n in workers)

    before = counted()
    ping(a.where, b.address)
    out = {"pods": counted() - before}
    before = counted()
    ping(workers[0].ns, workers[1].address)
    out["host"] = counted() - before
    return out


def test_a_run_on_the_pi_s_own_program_measures_with_peers_and_refuses_multicast(
        state, tmp_path):
    env = {**os.environ, "K8SDDS_STATE_DIR": state}
    sch = tmp_path / "pi.csv"
    sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize\n"
                   "1024,false,1,false,0\n")
    name = "kdv" + str(os.getpid() % 1000)
    # weave-encrypted: the board's own wireguard-go under qemu-user carries the pods' VXLAN
    done = cli("run", "--sch", str(sch), "--datapath", "host,flannel-hostgw,weave-encrypted",
               "--profile",
               "rpi3b-armhf", "--testbed", name, "--nodes", "3", "--no-calibrate",
               "--duration", "4", "--out", str(tmp_path / "out"), "--no-plot", "--json",
               env=env)
    assert done.returncode == 0, done.stderr
    run_dir = Path(json.loads(done.stdout)["run_dir"])
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert {e["discovery"] for e in manifest["repeats"].values()} == {"peers"}
    rows = pd.read_csv(run_dir / "results.csv")
    got = rows[(rows.kind == "summary") & (rows.metric == "throughput_mbps")]
    assert sorted(got.datapath) == ["flannel-hostgw", "host", "weave-encrypted"]
    assert (got.value > 1).all(), got  # Mbit/s of 1 KiB samples through the ARM program
    assert set(got.arch) == {"arm"}  # the architecture the node's programs ran as
    assert namespaces(name) == []

    sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize\n"
                   "1024,true,1,false,0\n")
    refused = cli("run", "--sch", str(sch), "--datapath", "host", "--profile", "rpi3b-armhf",
                  "--testbed", name, "--nodes", "3", "--no-calibrate", "--out",
                  str(tmp_path / "out"), env=env)
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "column 'multicast'" in refused.stderr and "IP_MULTICAST_IF" in refused.stderr
