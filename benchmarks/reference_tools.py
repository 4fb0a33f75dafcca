#!/usr/bin/env python3
"""k8sdds' own clients against the middlewares' reference tools, on the same path (run as
root, after `make engines`):

- Zenoh: k8sdds-zenoh (`k8sdds run`) against programs that do what Zenoh's published
  examples do (benchmarks/zenoh-reference: z_pub_thr/z_sub_thr, z_ping/z_pong, on the same
  zenoh crate 1.10.2; built here on the first run), peer to peer and through a router
  (k8sdds-zenoh -mode router, as k8sdds runs it; `--routers`: against zenohd, built here
  from crates.io on its first use);
- MQTT: k8sdds-mqtt against mosquitto's own clients (`mosquitto_pub -l` fed by `yes`,
  `mosquitto_sub` counted over a fixed time; Debian's mosquitto-clients), QoS 0 and 1,
  through the same mosquitto.

The path: the emulated testbed (`cloud` profile), host datapath, the publisher on node1, the
subscriber on node2, the router or broker on node3, as `k8sdds run` places them; the tools
by hand in the same node namespaces, with the endpoints k8sdds' roles were given (the
manifest's argv). Each case runs in pairs, in turn k8sdds first and the tool first; the
ratio of the means has a 95 % interval. Throughput is of payload bytes (Mb/s, as k8sdds
counts), round trip the p50 in microseconds.

Usage: .venv/bin/python benchmarks/reference_tools.py [--pairs 5] [--duration 5]
       [--only zenoh,mqtt] [--payloads 64,1024,16384] [--metrics throughput,round-trip]
       [--topologies peer,routed] [--write FILE] [--explain] [--routers]
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from common import Hand, k8sdds  # benchmarks/common.py
from middleware import ratio_interval  # benchmarks/middleware.py

from k8sdds.caches import root
from k8sdds.testbed.spec import default_nodes
from k8sdds.testbed.testbed import Testbed

TESTBED = "kdref"
HERE = Path(__file__).resolve().parent
CRATE = HERE / "zenoh-reference"
HEADER = ("engine,transport,topology,dataLen,multicast,numSubscribers,bestEffort,batchSize,"
          "latencyTest\n")
TOOLS = {("zenoh", "throughput_mbps"): "z_pub_thr/z_sub_thr",
         ("zenoh", "latency_us_p50"): "z_ping/z_pong",
         ("mqtt", "throughput_mbps"): "mosquitto_pub/mosquitto_sub"}
MEASURED = ("{date}, emulated testbed (cloud), host datapath, {duration:g} s each, "
            "benchmarks/reference_tools.py, 2 cores")
ROUND = {64: 200_000, 1024: 100_000, 16384: 20_000}  # z_sub_thr's -n: rounds of about a second


def zenoh_tools() -> Path:
    """The four reference programs, built in engines/build's target directory (its crates
    reused: about 40 s the first time)."""
    target = root() / "cargo-target"
    env = {**os.environ, "CARGO_TARGET_DIR": str(target),
           "CARGO_PROFILE_RELEASE_STRIP": "symbols",
           "PATH": f"{os.environ['PATH']}:{Path.home() / '.cargo/bin'}"}
    subprocess.run(["cargo", "build", "--release", "--locked", "--quiet"], cwd=CRATE,
                   env=env, check=True)
    return target / "release"


def zenohd() -> Path:
    """Zenoh's own router at the zenoh crate's version, for `--routers` only (k8sdds runs
    its own client's router mode): from crates.io, with its own Cargo.lock, in a target
    directory of its own (its plugins' features would rebuild the engines' crates; about 7
    minutes the first time, cached after)."""
    cache = root() / "zenohd"
    if not (cache / "bin" / "zenohd").exists():
        print("building zenohd 1.10.2 for --routers (cached in", cache, ")", flush=True)
        env = {**os.environ, "CARGO_TARGET_DIR": str(cache / "target"),
               "CARGO_PROFILE_RELEASE_STRIP": "symbols",
               "PATH": f"{os.environ['PATH']}:{Path.home() / '.cargo/bin'}"}
        subprocess.run(["cargo", "install", "zenohd", "--version", "=1.10.2", "--locked",
                        "--root", str(cache), "--quiet"], env=env, check=True)
    return cache / "bin" / "zenohd"


def translate(argv: list[str]) -> list[str]:
    """k8sdds-zenoh's session flags as Zenoh's examples take them."""
    out, it = ["--no-multicast-scouting"], iter(argv)
    for flag in it:
        if flag == "-zmode":
            out += ["-m", next(it)]
        elif flag == "-connect":
            for endpoint in next(it).split(","):
                out += ["-e", endpoint]
        elif flag == "-listen":
            out += ["-l", next(it)]
    return out


def zenoh_throughput(tb, run_dir: Path, tools: Path, size: int, duration: float,
                     router: list[str] | None = None) -> float:
    hand = Hand(tb, run_dir)
    try:
        if "router" in hand.entry["argv"]:
            hand.hub("router", 7447, router)
        sub = hand.start("sub0", [str(tools / "z_sub_thr"), *translate(
            hand.entry["argv"]["sub0"]), "-n", str(ROUND[size]), "-s", "1000000"])
        time.sleep(0.5)
        hand.start("pub", [str(tools / "z_pub_thr"), *translate(hand.entry["argv"]["pub"]),
                           str(size)], subprocess.DEVNULL)
        time.sleep(duration)
    finally:
        hand.stop()
    rounds = [float(m[1]) for m in re.finditer(r"^([\d.e+]+) msg/s$", sub.stdout.read(),
                                                re.MULTILINE)]
    if len(rounds) < 2:
        raise SystemExit(f"z_sub_thr gave {len(rounds)} rounds of {ROUND[size]} in "
                         f"{duration:g} s: make --duration longer")
    return statistics.mean(rounds[1:]) * size * 8 / 1e6  # the first round: the start


def zenoh_round_trip(tb, run_dir: Path, tools: Path, size: int, duration: float,
                     express: bool = False, router: list[str] | None = None) -> float:
    hand = Hand(tb, run_dir)
    flags = ["--express"] if express else []
    try:
        if "router" in hand.entry["argv"]:
            hand.hub("router", 7447, router)
        hand.start("sub0", [str(tools / "z_pong"), *translate(hand.entry["argv"]["sub0"]),
                            *flags], subprocess.DEVNULL)
        time.sleep(0.5)
        ping = hand.start("pub", [str(tools / "z_ping"), *translate(
            hand.entry["argv"]["pub"]), "-w", "1", "-n", str(int(duration * 2000)), *flags,
                                  str(size)])
        out = ping.communicate(timeout=duration * 10 + 30)[0]
    finally:
        hand.stop()
    rtts = [int(m[1]) for m in re.finditer(r"rtt=(\d+)µs", out)]
    if not rtts:
        raise SystemExit(f"z_ping printed no round trip: {out[-500:]}")
    return float(statistics.median(rtts))


def switches(pid: int) -> tuple[int, int]:
    """(threads, context switches so far) of process `pid`, all its threads'."""
    threads, total = 0, 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        threads += 1
        for line in (task / "status").read_text().splitlines():
            if "ctxt_switches:" in line:
                total += int(line.split()[1])
    return threads, total


def where_time_goes(tb, zenoh_dir: Path, dds_dir: Path, tools: Path, size: int,
                    duration: float) -> list[str]:
    """One round-trip sitting of each middleware's own tools by hand, peer to peer: the echo
    side's threads and its context switches (wake-ups) per round trip, and the p50."""
    from k8sdds.engines import registry

    rows = []
    for name, run_dir in (("zenoh: z_ping/z_pong", zenoh_dir), ("DDS: ddsperf ping/pong",
                                                                  dds_dir)):
        hand = Hand(tb, run_dir)
        argv = hand.entry["argv"]
        try:
            if name.startswith("zenoh"):
                pong = hand.start("sub0", [str(tools / "z_pong"), *translate(argv["sub0"])],
                                  subprocess.DEVNULL)
                time.sleep(0.5)
                n = int(duration * 2000)
                before = switches(pong.pid)
                ping = hand.start("pub", [str(tools / "z_ping"), *translate(argv["pub"]),
                                          "-w", "0", "-n", str(n), str(size)])
                out = ping.communicate(timeout=duration * 10 + 30)[0]
                after = switches(pong.pid)
                rtts = sorted(int(m[1]) for m in re.finditer(r"rtt=(\d+)µs", out))
                trips, p50 = len(rtts), float(statistics.median(rtts))
            else:
                pong = hand.start("sub0", argv["sub0"], subprocess.DEVNULL)
                time.sleep(1.0)
                before = switches(pong.pid)
                ping = hand.start("pub", argv["pub"])
                out = ping.communicate(timeout=duration * 10 + 60)[0]
                after = switches(pong.pid)
                parsed = registry()["ddsperf"].parser.parse(out, "pub", True)
                trips = int(sum(v.value for v in parsed.all_values()
                                if v.metric == "roundtrips" and v.kind == "sample"))
                p50 = parsed.summary("latency_us_p50") or float("nan")
        finally:
            hand.stop()
        rows.append(f"| {name} | {size} B | {p50:.0f} | {after[0]} | "
                    f"{(after[1] - before[1]) / max(trips, 1):.1f} |")
    return rows


def mqtt_throughput(tb, run_dir: Path, size: int, qos: int, duration: float) -> float:
    """mosquitto_pub -l fed by `yes` with lines of `size` bytes, mosquitto_sub's output
    counted between the first second and the end."""
    hand = Hand(tb, run_dir)
    argv = hand.entry["argv"]["pub"]
    host, port = argv[argv.index("-broker") + 1].rsplit(":", 1)
    common = ["-h", host, "-p", port, "-t", "k8sdds", "-q", str(qos)]
    with tempfile.TemporaryDirectory() as tmp:
        got = Path(tmp) / "sub.out"
        try:
            hand.hub("broker", int(port))
            with open(got, "w") as sink:
                hand.start("sub0", ["mosquitto_sub", *common], sink)
                time.sleep(0.5)
                hand.start("pub", ["sh", "-c", 'yes "$0" | exec mosquitto_pub "$@" -l',
                                   "x" * size, *common], subprocess.DEVNULL)
                time.sleep(1.0)
                t0, n0 = time.monotonic(), got.stat().st_size
                time.sleep(max(duration - 1.0, 1.0))
                t1, n1 = time.monotonic(), got.stat().st_size
        finally:
            hand.stop()
    return (n1 - n0) / (size + 1) / (t1 - t0) * size * 8 / 1e6


def reference_figure(tb, run_dir: Path, tools: Path, engine: str, label: str, size: int,
                     metric: str, duration: float) -> tuple[float, float | None]:
    """The reference tool's figure for one case (and, for Zenoh's round trip, the same with
    --express, as k8sdds-zenoh's ping and pong are)."""
    if engine == "mqtt":
        return mqtt_throughput(tb, run_dir, size, int(label[-1]), duration), None
    if metric == "throughput_mbps":
        return zenoh_throughput(tb, run_dir, tools, size, duration), None
    return (zenoh_round_trip(tb, run_dir, tools, size, duration),
            zenoh_round_trip(tb, run_dir, tools, size, duration, express=True))


def k8sdds_figure(tmp: str, row: str, duration: float, metric: str) -> tuple[float, Path]:
    sch = Path(tmp) / "one.csv"
    sch.write_text(HEADER + row + "\n")
    out = k8sdds("run", "--sch", str(sch), "--datapath", "host", "--duration", f"{duration:g}",
                 "--out", tmp, "--quiet", "--no-plot", "--testbed", TESTBED)
    run_dir = Path(out["run_dir"])
    df = pd.read_csv(run_dir / "results.csv")
    role = "pub" if metric == "latency_us_p50" else "sub0"
    got = df[(df.kind == "summary") & (df.metric == metric) & (df.role == role)].value
    if got.empty:
        raise SystemExit(f"k8sdds gave no {metric} for {row}: {run_dir}")
    return float(got.iloc[0]), run_dir


METRICS = {"throughput": ("false", "throughput_mbps"), "round-trip": ("true", "latency_us_p50")}


def cases(only: list[str], payloads: list[int], metrics: list[str], topologies: list[str]):
    """(engine, label, size, schedule row, metric) for every comparison asked for."""
    for size in payloads:
        if "zenoh" in only:
            for topology in topologies:
                for latency, metric in (METRICS[m] for m in metrics):
                    yield ("zenoh", f"zenoh ({topology})", size,
                           f"zenoh,tcp,{topology},{size},false,1,false,0,{latency}", metric)
        if "mqtt" in only and "throughput" in metrics:
            for qos, effort in ((0, "true"), (1, "false")):
                yield ("mqtt", f"mqtt QoS {qos}", size,
                       f"mqtt,tcp,,{size},false,1,{effort},0,false", "throughput_mbps")


def explain(tb, tools: Path, payloads: list[int], duration: float) -> None:
    print("| tools | payload | p50 (µs) | echo side's threads | its wake-ups per round trip "
          "| k8sdds' p50 of the same (µs) |\n|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for size in payloads:
            zenoh, zenoh_dir = k8sdds_figure(tmp, f"zenoh,tcp,peer,{size},false,1,false,0,"
                                             "true", duration, "latency_us_p50")
            dds, dds_dir = k8sdds_figure(tmp, f"ddsperf,udp,,{size},false,1,false,0,true",
                                         duration, "latency_us_p50")
            for line, ours in zip(where_time_goes(tb, zenoh_dir, dds_dir, tools, size,
                                                  duration), (zenoh, dds), strict=True):
                print(f"{line} {ours:.0f} |", flush=True)


def routers(tb, tools: Path, payloads: list[int], pairs: int, duration: float) -> None:
    """zenohd against k8sdds-zenoh's own router mode (the same zenoh crate, `mode: router`;
    the router k8sdds runs), the same reference clients through each, in turn."""
    theirs = [str(zenohd()), "--listen", "tcp/0.0.0.0:7447", "--no-multicast-scouting"]
    print("| payload | metric | zenohd | k8sdds-zenoh -mode router | ratio (95 % interval; "
          "Welch p) |\n|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for size in payloads:
            for latency, metric in METRICS.values():
                _, run_dir = k8sdds_figure(tmp, f"zenoh,tcp,routed,{size},false,1,false,0,"
                                           f"{latency}", duration, metric)
                measure = zenoh_throughput if metric == "throughput_mbps" else zenoh_round_trip
                got: dict[str, list[float]] = {"zenohd": [], "own": []}
                for i in range(pairs):
                    for name in (("zenohd", "own") if i % 2 == 0 else ("own", "zenohd")):
                        got[name].append(measure(tb, run_dir, tools, size, duration,
                                                 router=theirs if name == "zenohd" else None))
                ratio, half, p = ratio_interval(got["own"], got["zenohd"])
                print(f"| {size} B | {metric} | {statistics.mean(got['zenohd']):.0f} | "
                      f"{statistics.mean(got['own']):.0f} | **{ratio:.2f}** (±{half:.0%}; "
                      f"p={p:.2f}) |", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=5)
    ap.add_argument("--duration", type=float, default=5, help="seconds per measurement")
    ap.add_argument("--only", default="zenoh,mqtt")
    ap.add_argument("--payloads", default="64,1024,16384")
    ap.add_argument("--metrics", default="throughput,round-trip",
                    help="throughput, round-trip (Zenoh's; MQTT's reference has no round trip)")
    ap.add_argument("--topologies", default="peer,routed", help="Zenoh's: peer, routed")
    ap.add_argument("--write", type=Path, help="also write the table as k8sdds' record of it "
                    "(k8sdds/analysis/references.csv), which the report shows")
    ap.add_argument("--routers", action="store_true",
                    help="only zenohd against k8sdds-zenoh's router mode, the reference "
                    "clients through each")
    ap.add_argument("--explain", action="store_true",
                    help="only where a round trip's time goes: threads and wake-ups of Zenoh's "
                    "and DDS's echo sides, by hand, peer to peer")
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("run as root: the emulated backend needs network namespaces")
    only = args.only.split(",")
    payloads = [int(p) for p in args.payloads.split(",")]
    if "mqtt" in only and shutil.which("mosquitto_sub") is None:
        sys.exit("the MQTT reference needs mosquitto's clients: apt-get install "
                 "mosquitto-clients")
    tools = zenoh_tools() if "zenoh" in only else Path()
    started = time.monotonic()
    tb = Testbed(default_nodes(4, name=TESTBED))
    tb.up()
    tb.use_datapath("host")
    if args.explain or args.routers:
        try:
            if args.explain:
                explain(tb, tools, payloads, args.duration)
            if args.routers:
                routers(tb, tools, payloads, args.pairs, args.duration)
        finally:
            tb.down()
        return
    written = []
    print("| middleware | payload | metric | k8sdds | reference tool | ratio (95 % interval; "
          "Welch p) |\n|---|---|---|---|---|---|")
    try:
        for engine, label, size, row, metric in cases(only, payloads, args.metrics.split(","),
                                                       args.topologies.split(",")):
            ours, theirs, express = [], [], []
            run_dir = None
            with tempfile.TemporaryDirectory() as tmp:
                for i in range(args.pairs):
                    # in turn k8sdds first and the tool first (with the last run's endpoints)
                    steps = ("tool", "k8sdds") if i % 2 and run_dir else ("k8sdds", "tool")
                    for step in steps:
                        if step == "k8sdds":
                            figure, run_dir = k8sdds_figure(tmp, row, args.duration, metric)
                            ours.append(figure)
                            continue
                        got, fast = reference_figure(tb, run_dir, tools, engine, label, size,
                                                     metric, args.duration)
                        theirs.append(got)
                        if fast is not None:
                            express.append(fast)
            ratio, half, p = ratio_interval(ours, theirs)
            unit = "Mb/s" if metric == "throughput_mbps" else "µs p50"
            extra = (f"; with --express: {statistics.mean(express):.0f}" if express else "")
            print(f"| {label} | {size} B | {unit} | {statistics.mean(ours):.0f} | "
                  f"{statistics.mean(theirs):.0f}{extra} | **{ratio:.2f}** (±{half:.0%}; "
                  f"p={p:.2f}) |", flush=True)
            written.append({"middleware": label, "data_len": size, "metric": metric,
                            "k8sdds": f"{statistics.mean(ours):.1f}",
                            "reference": f"{statistics.mean(theirs):.1f}",
                            "tool": TOOLS[engine, metric], "half": f"{half:.3f}",
                            "pairs": args.pairs, "measured": MEASURED.format(
                                date=time.strftime("%Y-%m-%d"), duration=args.duration)})
    finally:
        tb.down()
    if args.write:
        with open(args.write, "w", newline="") as f:
            out = csv.DictWriter(f, fieldnames=list(written[0]))
            out.writeheader()
            out.writerows(written)
    print(f"\nwall time: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
