"""TLS and DDS Security with ddsperf, and with RTI Perftest built on Cyclone DDS (`make
perftest`), on the real emulated cluster, checked on the wire."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from k8sdds.engines.rtiperftest import built
from k8sdds.testbed import netns

from .builds import needs
from .emulated_support import cli, namespaces, requires_namespaces

pytestmark = [pytest.mark.emulated, requires_namespaces()]

HEADER = "dataLen,multicast,numSubscribers,bestEffort,batchSize,transport,secure\n"
# every RTPS message starts with it (protocol 2.x); TLS hides it. Four bytes alone would not
# do: seconds of TLS ciphertext hold "RTPS" by chance about one run in eight
RTPS = b"RTPS\x02".hex()
TLS_RECORD = b"\x17\x03\x03".hex()  # a TLS application-data record header
TOPIC = b"DDSPerfRData".hex()  # ddsperf's data topic, in clear in discovery without Security
PERFTEST_TOPIC = b"Throughput".hex()  # Perftest's data topic
ZEROS = bytes(256).hex()  # Perftest's samples are zeros (perftest_cpp.cxx memsets them)


@pytest.fixture(scope="module")
def testbed(tmp_path_factory):
    state = tmp_path_factory.mktemp("state")
    env = {**os.environ, "K8SDDS_STATE_DIR": str(state), "COLUMNS": "200"}
    name = "kds" + str(os.getpid() % 1000)
    up = cli("testbed", "up", "--testbed", name, "--nodes", "3", "--datapath", "flannel-hostgw",
             env=env)
    assert up.returncode == 0, up.stderr
    yield name, env
    assert cli("testbed", "down", "--testbed", name, env=env).returncode == 0
    assert namespaces(name) == []


# ddsperf 0.10.2 over TCP+TLS crashes now and then (SIGABRT at the first connection, or
# SIGSEGV a second into the data), seen only late in the full suite: the crash is the
# engine's, recorded by k8sdds as a failed repeat with the signal. The test then ends as an
# xfail naming the crash (its recording tested, the wire not); any other failure fails it.
CRASHED = re.compile(r"exited with status -(6|11)\b")


def _run_captured(tmp_path, testbed, row: str, *flags: str) -> tuple[dict, Path]:
    """Run one test row while capturing the publisher node's switch port."""
    seen, run, failed = _try_captured(tmp_path, testbed, row, *flags)
    if failed and all(CRASHED.search(f) for f in failed):
        pytest.xfail(f"ddsperf crashed (the engine's fault, recorded with its signal): "
                     f"{failed}")
    assert failed == [], failed
    return seen, run


