#!/usr/bin/env python3
"""RTI Perftest beside ddsperf, both on Cyclone DDS (run as root, on the emulated backend,
after `make perftest`): the same rows with engine=rtiperftest and engine=ddsperf, on host and
flannel-vxlan, throughput at 64 B to 16 KiB (reliable, one subscriber) and latency at 64 B to
1 KiB, in one run whose repeats go in rounds (every test's first repeat, then every second,
...), so that a drift of the machine falls on both engines alike. Both run the same Cyclone
DDS, so a difference is the program's.

Per cell: each engine's mean with its 95 % interval over the repeats (Student's t), and the
ratio Perftest / ddsperf with its interval (delta method) and Welch's p. Latency is the round
trip's median, as k8sdds stores every engine's (both programs print half of it; the parsers
double it: k8sdds/parsers/latency.py).

`--round-trip-only`: the 64 B round trip alone, on host. `--one-cpu N`: the whole run on
CPU N (`taskset -c N`: ping, pong and k8sdds on one core, no wake-up crosses to another CPU),
to tell the programs apart from where the scheduler puts their threads.

Usage: .venv/bin/python benchmarks/perftest_vs_ddsperf.py [--repeats 3] [--duration 5]
       [--round-trip-only] [--one-cpu N]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import pandas as pd
from common import k8sdds, mean_interval, need_root, ratio_interval  # benchmarks/common.py

TESTBED = "kdpv"
HEADER = "engine,dataLen,multicast,numSubscribers,bestEffort,batchSize,latencyTest\n"
THROUGHPUT = (64, 256, 1024, 4096, 16384)
LATENCY = (64, 256, 1024)
ENGINES = ("rtiperftest", "ddsperf")
DATAPATHS = ("host", "flannel-vxlan")


def schedule(throughput=THROUGHPUT, latency=LATENCY) -> str:
    rows = [f"{e},{n},false,1,false,0,false\n" for n in throughput for e in ENGINES]
    rows += [f"{e},{n},false,1,false,0,true\n" for n in latency for e in ENGINES]
    return HEADER + "".join(rows)


def values(s: pd.DataFrame, engine: str, dp: str, size: int, latency: bool) -> list[float]:
    """Each repeat's figure: sub0's Mb/s, or the round trip's median in µs."""
    mine = s[(s.engine == engine) & (s.datapath == dp) & (s.data_len == size)
             & (s.latency_test == latency)]
    if not latency:
        got = mine[(mine.metric == "throughput_mbps") & (mine.role == "sub0")]
        return list(got.sort_values("repeat").value)
    got = mine[(mine.metric == "latency_us_p50") & (mine.role == "pub")]
    return list(got.sort_values("repeat").value)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3, help="repeats of each test (rounds)")
    ap.add_argument("--duration", type=float, default=5, help="seconds per test")
    ap.add_argument("--round-trip-only", action="store_true",
                    help="the 64 B round trip alone, on host")
    ap.add_argument("--one-cpu", type=int, default=None, metavar="N",
                    help="run everything on CPU N (taskset -c N)")
    args = ap.parse_args()
    sizes = ((), (64,)) if args.round_trip_only else (THROUGHPUT, LATENCY)
    datapaths = ("host",) if args.round_trip_only else DATAPATHS
    prefix = ("taskset", "-c", str(args.one_cpu)) if args.one_cpu is not None else ()
    need_root()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        sch = Path(tmp) / "side-by-side.csv"
        sch.write_text(schedule(*sizes))
        out = k8sdds("run", "--sch", str(sch), "--datapath", ",".join(datapaths),
                     "--repeats", str(args.repeats), "--order", "rounds", "--duration",
                     f"{args.duration:g}", "--out", tmp, "--quiet", "--no-plot", "--testbed",
                     TESTBED, prefix=prefix)
        run = Path(out["run_dir"])
        df = pd.read_csv(run / "results.csv")
        import json

        tools = json.loads((run / "manifest.json").read_text()).get("tools", {})
    s = df[df.kind == "summary"]
    print(f"Perftest: {tools.get('rtiperftest', '?')}; {args.repeats} repeats in rounds, "
          f"{args.duration:g} s tests, 95 % intervals"
          + (f"; all on CPU {args.one_cpu}" if args.one_cpu is not None else "") + "\n")
    print("| datapath | figure | payload | Perftest | ddsperf | Perftest / ddsperf "
          "(95 % interval; Welch p) |\n|---|---|---|---|---|---|")
    for dp in datapaths:
        for latency, payloads in zip((False, True), sizes, strict=True):
            for size in payloads:
                a = values(s, "rtiperftest", dp, size, latency)
                b = values(s, "ddsperf", dp, size, latency)
                if len(a) > 1 and len(b) > 1:
                    ratio, half, p = ratio_interval(a, b)
                    compared = f"{ratio:.2f} (±{half:.0%}; p={p:.2f})"
                else:
                    compared = "-"
                figure = "p50 round trip (µs)" if latency else "throughput (Mb/s)"
                print(f"| {dp} | {figure} | {size} B | {mean_interval(a)} | "
                      f"{mean_interval(b)} | {compared} |", flush=True)
    print(f"\nwall time: {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
