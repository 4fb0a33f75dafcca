"""Edge profiles on the real emulated cluster: link rate (iperf3), CPU quota (cgroup), netem."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from k8sdds.deployment.base import Placement
from k8sdds.deployment.emulated import EmulatedBackend
from k8sdds.deployment.options import EmulatedOptions
from k8sdds.engines.base import Command
from k8sdds.testbed import capabilities, netns
from k8sdds.testbed.profiles import PROFILES, engine_env

from .emulated_support import cli, namespaces, requires_namespaces

pytestmark = [pytest.mark.emulated, pytest.mark.exclusive, requires_namespaces()]


@pytest.fixture(scope="module")
def rpi3b(tmp_path_factory):
    """A running 3-node testbed whose workers are Raspberry Pi 3B."""
    old = os.environ.get("K8SDDS_STATE_DIR")
    os.environ["K8SDDS_STATE_DIR"] = str(tmp_path_factory.mktemp("state"))
    backend = EmulatedBackend(EmulatedOptions(testbed="kdp" + str(os.getpid() % 1000),
                                              nodes=3, profile="rpi3b", no_calibrate=True))
    backend.up()
    backend.use_datapath("host")
    yield backend
    backend.down()
    assert namespaces(backend.testbed.spec.name) == []
    if old is None:
        os.environ.pop("K8SDDS_STATE_DIR")
    else:
        os.environ["K8SDDS_STATE_DIR"] = old


def _iperf3(tb, server, client, reverse: bool) -> float:
    srv = subprocess.Popen(netns.exec_argv(server.ns, ["iperf3", "-s", "-1"]),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.5)
        out = subprocess.run(netns.exec_argv(client.ns, ["iperf3", "-c", server.address, "-t",
                                                         "3", "-J", *(["-R"] if reverse
                                                                      else [])]),
                             capture_output=True, text=True, timeout=30)
        return json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"]
    finally:
        srv.kill()
        srv.wait()


@pytest.mark.skipif(shutil.which("iperf3") is None, reason="needs iperf3 (make test installs it)")
def test_rpi3b_link_carries_about_100_mbit_each_way(rpi3b):
    tb = rpi3b.testbed
    n1, n2 = tb.node("node1"), tb.node("node2")
    for reverse in (False, True):
        bps = _iperf3(tb, n2, n1, reverse)
        assert 90e6 <= bps <= 110e6, f"{bps / 1e6:.1f} Mbit/s (reverse={reverse})"
    assert tb.node("node0").profile == "cloud"  # the control plane keeps no limits


def test_link_bucket_is_the_resolved_profiles_on_both_ends(rpi3b):
    tb = rpi3b.testbed
    burst = tb.profiles()["rpi3b"]["burst_kb"]
    assert burst > 128  # BURST_PERIODS CPU periods at 100 Mbit/s, not the 10 ms floor
    for ns, dev in ((tb.node("node1").ns, "eth0"), (tb.switch, "n1")):
        qdiscs = subprocess.run(["tc", "-n", ns, "qdisc", "show", "dev", dev],
                                capture_output=True, text=True).stdout
        assert f"rate 100Mbit burst {burst}Kb" in qdiscs, qdiscs


def test_a_calibration_step_sets_the_budget_and_the_bucket_it_needs(rpi3b):
    from k8sdds.testbed import cgroups
    from k8sdds.testbed.profiles import link_burst_kb

    tb = rpi3b.testbed
    node = tb.node("node1")
    budget = tb.profiles()["rpi3b"]["cpu"]
    try:
        tb.set_budget(node, 0.03)
        quota = _read_quota(tb.cgroup(node))
        assert quota == (round(0.03 * cgroups.period_us(0.03)), cgroups.period_us(0.03))
        qdiscs = subprocess.run(["tc", "-n", tb.switch, "qdisc", "show", "dev", "n1"],
                                capture_output=True, text=True).stdout
        assert f"burst {link_burst_kb(100, 128, 0.03)}Kb" in qdiscs, qdiscs
    finally:
        tb.set_budget(node, budget)
    assert f"burst {tb.profiles()['rpi3b']['burst_kb']}Kb" in subprocess.run(
        ["tc", "-n", node.ns, "qdisc", "show", "dev", "eth0"], capture_output=True,
        text=True).stdout


def _read_quota(group: str) -> tuple[int, int]:
    """(quota, period) in microseconds of a cgroup (v2 cpu.max or v1 cfs files)."""
    from pathlib import Path

    path = Path(group)
    if (path / "cpu.max").exists():
        quota, period = (path / "cpu.max").read_text().split()
        return int(quota), int(period)
    return (int((path / "cpu.cfs_quota_us").read_text()),
            int((path / "cpu.cfs_period_us").read_text()))


def test_cpu_quota_holds_every_process_of_the_node(rpi3b, tmp_path):
    tb = rpi3b.testbed
    node = tb.node("node1")
    placement = Placement("pub", node.name, node.address, "eth0", node.ns, node.name)
    busy = [sys.executable, "-c", "while True: pass"]
    handle = rpi3b.start(placement, Command(tuple(busy)), tmp_path / "busy.log")
    try:
        time.sleep(0.3)
        with open(f"/proc/{handle.proc.pid}/cgroup") as fh:
            assert f"k8sdds/{tb.spec.name}/node1" in fh.read()
        def cpu_seconds() -> float:
            return netns.cpu_seconds(handle.proc.pid)

        budget = tb.profiles()["rpi3b"]["cpu"]  # calibrated (k8sdds.testbed.calibration)
        start, t0 = cpu_seconds(), time.monotonic()
        time.sleep(3.0)
        used = (cpu_seconds() - start) / (time.monotonic() - t0)
        assert used <= budget * 1.2 + 0.01, \
            f"a busy loop used {used:.3f} CPUs under a {budget} CPU budget"
        assert used >= budget * 0.5  # and it did run
    finally:
        rpi3b.stop([handle])


def _aes_gcm_per_s(env: dict) -> float:
    """Bytes/s of AES-128-GCM on 16 KiB blocks, from `openssl speed`'s last line."""
    out = subprocess.run(["openssl", "speed", "-seconds", "1", "-bytes", "16384", "-evp",
                          "aes-128-gcm"], capture_output=True, text=True, check=True,
                         env={**os.environ, **env}).stdout
    return float(out.strip().splitlines()[-1].split()[-1].rstrip("k")) * 1000


