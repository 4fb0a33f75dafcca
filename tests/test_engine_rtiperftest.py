"""The RTI Perftest engine: golden argv for every option, availability, load-time checks; and
a run through the emulated backend with a stand-in perftest_cpp (RTI Perftest is proprietary
and cannot be installed here: the stand-in replays real K8sDDS logs, so what is exercised is
k8sdds' side: argv, environment, subscribers that exit by themselves, parsing, results)."""

from __future__ import annotations

import json
import os
import stat
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from k8sdds import schedule
from k8sdds.engines import RoleContext
from k8sdds.engines.rtiperftest import RtiPerftest, RtiSettings
from k8sdds.errors import ScheduleError
from k8sdds.model import Test

from .conftest import FIXTURES
from .emulated_support import cli, requires_namespaces

ENDPOINTS = {"pub": "10.244.1.10", "sub0": "10.244.2.10", "sub1": "10.244.3.10"}
BASE = Test(row=0, line=2, data_len=1024, multicast=False, num_subscribers=2,
            best_effort=False, batch_size=0, engine="rtiperftest", datapath="flannel-vxlan",
            duration=30)


@pytest.fixture
def engine(tmp_path) -> RtiPerftest:
    exe = tmp_path / "perftest_cpp"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    lic = tmp_path / "rti_license.dat"
    lic.write_text("license")
    return RtiPerftest(RtiSettings(path=str(exe), license=str(lic)))


def _with(engine: RtiPerftest) -> dict:
    """A run's registry with this RTI Perftest."""
    from k8sdds import engines

    return {**engines.registry(), "rtiperftest": engine}


def _argv(engine, test, role, discovery="peers"):
    ctx = RoleContext(role=role, address=ENDPOINTS[role], interface="eth0",
                      endpoints=ENDPOINTS, discovery=discovery, config_dir="/tmp",
                      secrets_dir="/run/creds")
    cmd = engine.command(test, ctx)
    assert cmd.argv[0] == engine.path
    return list(cmd.argv[1:]), cmd.env


def test_publisher_and_subscriber_argv(engine):
    pub, env = _argv(engine, BASE, "pub")
    assert pub == ["-pub", "-numSubscribers", "2", "-executionTime", "30", "-batchSize", "0",
                   "-dataLen", "1024",
                   "-cpu", "-nic", "eth0", "-transport", "UDPv4",
                   "-peer", "10.244.2.10", "-peer", "10.244.3.10"]
    # batchSize 0 is said: the study's Perftest did not batch unless asked (its own log)
    study = (FIXTURES / "rtiperftest" / "legacy-throughput-pub-loaded-latency.log").read_text()
    assert 'Batching: No (Use "-batchSize" to setup batching)' in study
    # the license is read from the run's private directory (a Secret on kubernetes)
    assert env == {"RTI_LICENSE_FILE": "/run/creds/rti_license.dat"}
    sub, _ = _argv(engine, BASE, "sub1")
    assert sub == ["-sub", "-sidMultiSubTest", "1", "-numPublishers", "1", "-dataLen", "1024",
                   "-cpu", "-nic", "eth0", "-transport", "UDPv4",
                   "-peer", "10.244.1.10", "-peer", "10.244.2.10"]
    assert "-numSubscribers" not in sub  # Perftest refuses it on a subscriber


def test_every_option(engine):
    test = replace(BASE, best_effort=True, batch_size=8192, send_queue_size=50, pub_rate=1000,
                   no_print=True, secure=True, transport="tcp")
    pub, _ = _argv(engine, test, "pub")
    for flags in (["-bestEffort"], ["-batchSize", "8192"], ["-sendQueueSize", "50"],
                  ["-pubRate", "1000"], ["-noPrintIntervals"], ["-transport", "TCP"],
                  ["-secureEncryptBoth", "-secureSign"], ["-peer", "10.244.2.10:7400"]):
        i = pub.index(flags[0])
        assert pub[i:i + len(flags)] == flags
    lat, _ = _argv(engine, replace(BASE, latency_test=True, transport="tls"), "pub")
    assert "-latencyTest" in lat and lat[lat.index("-transport") + 1] == "TLS"
    mc, _ = _argv(engine, replace(BASE, multicast=True), "sub0", discovery="multicast")
    assert "-multicast" in mc and "-peer" not in mc


