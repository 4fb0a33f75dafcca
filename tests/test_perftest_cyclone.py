"""RTI Perftest's own program built on Cyclone DDS (engines/perftest): the build from Perftest's
sources (the tests take the archive beside the project, ../shared/third_party, or
$PERFTEST_SRC), its errors, k8sdds' command lines against the built program's own -help, and
live runs through the emulated backend."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import statistics
import subprocess
import tarfile
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from k8sdds import schedule
from k8sdds.caches import engine_bin
from k8sdds.engines import RoleContext
from k8sdds.engines.rtiperftest import RtiPerftest, RtiSettings
from k8sdds.errors import ScheduleError
from k8sdds.model import Test

from .builds import needs
from .conftest import user_python
from .emulated_support import namespaces, requires_namespaces

REPO = Path(__file__).resolve().parents[1]


def _source() -> Path | None:
    given = os.environ.get("PERFTEST_SRC")
    if given:
        return Path(given) if Path(given).is_absolute() else REPO / given
    found = sorted((REPO.parent / "shared" / "third_party").glob("rtiperftest-*.tar.gz"))
    return found[0] if found else None


SRC = _source()
TOOLS = ("g++", "gcc", "idlc")
MISSING = ("needs RTI Perftest's sources: PERFTEST_SRC (make test takes "
           "../shared/third_party)" if SRC is None or not SRC.exists() else
           "needs cyclonedds-dev, cyclonedds-tools and g++ (make perftest installs them)"
           if any(shutil.which(t) is None for t in TOOLS)
           or not Path("/usr/include/dds/dds.h").exists() else None)
# `built` runs `make perftest`, which finds what make test's lane built: after it
pytestmark = [pytest.mark.build, needs("perftest-amd64"),
              pytest.mark.skipif(MISSING is not None, reason=MISSING or "")]


def _builder():
    spec = importlib.util.spec_from_file_location(
        "perftest_build", REPO / "engines" / "perftest" / "build.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def built() -> Path:
    """perftest_cpp as `make perftest PERFTEST_SRC=...` builds it (docs/how-to/rti-perftest.md,
    as written), into the engines' cache (`make test` built it there already: then it is
    found, not built again)."""
    done = subprocess.run(["make", "--no-print-directory", "perftest", f"PERFTEST_SRC={SRC}"],
                          cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    link = engine_bin() / "perftest_cpp"
    assert link.is_symlink() and os.access(link, os.X_OK), done.stdout
    return link


def test_the_build_runs_perftest_on_cyclone_and_is_cached(tmp_path):
    builder = _builder()
    said: list[str] = []
    link = builder.build(SRC, tmp_path, builder.host_arch(), said.append)
    assert any(line.startswith("building RTI Perftest") for line in said), said
    out = subprocess.run([str(link), "-help"], capture_output=True, text=True, timeout=10)
    # Perftest's own banner (stderr), naming the middleware it was built on (Debian's Cyclone)
    dpkg = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "cyclonedds-dev"],
                          capture_output=True, text=True).stdout
    upstream = dpkg.split("-")[0]
    assert re.match(rf"RTI Perftest 4\.\d+\.\d+ \(Eclipse Cyclone DDS {upstream}\)",
                    out.stderr.strip()), out
    target = link.resolve()
    stamp = target.stat().st_mtime_ns
    said.clear()
    again = builder.build(SRC, tmp_path, builder.host_arch(), said.append)
    assert again.resolve() == target and target.stat().st_mtime_ns == stamp and said == []


def test_build_errors_name_what_is_wrong(tmp_path):
    builder = _builder()
    arch = builder.host_arch()
    with pytest.raises(builder.BuildError, match="no such file or directory"):
        builder.build(tmp_path / "nothing", tmp_path / "bin", arch)
    (tmp_path / "empty").mkdir()
    with pytest.raises(builder.BuildError, match="not an RTI Perftest source tree"):
        builder.build(tmp_path / "empty", tmp_path / "bin", arch)
    with tarfile.open(SRC) as archive:
        archive.extractall(tmp_path / "tree", filter="data")
    [root] = [p for p in (tmp_path / "tree").iterdir() if p.is_dir()]
    main = root / "srcCpp" / "perftest_cpp.cxx"
    main.write_text(main.read_text().replace("#else // No middleware", "#else // moved"))
    with pytest.raises(builder.BuildError, match="perftest_cpp.cxx: where Perftest picks its "
                       "middleware is not where this build expects it"):
        builder.build(root, tmp_path / "bin", arch)
    (root / "srcIdl" / "perftest.idl").unlink()
    with pytest.raises(builder.BuildError, match="missing srcIdl/perftest.idl"):
        builder.build(root, tmp_path / "bin", arch)
    if not Path("/usr/lib/arm-linux-gnueabihf/libddsc.so").exists():
        with pytest.raises(builder.BuildError, match="armhf|arm-linux-gnueabihf"):
            builder.build(SRC, tmp_path / "bin", "armhf")
    assert not (tmp_path / "bin").exists() or not list((tmp_path / "bin").iterdir())


ENDPOINTS = {"pub": "10.244.1.10", "sub0": "10.244.2.10", "sub1": "10.244.3.10"}
BASE = Test(row=0, line=2, data_len=1024, multicast=False, num_subscribers=2,
            best_effort=False, batch_size=0, engine="rtiperftest", datapath="host",
            duration=30)


def test_every_flag_k8sdds_gives_perftest_is_one_of_its_own(built):
    """The flags of k8sdds' command lines, each in the built program's own -help."""
    helped = subprocess.run([str(built), "-help"], capture_output=True, text=True,
                            timeout=10)
    own = set(re.findall(r"^\s+(-\w+)", helped.stdout + helped.stderr, re.M))
    assert {"-pub", "-sub", "-dataLen"} <= own  # the help was read
    engine = RtiPerftest(RtiSettings(path=str(built)))
    given: set[str] = set()
    tests = [BASE, replace(BASE, latency_test=True, num_subscribers=1),
             replace(BASE, batch_size=8192, send_queue_size=100, pub_rate=1000,
                     best_effort=True, no_print=True),
             replace(BASE, multicast=True), replace(BASE, transport="tcp"),
             replace(BASE, transport="tls", secure=True)]
    loaded = replace(BASE, latency_test=True, num_subscribers=1, load="50%", load_len=1024)
    where = {**ENDPOINTS, "stream": ENDPOINTS["pub"], "sink": ENDPOINTS["sub0"]}
    for test, roles in [*((t, ("pub", "sub0")) for t in tests),
                        (loaded, ("stream", "sink"))]:
        for role in roles:
            ctx = RoleContext(role=role, address=where[role], interface="eth0",
                              endpoints=where, discovery="peers", config_dir="/tmp",
                              secrets_dir="/run/creds", stream_rate=500.0)
            given |= {a for a in engine.command(test, ctx).argv[1:]
                      if re.fullmatch(r"-[A-Za-z]\w*", a)}
    assert given - own == set(), given - own
    # DDS Security as Perftest 4.x takes it: the documents as files, not the study's flags
    assert {"-secureGovernanceFile", "-securePermissionsFile", "-secureCertAuthority",
            "-secureCertFile", "-securePrivateKey", "-transportCertFile"} <= given
    assert "-secureEncryptBoth" not in own
    assert {"-domain", "-pubRate"} <= given  # the stream beside a round trip (load)


def test_what_the_cyclone_build_cannot_honour_is_refused_at_load(built, write_schedule):
    from k8sdds import engines

    engines = {**engines.registry(), "rtiperftest": RtiPerftest(RtiSettings(path=str(built)))}
    head = ("dataLen,multicast,numSubscribers,bestEffort,batchSize,engine,transport,secure,"
            "discovery\n")
    ok = write_schedule(head + "1024,false,1,false,0,rtiperftest,tcp,false,peers\n"
                        "1024,false,1,false,0,rtiperftest,tls,true,peers\n")
    assert [t.transport for t in schedule.load(ok, engines=engines)] == ["tcp", "tls"]
    for row, column in (("1024,false,1,false,0,rtiperftest,dtls,false,peers", "transport"),
                        ("1024,false,1,false,0,rtiperftest,udp,false,cds", "discovery"),
                        ("1024,false,1,false,0,rtiperftest,tcp,false,multicast",
                         "discovery")):
        bad = write_schedule(head + row + "\n")
        with pytest.raises(ScheduleError, match=f"column '{column}'.*Cyclone DDS"):
            schedule.load(bad, engines=engines)


def test_the_cyclone_build_refuses_perftest_options_it_cannot_honour(built, tmp_path):
    """Perftest's own options that Cyclone DDS has no meaning for: the program itself says
    which and why, before it measures anything."""
    for args, said in ((["-secureEncryptionAlgorithm", "aes-128-gcm",
                         "-secureGovernanceFile", "g.p7s"], "-secureEncryptionAlgo"),
                       (["-securePermissionsFile", "p.p7s"], "-secureGovernanceFile"),
                       (["-transport", "TCP", "-multicast"], "-multicast: needs"),
                       (["-asynchronous"], "-asynchronous: Cyclone DDS writes")):
        out = subprocess.run([str(built), "-pub", "-executionTime", "1", *args],
                             capture_output=True, text=True, timeout=30, cwd=tmp_path)
        assert out.returncode != 0 and f"not on Cyclone DDS: {said}" in out.stderr, out
    out = subprocess.run([str(built), "-sub", "-transport", "TLS", "-transportCertFile",
                          "missing.pem"], capture_output=True, text=True, timeout=30,
                         cwd=tmp_path)
    assert out.returncode != 0 and "-transportCertFile missing.pem: cannot read it" in \
        out.stderr, out
    assert not list(Path("/tmp").glob("perftest-keystore-*"))  # none left behind


def test_the_study_governance_is_the_one_perftest_ships_for_its_flags(tmp_path):
    """credentials.STUDY protects what Perftest's own governance for -secureSign
    -secureEncryptBoth (resource/secure/signed_PerftestGovernance_SignEncryptBoth.xml in its
    sources) protects."""
    from k8sdds.engines import credentials

    with tarfile.open(SRC) as archive:
        [member] = [m for m in archive.getmembers()
                    if m.name.endswith("secure/signed_PerftestGovernance_SignEncryptBoth.xml")]
        upstream = archive.extractfile(member).read().decode()
    ours = credentials.ensure(tmp_path, ["pub"], credentials.STUDY)["pub"].governance

    def kinds(text: str) -> dict[str, str]:
        text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
        return dict(re.findall(r"<(\w+_(?:protection_kind|access_control|protection)|"
                               r"allow_unauthenticated_participants)>\s*(\w+)\s*<", text))

    theirs = kinds(upstream)
    assert len(theirs) >= 10, theirs
    assert kinds(ours.read_text()) == theirs


# what Perftest's pongs x its stored mean round trip fill of the seconds it pinged: under 1 by
# what its loop spends between a pong and the next ping (a thread's wake-up, a line printed);
# half of it (0.5 times these) if the figure were one way, about twice with two in flight
FILL_PERFTEST = (0.6, 1.1)

STUDY_ROWS = ("dataLen,multicast,numSubscribers,bestEffort,batchSize,latencyTest,transport\n"
              "1024,false,1,false,0,false,udp\n"
              "1024,false,2,false,0,false,udp\n"
              "1024,false,1,false,0,false,tcp\n"
              "64,false,1,false,8192,false,udp\n"
              "256,false,1,false,0,true,udp\n"
              "256,false,1,true,0,false,udp\n")


@pytest.mark.emulated
@requires_namespaces()
def test_perftest_on_cyclone_runs_live_on_the_emulated_testbed(built, tmp_path):
    """The K8sDDS command line with Perftest as the engine (`python3 perftest.py --sch ...
    --engine rtiperftest`, the user's python3, the binary `make perftest` built): throughput
    with one and two subscribers, TCP, batching, a latency test and best effort, on a pod
    datapath;
    Perftest's own output, parsed by k8sdds' Perftest parser."""
    sch = tmp_path / "s.csv"
    sch.write_text(STUDY_ROWS)
    name = "kpc" + str(os.getpid() % 1000)
    env = {**os.environ, "K8SDDS_STATE_DIR": str(tmp_path / "state")}
    env.pop("K8SDDS_RTIPERFTEST", None)
    proc = subprocess.run(
        [user_python(), str(REPO / "perftest.py"), "--sch", str(sch), "--engine",
         "rtiperftest", "--datapath", "flannel-vxlan", "--duration", "4", "--out",
         str(tmp_path / "logs"), "--testbed", name, "--json", "--no-plot"],
        capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert namespaces(name) == []
    outcome = json.loads(proc.stdout)
    assert outcome["failed"] == []
    run = Path(outcome["run_dir"])
    manifest = json.loads((run / "manifest.json").read_text())
    assert "(Eclipse Cyclone DDS" in manifest["tools"]["rtiperftest"]
    df = pd.read_csv(run / "results.csv")
    assert set(df.engine) == {"rtiperftest"}
    s = df[df.kind == "summary"]
    thr = s[s.metric == "throughput_mbps"].set_index(["test", "role"]).value
    assert set(thr.index) == {(1, "sub0"), (2, "sub0"), (2, "sub1"), (3, "sub0"), (4, "sub0"),
                              (5, "sub0"), (6, "sub0")}
    assert (thr > 1).all(), thr  # over a vxlan datapath, Mb/s
    lat = s[(s.metric == "latency_us_mean") & (s.test == 5)].value
    assert len(lat) == 1 and 1 < lat.iloc[0] < 100_000, lat  # µs, one round trip
    # one latency definition: Perftest prints a line a pong, one ping in flight, so its pongs
    # times the stored mean round trip come to the time it sent pings (-executionTime 4),
    # less what its loop spends between a pong and the next ping (FILL_PERFTEST)
    trips = s[(s.metric == "roundtrips") & (s.test == 5)].value
    fill = trips.iloc[0] * lat.iloc[0] / 1e6 / 4
    assert FILL_PERFTEST[0] <= fill <= FILL_PERFTEST[1], (fill, trips.iloc[0], lat.iloc[0])
    cpu = s[(s.metric == "cpu_pct") & (s.role == "sub0")].value
    assert (cpu > 0).all(), cpu  # Perftest's own CPU monitor (RTI_LINUX) read /proc
    sent = (run / "test-4" / "rep-1" / "pub.log").read_text()
    assert "<WriteBatch>true</WriteBatch>" in sent  # -batchSize 8192 became Cyclone's batching
    unbatched = (run / "test-1" / "rep-1" / "pub.log").read_text()
    assert "Cyclone DDS configuration" in unbatched and "WriteBatch" not in unbatched
    # unbatched, one sample per datagram: the datagram sizes ddsperf runs with too
    from k8sdds.engines.ddsperf import unpacked

    sizes = unpacked(replace(BASE, data_len=1024, batch_size=0))
    assert (f"<MaxMessageSize>{sizes['max_message_bytes']}B</MaxMessageSize><FragmentSize>"
            f"{sizes['fragment_bytes']}B</FragmentSize>") in unbatched
    assert "<MaxMessageSize>" not in sent  # a batching publisher fills Cyclone's datagrams


@pytest.mark.skipif(any(shutil.which(t) is None for t in (
    "aarch64-linux-gnu-g++", "arm-linux-gnueabihf-g++", "qemu-aarch64-static",
    "qemu-arm-static")), reason="needs Debian's cross g++ for arm64 and armhf and "
    "qemu-user-static (make test installs them)")
@needs("perftest-arm64", "perftest-armhf")
def test_the_pis_builds_measure_each_other_under_qemu(built, tmp_path):
    """`make perftest PERFTEST_ARCHES="arm64 armhf"` (docs/how-to/rti-perftest.md), then a Pi
    4's publisher (arm64) and a Pi 3's subscriber (armhf) over loopback, each under qemu-user
    with its own architecture's Cyclone DDS: Perftest's summary, read by k8sdds' parser."""
    from .parsers_support import PARSERS

    done = subprocess.run(["make", "--no-print-directory", "perftest", f"PERFTEST_SRC={SRC}",
                           "PERFTEST_ARCHES=arm64 armhf"], cwd=REPO, capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    cache = Path(os.environ.get("K8SDDS_CACHE", "/var/cache/k8sdds"))

    def under_qemu(arch: str, qemu: str, *args: str) -> list[str]:
        program = engine_bin() / f"perftest_cpp-{arch}"
        out = subprocess.run(["file", "-L", str(program)], capture_output=True, text=True)
        assert {"arm64": "aarch64", "armhf": "ARM, EABI5"}[arch] in out.stdout, out.stdout
        return [qemu, "-L", str(cache / f"perftest-sysroot-{arch}"), str(program), *args,
                "-nic", "lo", "-dataLen", "1024", "-noPrintIntervals", "-domain", "7"]

    sub = subprocess.Popen(under_qemu("armhf", "qemu-arm-static", "-sub"),
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        pub = subprocess.run(under_qemu("arm64", "qemu-aarch64-static", "-pub",
                                        "-numSubscribers", "1", "-executionTime", "4"),
                             capture_output=True, text=True, timeout=300)  # two emulated
        out, _ = sub.communicate(timeout=60)  # programs beside the suite: a slow start
    finally:
        sub.kill()
    assert pub.returncode == 0, pub.stdout + pub.stderr
    got = PARSERS["rtiperftest"](out, "sub0", False)
    assert (got.summary("throughput_mbps") or 0) > 1, out[-2000:]


@pytest.mark.parametrize("size", [256, 1_000_000])
def test_a_latency_test_answers_on_the_receive_thread_one_ping_in_flight(built, size):
    """Perftest's callbacks run in Cyclone's listeners, where a subscriber writes its echo:
    that write never waits on the thread it runs on (with an echo writer keeping all it did:
    `dds_write: Timeout` after 10 s at any size), from 256 B to a 1 MB sample (large data),
    and the publisher has one ping in flight: its pongs times their mean round trip stay
    within what the seconds it pinged hold (FILL_PERFTEST; two in flight came to 1.55)."""
    from .parsers_support import PARSERS

    common = ["-nic", "lo", "-dataLen", str(size), "-domain", "9", "-peer", "127.0.0.1"]
    sub = subprocess.Popen([str(built), "-sub", *common], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True)
    try:
        pub = subprocess.run([str(built), "-pub", "-numSubscribers", "1", "-latencyTest",
                              "-batchSize", "0", "-executionTime", "3", *common],
                             capture_output=True, text=True, timeout=60)
        out, _ = sub.communicate(timeout=30)
    finally:
        sub.kill()
    assert pub.returncode == 0, pub.stdout[-2000:] + pub.stderr
    for text in (pub.stdout + pub.stderr, out):
        assert "Timeout" not in text and "[Error]" not in text, text[-2000:]
    got = PARSERS["rtiperftest"](pub.stdout, "pub", True)
    trips, mean = got.summary("roundtrips"), got.summary("latency_us_mean")
    assert trips and trips >= 20 and mean, pub.stdout[-2000:]  # 76 at 1 MB beside the suite
    assert trips * mean / 1e6 / 3 <= FILL_PERFTEST[1], (trips, mean)


PACKETS = re.compile(r"^\s*Packets:\s*\d+\s+Packets/s:\s*(\d+)", re.M)  # legacy interval line
CSV_RATE = re.compile(r"^\s*\d+,\s*\d+,\s*(\d+),", re.M)  # a CSV interval line: Samples/s
# a CSV interval line: Length, Total Samples, Samples/s, Avg Samples/s, Mbps, ...
CSV_MBPS = re.compile(r"^\s*\d+,\s*\d+,\s*\d+,\s*\d+,\s*([\d.]+),", re.M)


def _interval_rates(log: Path) -> list[float]:
    """A Perftest subscriber's samples a second, one per interval line it printed."""
    text = log.read_text()
    return [float(r) for r in PACKETS.findall(text) or CSV_RATE.findall(text)]


@pytest.mark.emulated
@requires_namespaces()
def test_perftest_streams_beside_its_round_trip_as_the_how_to_writes(built, tmp_path):
    """docs/how-to/latency-under-load.md's Perftest command (one repeat of 3 s): the run adds
    Perftest's own throughput at 1 KiB as the capacity, and each share's stream is a Perftest
    publisher in domain 1 at that share of what the capacity's subscriber printed, whose
    subscriber's own interval lines show it arrived; the round trip is Perftest's."""
    from .test_sweeps_emulated import _how_to_run

    outcome, run, manifest, testbed = _how_to_run(
        tmp_path, "docs/how-to/latency-under-load.md", "kpl", "3", which=1, repeats=1)
    assert namespaces(testbed) == []
    tests = {t["number"]: t for t in manifest["tests"]}
    assert {t["engine"] for t in tests.values()} == {"rtiperftest"}
    assert [(t["latency_test"], t["data_len"], t["load"]) for t in tests.values()] == [
        (True, 64, ""), (False, 1024, ""), (True, 64, "25%"), (True, 64, "50%"),
        (True, 64, "75%"), (True, 64, "100%"), (True, 64, "max")]
    summary = (run / "test-2/rep-1/sub0.log").read_text()
    # Perftest's own summary line: Sample Size, Total Samples, Avg Samples/s, ...
    capacity = float(re.search(r"Avg Samples/s.*\n\s*1024,\s*\d+,\s*(\d+)", summary)[1])
    assert capacity > 0
    df = pd.read_csv(run / "results.csv")
    for number, share in ((4, 0.5), (6, 1.0)):
        logs, entry = run / f"test-{number}/rep-1", manifest["repeats"][f"test-{number}/rep-1"]
        told = round(share * capacity)
        argv = entry["argv"]["stream"]
        assert argv[argv.index("-pubRate") + 1] == f"{told}:sleep", (argv, capacity)
        assert argv[argv.index("-domain") + 1] == "1"
        # what arrived is Perftest's own rate control's doing (its sleeps): k8sdds keeps
        # what the stream's subscriber printed, each second's Mbps, as its carried figure
        mbps = [float(r) for r in CSV_MBPS.findall((logs / "sink.log").read_text())]
        assert len(mbps) >= 3, (logs / "sink.log").read_text()[-2000:]
        carried = df[(df.test == number) & (df.role == "sink") & (df.kind == "summary")
                     & (df.metric == "throughput_mbps")].value
        # results.csv keeps 6 significant digits (results/table.py): 100.018 for 100.01818
        assert list(carried) == [pytest.approx(statistics.fmean(mbps[1:-1]), rel=5e-6)]
        assert max(_interval_rates(logs / "sink.log")) <= 1.2 * told  # never past its rate
        # the round trip ran beside it: Perftest's latency summary
        assert "Latency Summary" in (logs / "pub.log").read_text()
    assert "-pubRate" not in manifest["repeats"]["test-7/rep-1"]["argv"]["stream"]
    sink = df[(df.role == "sink") & (df.kind == "summary") & (df.metric == "throughput_mbps")]
    assert set(sink.test) == {3, 4, 5, 6, 7}