def _try_captured(tmp_path, testbed, row: str, *flags: str) -> tuple[dict, Path, list[str]]:
    name, env = testbed
    tmp_path.mkdir(parents=True, exist_ok=True)
    sch = tmp_path / "s.csv"
    sch.write_text(HEADER + row + "\n")
    probe = os.path.join(os.path.dirname(__file__), "wire_capture.py")
    # the whole run: the capture ends when the run has (SIGTERM), at most after 120 s
    cap = subprocess.Popen(netns.exec_argv(f"{name}-switch", [
        sys.executable, probe, "n1", "120", RTPS, TLS_RECORD, TOPIC, PERFTEST_TOPIC, ZEROS]),
        stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    proc = cli("run", "--sch", str(sch), "--datapath", "flannel-hostgw", "--duration", "3",
               "--out", str(tmp_path / "logs"), "--testbed", name, "--json", "--no-plot",
               *flags, env=env)
    cap.terminate()  # `ip netns exec` execs the probe: the signal reaches it
    out, _ = cap.communicate(timeout=60)
    assert proc.returncode == 0, proc.stderr
    outcome = json.loads(proc.stdout)
    return json.loads(out)["patterns"], Path(outcome["run_dir"]), outcome["failed"]


def _throughput(run: Path) -> float:
    df = pd.read_csv(run / "results.csv")
    s = df[(df.kind == "summary") & (df.metric == "throughput_mbps") & (df.role == "sub0")]
    return float(s.value.iloc[0])


def test_plain_tcp_shows_rtps_on_the_wire(tmp_path, testbed):
    seen, run = _run_captured(tmp_path, testbed, "1024,false,1,false,0,tcp,false")
    assert seen[RTPS] > 50
    assert _throughput(run) > 1.0
    assert not (run / "credentials").exists()  # nothing made when nothing needs it


def test_tls_hides_rtps_and_keeps_keys_private(tmp_path, testbed):
    seen, run = _run_captured(tmp_path, testbed, "1024,false,1,false,0,tls,false")
    assert seen[RTPS] == 0, "RTPS in clear on a TLS connection"
    assert seen[TLS_RECORD] > 50
    assert _throughput(run) > 1.0
    creds = run / "credentials"
    assert stat.S_IMODE(creds.stat().st_mode) == 0o700
    assert {stat.S_IMODE(p.stat().st_mode) for p in creds.iterdir()} == {0o600}
    assert {"pub.keystore.pem", "sub0.keystore.pem"} <= {p.name for p in creds.iterdir()}
    config = (run / "test-1" / "rep-1" / "pub.cyclonedds.xml").read_text()
    assert "<SSL>" in config and "PRIVATE KEY" not in config
    # the report never carries a key or certificate
    _, env = testbed
    report = cli("report", str(run), "--out", str(tmp_path / "report"), env=env)
    assert report.returncode == 0, report.stderr
    for f in (tmp_path / "report").rglob("*"):
        if f.is_file():
            assert b"PRIVATE KEY" not in f.read_bytes() and b"BEGIN CERT" not in f.read_bytes()


def test_dds_security_authenticates_and_encrypts_discovery(tmp_path, testbed):
    plain, run_plain = _run_captured(tmp_path / "plain", testbed,
                                     "1024,false,1,false,0,udp,false")
    assert plain[TOPIC] > 0  # the control: discovery names the topic in clear
    seen, run = _run_captured(tmp_path / "secure", testbed, "1024,false,1,false,0,udp,true")
    assert seen[RTPS] > 50 and seen[TOPIC] == 0
    assert _throughput(run) > 1.0
    # unauthenticated participants are refused by the governance, so data arriving means
    # the two authenticated each other (Cyclone may log a transient "not allowed" while the
    # handshake is under way)
    log = (run / "test-1" / "rep-1" / "sub0.log").read_text()
    assert "participant node1-pub:" in log
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["tests"][0]["secure"] is True
    # the report sets the two side by side and prices DDS Security against plain UDP
    _, env = testbed
    out = tmp_path / "report"
    report = cli("report", str(run_plain), str(run), "--out", str(out), env=env)
    assert report.returncode == 0, report.stderr
    page = (out / "report.html").read_text()
    section = page[page.index('<section id="security">'):]
    section = section[:section.index("</section>")]
    assert "UDP + DDS Security" in section and "vs plain UDP (%)" in section
    assert (out / "security.png").stat().st_size > 10_000


PERFTEST = ("--engine", "rtiperftest")


def _no_perftest() -> str | None:
    return None if built() else "needs perftest_cpp built on Cyclone DDS (make perftest)"


needs_perftest = needs("perftest-amd64", why=_no_perftest)


@needs_perftest
def test_perftest_on_cyclone_over_tls_hides_rtps(tmp_path, testbed):
    """-transport TLS with the run's certificates: Cyclone's TLS, verified both ways."""
    seen, run = _run_captured(tmp_path, testbed, "1024,false,1,false,0,tls,false", *PERFTEST)
    assert seen[RTPS] == 0, "RTPS in clear on a TLS connection"
    assert seen[TLS_RECORD] > 50 and seen[ZEROS] == 0
    assert _throughput(run) > 1.0
    log = (run / "test-1" / "rep-1" / "pub.log").read_text()
    assert "Kind: TLS" in log and "<SSL><Enable>true</Enable>" in log
    assert f"Certificate file: {run.resolve()}/credentials/pub.pem" in log
    assert "PRIVATE KEY" not in log


@needs_perftest
def test_perftest_on_cyclone_with_dds_security_encrypts_its_samples(tmp_path, testbed):
    """secure=true on Perftest 4.x: the governance the study's -secureEncryptBoth -secureSign
    chose (data encrypted, discovery in clear), the run's certificates, Cyclone's plugins."""
    plain, _ = _run_captured(tmp_path / "plain", testbed, "1024,false,1,false,0,udp,false",
                             *PERFTEST)
    assert plain[ZEROS] > 50  # the control: the samples' zeros are seen in clear
    seen, run = _run_captured(tmp_path / "secure", testbed, "1024,false,1,false,0,udp,true",
                              *PERFTEST)
    assert seen[RTPS] > 50 and seen[ZEROS] == 0  # RTPS, its samples encrypted
    assert seen[PERFTEST_TOPIC] > 0  # the study's governance leaves discovery in clear
    assert _throughput(run) > 1.0
    log = (run / "test-1" / "rep-1" / "sub0.log").read_text()
    assert "Secure Configuration:" in log
    assert f"Governance file: {run.resolve()}/credentials/governance-study.p7s" in log
    governance = (run / "credentials" / "governance-study.p7s").read_text()
    assert "<rtps_protection_kind>SIGN</rtps_protection_kind>" in governance