def test_dtls_and_tls_certificates(engine, tmp_path):
    certs = tmp_path / "certs"
    certs.mkdir()
    for name in ("cacert.pem", "pub.pem", "pubkey.pem", "sub.pem", "subkey.pem"):
        (certs / name).write_text("pem")
    engine = RtiPerftest(replace(engine.settings, tls_dir=str(certs)))
    assert engine.check(replace(BASE, transport="dtls")) is None
    pub, _ = _argv(engine, replace(BASE, transport="dtls"), "pub")
    assert pub[pub.index("-transport") + 1] == "DTLS"
    i = pub.index("-transportCertAuthority")
    assert pub[i:i + 6] == ["-transportCertAuthority", str(certs / "cacert.pem"),
                            "-transportCertFile", str(certs / "pub.pem"),
                            "-transportPrivateKey", str(certs / "pubkey.pem")]
    sub, _ = _argv(engine, replace(BASE, transport="tls"), "sub0")
    assert str(certs / "sub.pem") in sub and str(certs / "subkey.pem") in sub
    assert "-peer" in sub and "10.244.1.10:7400" in sub
    udp, _ = _argv(engine, BASE, "pub")
    assert "-transportCertFile" not in udp  # certificates only with TLS and DTLS
    (certs / "subkey.pem").unlink()
    problem = engine.check(replace(BASE, transport="tls"))
    assert problem and "subkey.pem" in problem[2]


def test_tls_without_certificates_takes_the_runs_own(engine, tmp_path):
    """No --rti-tls-dir: the run's credentials (made in its private directory) are given."""
    test = replace(BASE, transport="tls")
    engine.secrets(test, ["pub", "sub0", "sub1"], str(tmp_path / "creds"))
    assert {"ca.pem", "pub.pem", "pub.key", "sub1.key"} <= {
        p.name for p in (tmp_path / "creds").iterdir()}
    sub, _ = _argv(engine, test, "sub1")
    i = sub.index("-transportCertAuthority")
    assert sub[i:i + 6] == ["-transportCertAuthority", "/run/creds/ca.pem",
                            "-transportCertFile", "/run/creds/sub1.pem",
                            "-transportPrivateKey", "/run/creds/sub1.key"]


def test_dds_security_as_each_perftest_takes_it(tmp_path):
    """The study's Perftest (3.0.1) takes -secureEncryptBoth -secureSign; Perftest 4.1 on has
    only -secureGovernanceFile and the other files (its release notes, 4.1): it is given the
    governance document those flags chose, with the run's certificates."""
    def perftest(version: str) -> RtiPerftest:
        exe = tmp_path / f"perftest-{version}"
        exe.write_text(f"#!/bin/sh\necho 'RTI Perftest {version} (RTI Connext DDS 7.3.0)' >&2\n")
        exe.chmod(0o755)
        return RtiPerftest(RtiSettings(path=str(exe)))

    secure = replace(BASE, secure=True)
    old, _ = _argv(perftest("3.0.1"), secure, "pub")
    assert "-secureEncryptBoth" in old and "-secureSign" in old
    assert "-secureGovernanceFile" not in old
    new = perftest("4.3.0")
    new.secrets(secure, ["pub", "sub0", "sub1"], str(tmp_path / "creds"))
    governance = (tmp_path / "creds" / "governance-study.p7s").read_text()
    # as Perftest's own resource/secure/signed_PerftestGovernance_SignEncryptBoth.xml
    for kind, value in (("rtps", "SIGN"), ("discovery", "NONE"), ("liveliness", "NONE"),
                        ("metadata", "ENCRYPT"), ("data", "ENCRYPT")):
        assert f"<{kind}_protection_kind>{value}</{kind}_protection_kind>" in governance
    argv, _ = _argv(new, secure, "sub0")
    i = argv.index("-secureGovernanceFile")
    assert argv[i:i + 10] == [
        "-secureGovernanceFile", "/run/creds/governance-study.p7s",
        "-securePermissionsFile", "/run/creds/sub0.permissions.p7s",
        "-secureCertAuthority", "/run/creds/ca.pem", "-secureCertFile", "/run/creds/sub0.pem",
        "-securePrivateKey", "/run/creds/sub0.key"]
    assert "-secureEncryptBoth" not in argv


def test_load_time_checks(engine, write_schedule, monkeypatch):
    engines = _with(engine)
    head = "dataLen,multicast,numSubscribers,bestEffort,batchSize,latencyTest,engine\n"
    ok = write_schedule(head + "1024,false,2,false,0,false,rtiperftest\n")
    assert schedule.load(ok, engines=engines)[0].engine == "rtiperftest"
    for row, expected in (("1024,false,1,false,8192,true", "batching in a latency test"),
                          ("16,false,1,false,0,false", "28 to")):
        bad = write_schedule(head + row + ",rtiperftest\n")
        with pytest.raises(ScheduleError, match=expected):
            schedule.load(bad, engines=engines)