@pytest.mark.skipif("aes" not in open("/proc/cpuinfo").read().split(),
                    reason="this CPU has no AES instructions to keep OpenSSL off")
def test_engines_on_a_pi_node_run_without_aes_instructions(rpi3b, tmp_path):
    """The Pi 3B has no AES instructions: its engines get OpenSSL's mask, and the mask
    really makes this machine's AES as slow as software AES."""
    node = rpi3b.testbed.node("node1")
    placement = Placement("pub", node.name, node.address, "eth0", node.ns, node.name)
    log = tmp_path / "env.log"
    rpi3b.wait(rpi3b.start(placement, Command(("env",)), log), timeout=10)
    mask = engine_env(PROFILES["rpi3b"])
    assert mask and all(f"{k}={v}" in log.read_text().splitlines() for k, v in mask.items())
    assert _aes_gcm_per_s({}) > 4 * _aes_gcm_per_s(mask)


def test_netem_parts_are_applied_or_reported(tmp_path):
    env = {**os.environ, "K8SDDS_STATE_DIR": str(tmp_path / "state"), "COLUMNS": "200"}
    name = "kdn" + str(os.getpid() % 1000)
    proc = cli("testbed", "up", "--testbed", name, "--nodes", "2", "--profile", "rpi3b-wifi",
               env=env)
    try:
        assert proc.returncode == 0, proc.stderr
        qdiscs = subprocess.run(["tc", "-n", f"{name}-node1", "qdisc", "show", "dev", "eth0"],
                                capture_output=True, text=True).stdout
        assert "tbf" in qdiscs and "rate 40Mbit" in qdiscs
        missing = capabilities.qdisc("netem")
        if missing is not None:
            assert "not applied: node1 (rpi3b-wifi): delay 2 ms and loss 0.1 %" in proc.stderr
            assert "no netem" in proc.stderr
            # the report is tested; the applying cannot be here (an xfail, never a pass)
            pytest.xfail(f"delay and loss cannot be applied on this kernel: {missing}")
        assert "netem" in qdiscs and "delay 2ms" in qdiscs
        assert "not applied" not in proc.stderr
    finally:
        cli("testbed", "down", "--testbed", name, env=env)


def test_profile_mtu_shrinks_pod_and_tunnel_mtus(tmp_path, monkeypatch):
    from k8sdds.testbed.profiles import PROFILES, Profile
    from k8sdds.testbed.spec import default_nodes
    from k8sdds.testbed.testbed import Testbed

    monkeypatch.setenv("K8SDDS_STATE_DIR", str(tmp_path))
    monkeypatch.setitem(PROFILES, "mtu1400", Profile("mtu1400", mtu=1400, about="test only"))
    tb = Testbed(default_nodes(3, "mtu1400", name="kdu" + str(os.getpid() % 1000)))
    tb.up()
    try:
        tb.use_datapath("flannel-vxlan")
        n1, n2 = tb.node("node1"), tb.node("node2")
        assert n1.shrink(1450) == 1350
        a = tb.add_pod(n1, "a", n1.shrink(1450))
        b = tb.add_pod(n2, "b", n2.shrink(1450))

        def ping(size: int) -> bool:
            return netns.run(netns.exec_argv(a.ns, ["ping", "-c", "1", "-W", "2", "-M", "do",
                                                    "-s", str(size), b.address]),
                             check=False).returncode == 0

        assert ping(1350 - 28) and not ping(1351 - 28)
        link = json.loads(subprocess.run(["ip", "-n", n1.ns, "-j", "link", "show", "flannel.1"],
                                         capture_output=True, text=True).stdout)[0]
        assert link["mtu"] == 1350
    finally:
        tb.down()