def test_absent_perftest_fails_at_load_time(write_schedule, monkeypatch, tmp_path):
    monkeypatch.delenv("K8SDDS_RTIPERFTEST", raising=False)
    monkeypatch.setenv("K8SDDS_ENGINE_BIN", str(tmp_path))  # none built by make perftest
    path = write_schedule("dataLen,multicast,numSubscribers,bestEffort,batchSize,engine\n"
                          "1024,false,1,false,0,rtiperftest\n")
    with pytest.raises(ScheduleError, match="make perftest PERFTEST_SRC=DIR.*--rtiperftest PATH"):
        schedule.load(path)
    assert "not an executable" in RtiPerftest(RtiSettings("/nonexistent/perftest_cpp")
                                              ).unavailable()


STAND_IN = """#!{python}
# Stand-in for RTI Perftest: replays a real K8sDDS log for its role; records its argv.
import json, os, sys, time
args = sys.argv[1:]
with open(os.path.join({logdir!r}, "argv-" + ("pub" if "-pub" in args else "sub") + ".json"),
          "a") as fh:
    fh.write(json.dumps({{"argv": args, "license": os.environ.get("RTI_LICENSE_FILE")}}) + "\\n")
time.sleep(1)
name = "legacy-throughput-pub-loaded-latency.log" if "-pub" in args else \\
    "legacy-throughput-sub.log"
sys.stdout.write(open(os.path.join({fixtures!r}, name)).read())
"""


@pytest.mark.emulated
@requires_namespaces()
def test_run_through_the_emulated_backend_with_a_stand_in(tmp_path):
    exe = tmp_path / "perftest_cpp"
    exe.write_text(STAND_IN.format(python=sys.executable, logdir=str(tmp_path),
                                   fixtures=str(FIXTURES / "rtiperftest")))
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    lic = tmp_path / "license.dat"
    lic.write_text("x")
    sch = tmp_path / "s.csv"
    sch.write_text("dataLen,multicast,numSubscribers,bestEffort,batchSize,engine\n"
                   "64,false,2,false,0,rtiperftest\n")
    env = {**os.environ, "K8SDDS_STATE_DIR": str(tmp_path / "state")}
    proc = cli("run", "--sch", str(sch), "--datapath", "flannel-hostgw", "--duration", "5",
               "--rtiperftest", str(exe), "--rti-license", str(lic), "--out",
               str(tmp_path / "logs"), "--testbed", "kdr" + str(os.getpid() % 1000),
               "--json", "--no-plot", env=env)
    assert proc.returncode == 0, proc.stderr
    outcome = json.loads(proc.stdout)
    assert outcome["failed"] == []
    df = pd.read_csv(Path(outcome["run_dir"]) / "results.csv")
    thr = df[(df.kind == "summary") & (df.metric == "throughput_mbps")]
    assert sorted(thr.role) == ["sub0", "sub1"] and set(thr.value) == {2.1}
    assert set(thr.engine) == {"rtiperftest"}
    calls = [json.loads(line) for line in (tmp_path / "argv-sub.json").read_text().splitlines()]
    subs = [c for c in calls if "-sub" in c["argv"]]  # others: the banner (-help)
    assert sorted(s["argv"][2] for s in subs) == ["0", "1"]  # -sidMultiSubTest j
    run_lic = Path(outcome["run_dir"]) / "credentials" / "rti_license.dat"
    assert all(s["license"] == str(run_lic) for s in subs)
    assert run_lic.read_text() == "x" and run_lic.stat().st_mode & 0o777 == 0o600


def test_license_is_copied_privately_and_kept_in_step(engine, tmp_path):
    folder = tmp_path / "credentials"
    engine.secrets(BASE, ["pub", "sub0"], str(folder))
    copy = folder / "rti_license.dat"
    assert copy.read_text() == "license" and copy.stat().st_mode & 0o777 == 0o600
    Path(engine.license).write_text("renewed")
    engine.secrets(BASE, ["pub", "sub0"], str(folder))
    assert copy.read_text() == "renewed"
    RtiPerftest(RtiSettings(engine.path)).secrets(BASE, ["pub"], str(tmp_path / "none"))
    assert not (tmp_path / "none").exists()  # no license, nothing written


def test_cloud_discovery_service_is_one_more_role(engine):
    test = replace(BASE, discovery="cds")
    assert list(engine.roles(test)) == ["pub", "cds", "sub0", "sub1"]
    endpoints = {**ENDPOINTS, "cds": "t1-r1-cds.k8sdds"}
    ctx = RoleContext(role="cds", address="x", interface="eth0", endpoints=endpoints,
                      discovery="cds", config_dir="/tmp", secrets_dir="/s")
    cmd = engine.command(test, ctx)
    assert cmd.argv == ("rticlouddiscoveryservice", "-transport", "7400")
    assert cmd.env == {"RTI_LICENSE_FILE": "/s/rti_license.dat"}
    ctx = replace(ctx, role="sub1")
    cmd = engine.command(test, ctx)
    assert "-peer" not in cmd.argv  # CDS, not peers, tells them of each other
    assert cmd.env["NDDS_DISCOVERY_PEERS"] == "rtps@udpv4://t1-r1-cds.k8sdds:7400"
    assert cmd.argv[1:5] == ("-sub", "-sidMultiSubTest", "1", "-numPublishers")


def test_cds_is_refused_where_it_cannot_work(engine, write_schedule, monkeypatch):
    engines = _with(engine)
    head = "dataLen,multicast,numSubscribers,bestEffort,batchSize,engine,discovery,transport\n"
    path = write_schedule(head + "1024,false,1,false,0,rtiperftest,cds,tcp\n")
    with pytest.raises(ScheduleError, match="relays UDPv4"):
        schedule.load(path, engines=engines)
    path = write_schedule(head + "1024,false,1,false,0,ddsperf,cds,udp\n")
    with pytest.raises(ScheduleError, match="ddsperf has no discovery service"):
        schedule.load(path, engines=engines)
    path = write_schedule(head + "1024,false,1,false,0,rtiperftest,cds,udp\n")
    assert schedule.load(path, engines=engines)[0].discovery == "cds"


def test_an_image_stands_in_for_a_local_perftest(tmp_path):
    engine = RtiPerftest(RtiSettings.from_environment(
        "/opt/rti/bin/perftest_cpp", image="registry/perftest:7.3", env={}))
    assert engine.unavailable() is None  # nothing needed on this machine
    assert engine.version() == "image registry/perftest:7.3"
    ctx = RoleContext(role="pub", address="a", interface="eth0", endpoints=ENDPOINTS,
                      discovery="peers", config_dir="/tmp")
    assert engine.command(BASE, ctx).argv[0] == "/opt/rti/bin/perftest_cpp"  # in the image


def test_the_stream_beside_a_round_trip_is_a_throughput_pair_in_domain_1(engine):
    test = replace(BASE, latency_test=True, num_subscribers=1, load="50%", load_len=4096)
    assert engine.roles(test) == ["pub", "sub0", "stream", "sink"]
    where = {"pub": "10.0.0.1", "sub0": "10.0.0.2", "stream": "10.0.0.1", "sink": "10.0.0.2"}

    def argv(role: str) -> list[str]:
        ctx = RoleContext(role=role, address=where[role], interface="eth0", endpoints=where,
                          discovery="peers", config_dir="/tmp", secrets_dir="/run/creds",
                          stream_rate=2345.6)
        return list(engine.command(test, ctx).argv[1:])

    pub, stream, sink = argv("pub"), argv("stream"), argv("sink")
    assert "-domain" not in pub and "-latencyTest" in pub
    assert pub[pub.index("-dataLen") + 1] == "1024"
    assert stream[:3] == ["-domain", "1", "-pub"] and "-latencyTest" not in stream
    assert stream[stream.index("-pubRate") + 1] == "2346:sleep"  # Perftest's own rate control
    assert stream[stream.index("-dataLen") + 1] == "4096"
    assert sink[:6] == ["-domain", "1", "-sub", "-sidMultiSubTest", "0", "-numPublishers"]
    assert "-noPrintIntervals" not in sink  # what it carried is read from its interval lines
    # peers: its own domain's participants only
    assert [stream[i + 1] for i, a in enumerate(stream) if a == "-peer"] == ["10.0.0.2"]
    assert [pub[i + 1] for i, a in enumerate(pub) if a == "-peer"] == ["10.0.0.2"]
    # the stream outlasts the round trip: it is stopped once the round trip ends
    assert float(stream[stream.index("-executionTime") + 1]) > float(
        pub[pub.index("-executionTime") + 1])
    # max: as fast as it goes, no rate
    ctx = RoleContext(role="stream", address="10.0.0.1", interface="eth0", endpoints=where,
                      discovery="multicast", config_dir="/tmp", secrets_dir="/run/creds")
    assert "-pubRate" not in engine.command(replace(test, load="max"), ctx).argv


def test_a_stream_sample_size_perftest_refuses_is_refused_at_load(engine):
    test = replace(BASE, latency_test=True, num_subscribers=1, load="50%", load_len=8)
    assert engine.check(test)[0] == "load_len"