def test_a_run_on_pi_nodes_records_its_budgets_and_what_the_emulator_cannot_show(tmp_path):
    from k8sdds.testbed import calibration

    cal = tmp_path / "cal.json"
    here = calibration.this_machine()  # made on this machine, in another sitting
    calibration.save(calibration.Calibration(board="rpi3b", cpu=0.25, target_ratio=0.87,
                                             ratio=0.86, link_mbps=95.0, machine=here,
                                             when="2026-01-02T03:04:00+00:00"), cal)
    env = {**os.environ, "K8SDDS_STATE_DIR": str(tmp_path / "state"),
           "K8SDDS_CALIBRATION": str(cal)}
    sch = tmp_path / "s.csv"
    sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize\n1024,false,1,false,0\n")
    proc = cli("run", "--sch", str(sch), "--profile", "rpi3b", "--datapath", "host",
               "--duration", "2", "--out", str(tmp_path / "logs"), "--testbed",
               "kdb" + str(os.getpid() % 1000), "--json", "--report", env=env)
    assert proc.returncode == 0, proc.stderr
    run = json.loads(proc.stdout)["run_dir"]
    manifest = json.loads(open(f"{run}/manifest.json").read())
    pi = manifest["cluster"]["profiles"]["rpi3b"]
    assert pi["cpu"] == 0.25
    assert f"calibrated on this machine ({here['cpu_model']}" in pi["cpu_from"]
    assert any("periods of 10 ms" in line for line in manifest["cluster"]["cannot_show"])
    # a calibration from another sitting is said, in the manifest and in the run's outcome
    # (beside another test the run may also say the machine was busy as it began, or that
    # its loopback pace moved since `this_machine()` read it above: the machine's, not ours)
    notes = json.loads(proc.stdout)["budget_notes"]
    stale = [n for n in notes if n.startswith("rpi3b: the CPU budget was calibrated")]
    assert len(stale) == 1, notes
    [stale] = stale
    assert "(2026-01-02T03:04)" in stale
    assert stale in manifest["cluster"]["cannot_show"]
    assert manifest["cluster"]["profiles"]["rpi3b"]["cpu_origin"] == "this machine"
    # and on the console, also with --quiet (every CPU-bound figure rests on the budget)
    proc = cli("run", "--sch", str(sch), "--profile", "rpi3b", "--datapath", "host",
               "--duration", "1", "--out", str(tmp_path / "logs"), "--testbed",
               "kdb" + str(os.getpid() % 1000), "--quiet", "--no-plot",
               env={**env, "COLUMNS": "300"})
    assert proc.returncode == 0, proc.stderr
    assert f"note: {stale}" in proc.stderr
    report = open(f"{run}/report.html").read()
    assert "the emulator cannot show" in report and "rpi3b: 0.25 CPU (calibrated" in report
    # a calibration file made on another machine: said in the answer, loudly, with why
    calibration.save(calibration.Calibration(board="rpi3b", cpu=0.25, target_ratio=0.87,
                                             ratio=0.86, link_mbps=95.0,
                                             machine={**here, "cpu_model": "Other CPU"},
                                             when=dt.datetime.now(dt.timezone.utc)
                                             .isoformat()), cal)
    proc = cli("run", "--sch", str(sch), "--profile", "rpi3b", "--datapath", "host",
               "--duration", "1", "--out", str(tmp_path / "logs"), "--testbed",
               "kdb" + str(os.getpid() % 1000), "--no-plot", "--no-calibrate",
               env={**env, "COLUMNS": "300"})
    assert proc.returncode == 0, proc.stderr
    assert "calibrating it here first" not in proc.stderr
    [away] = [line for line in proc.stdout.splitlines() if line.startswith("rpi3b: ")]
    assert away.startswith("rpi3b: the CPU budget was calibrated on another machine, not on "
                           f"this one (CPU 'Other CPU' there, {here['cpu_model']!r} here)")
    assert "note:" not in proc.stderr  # said once, in the answer
