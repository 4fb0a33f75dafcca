#!/usr/bin/env python3
"""How closely the emulated Raspberry Pi 3B follows the real one, cell by cell against the
published K8sDDS data (run as root).

The table: for every cell the published tree has (UDP at 64 B ... 16 KiB for host,
flannel-hostgw, kube-router, flannel-vxlan, weave and weave-encrypted; TCP, TLS and DDS
Security over UDP and over TCP at 1 KiB and 16 KiB), the tree's throughput as a ratio to UDP
over the host's network at the same payload, beside the emulated ratio on `rpi3b` (median
over the rounds, with its range) and the difference. Throughput tests, one subscriber,
reliable, unicast, no batching. The last line counts the cells within ±0.10.

A second table per engine, from the same runs: the publisher's CPU per message as a ratio to
UDP host's at the same payload (UDP cells), the tree's beside the emulated. The tree's is
Perftest's own print: its process's CPU share of the Pi's 4 cores over the subscriber's
samples a second (`pub_us` in published.csv); the emulated is k8sdds' `cpu_per_message_us`
(the publisher's process as the kernel accounted it). Its last line counts the cells the
goal names: 256 B and 1 KiB on flannel-hostgw, kube-router, flannel-vxlan and weave.

The tree's ratios come from the tree itself, through k8sdds' importer: `--tree DIR` takes
the published `Data/` folder (`git archive HEAD Data` of VUZhuangweiKang/K8sDDS), or a
folder of runs `k8sdds import k8sdds-data` made; without it, the figures shipped in
k8sdds/analysis/published.csv (written by `--tree DIR --write-tree`) are used.

The emulated ratios are measured in rounds: each round one `k8sdds run` of every cell's
test on every datapath in turn (a slow stretch of the machine costs them alike), ratios
taken within the round. The `rpi3b` budget is calibrated first, in the same sitting (`k8sdds
testbed calibrate`, about 3 min; `--no-calibrate` keeps the installed one). Then the `cloud`
profile's order (bare > routed > VXLAN > encrypted) is checked.

`--engine ddsperf,rtiperftest` measures the table with each engine in turn within every
round (Perftest on Cyclone DDS, `make perftest`, beside ddsperf: both run Cyclone DDS, so a
cell that moves between them moved with the program), prints one table per engine and then
the cells whose ratios differ between the engines by more than ±0.10.

`--write-known` writes the measured cells of the first engine into the package's known error
(k8sdds/analysis/known_error.csv), each with the sitting's budget and date.

`--round-trip` adds, per engine, the round trip's median (latency tests, one subscriber, UDP,
at 64 B and 1 KiB, in rounds of their own after the throughput rounds) as a ratio to the
host's, beside the tree's latency tests' (`rtt_p50_us` in published.csv: k8sdds' round
trip, Perftest's printed one-way figure doubled by the importer), within ±0.15.

`--quick` measures the 1 KiB UDP row of the five datapaths only (after calibrating, in
rounds) and prints each ratio beside the published one with the wall time: the check to run
before trusting the emulator on a new machine.

`--profile rpi3b-armhf` measures the Pi running its own armhf programs under qemu-user (its
CPU budget and its kernel's share at the Pi's pace both calibrated first), `rpi3b` (the
default) the Pi running this machine's programs under the budget alone.

Usage: .venv/bin/python benchmarks/fidelity.py [--tree DIR] [--write-tree] [--tree-only]
       [--profile rpi3b|rpi3b-armhf] [--rounds 3] [--duration 5] [--udp-only] [--quick]
       [--no-calibrate] [--no-cloud] [--engine ddsperf[,rtiperftest]] [--write-known]
       [--round-trip]
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
from common import k8sdds, need_root  # benchmarks/common.py
from fidelity_cells import (
    DATAPATHS,
    KEY,
    OTHER_PAYLOADS,
    PAYLOADS,
    PI_CORES,
    RTT_PAYLOADS,
    RTT_WITHIN,
    TRANSPORTS,
    WITHIN,
    compare,
    count_line,
    known,
    over_rounds,
    pub_cpu,
    ratios,
    round_trip,
    throughput,
)

from k8sdds.analysis import known_error, published
from k8sdds.testbed.calibration import BOARDS
from k8sdds.testbed.profiles import resolve

SHIPPED = published.DATA  # the package's published cells
CLOUD_DATAPATHS = ("host", "flannel-hostgw", "flannel-vxlan", "weave-encrypted")
COLUMNS = "dataLen,multicast,numSubscribers,bestEffort,batchSize,transport,secure\n"


def tree_cells(where: Path) -> pd.DataFrame:
    """The tree's cells (transport, datapath, data_len, mbps, ratio) from a Data/ folder
    (imported here) or a folder of imported runs."""
    runs = sorted(r for r in where.glob("*/results.csv")
                  if (r.parent / "manifest.json").is_file())  # k8sdds' runs, not the tree's
    if not runs:
        with tempfile.TemporaryDirectory() as tmp:
            done = subprocess.run([sys.executable, "-m", "k8sdds", "import", "k8sdds-data",
                                   str(where), "--out", tmp], capture_output=True, text=True)
            if done.returncode != 0:
                sys.exit(f"k8sdds import k8sdds-data {where} failed:\n{done.stderr}")
            return tree_cells(Path(tmp))
    results = pd.concat(pd.read_csv(r) for r in runs)
    cells = ratios(throughput(results))
    pub = pub_cpu(results, PI_CORES)  # the study's Perftest printed its share of 4 cores
    return cells.merge(pub, on=KEY, how="left").merge(round_trip(results), on=KEY,
                                                       how="left")


def schedule(udp_only: bool, payloads: tuple[int, ...] = PAYLOADS) -> str:
    """One throughput test per (transport, payload) the table has."""
    rows = [f"{n},false,1,false,0,udp,false\n" for n in payloads]
    if not udp_only:
        rows += [f"{n},false,1,false,0,{t},{str(s).lower()}\n"
                 for name, t, s in TRANSPORTS[1:] for n in OTHER_PAYLOADS]
    return COLUMNS + "".join(rows)


def one_round(profile: str, datapaths: tuple[str, ...], sch: Path, duration: float,
              testbed: str, out: Path, engine: str = "ddsperf") -> pd.DataFrame:
    """Each cell's throughput (mbps) and publisher CPU per message (pub_us) in one run."""
    done = k8sdds("run", "--sch", str(sch), "--datapath", ",".join(datapaths), "--profile",
                  profile, "--duration", f"{duration:g}", "--repeats", "1", "--out",
                  str(out), "--testbed", testbed, "--no-plot", "--engine", engine)
    results = pd.read_csv(Path(done["run_dir"]) / "results.csv")
    return throughput(results).merge(pub_cpu(results), on=KEY, how="left")


def cpu_rounds(rounds: list[pd.DataFrame]) -> pd.DataFrame:
    """The publisher's CPU per message as a ratio to UDP host's, over the rounds (UDP)."""
    return over_rounds([ratios(r[(r.transport == "UDP") & r.pub_us.notna()], "pub_us")
                        for r in rounds])


def rtt_table(tree: pd.DataFrame, profile: str, engine: str, rounds: int, duration: float,
              tmp: Path) -> pd.DataFrame:
    """The round trip's median as a ratio to UDP host's at 64 B and 1 KiB, each round one
    latency run of every datapath, beside the tree's; judged within RTT_WITHIN."""
    sch = tmp / "rtt.csv"
    sch.write_text(COLUMNS.replace("\n", ",latencyTest\n") + "".join(
        f"{n},false,1,false,0,udp,false,true\n" for n in RTT_PAYLOADS))
    measured = []
    for i in range(1, rounds + 1):
        print(f"round trip, round {i}/{rounds}: {engine}", file=sys.stderr, flush=True)
        done = k8sdds("run", "--sch", str(sch), "--datapath", ",".join(DATAPATHS),
                      "--profile", profile, "--duration", f"{duration:g}", "--repeats", "1",
                      "--out", str(tmp), "--testbed", "kdfid", "--no-plot", "--engine",
                      engine)
        cells = round_trip(pd.read_csv(Path(done["run_dir"]) / "results.csv"))
        measured.append(ratios(cells, "rtt_p50_us"))
    udp = tree[(tree.transport == "UDP") & tree.rtt_p50_us.notna()
               & tree.data_len.isin(RTT_PAYLOADS)]
    table = compare(ratios(udp, "rtt_p50_us"), over_rounds(measured))
    table["within"] = table.difference.abs() <= RTT_WITHIN
    return table


def cpu_tree(tree: pd.DataFrame) -> pd.DataFrame:
    """The tree's UDP cells with the publisher's CPU per message as the ratio."""
    udp = tree[(tree.transport == "UDP") & tree.pub_us.notna()]
    return ratios(udp, "pub_us")


def cpu_count_line(table: pd.DataFrame) -> str:
    """The CPU table's goal: within ±0.10 at 256 B and 1 KiB on the four unencrypted pod
    paths."""
    goal = table[table.data_len.isin((256, 1024)) & table.datapath.isin(
        ("flannel-hostgw", "kube-router", "flannel-vxlan", "weave")) & table["median"].notna()
        & ~table.fitted]
    counted = table[table["median"].notna() & ~table.fitted]
    return (f"publisher CPU per message within ±{WITHIN:.2f} of the tree's ratio: "
            f"{int(goal.within.sum())} of {len(goal)} cells at 256 B and 1 KiB on "
            "flannel-hostgw, kube-router, flannel-vxlan and weave; "
            f"{int(counted.within.sum())} of {len(counted)} in all; the cells the "
            "calibration was fitted on in neither")


def print_table(table: pd.DataFrame, within: float = WITHIN) -> None:
    print("| transport | datapath | payload | tree | emulated | range over rounds | "
          f"mean, 95 % interval | difference | within ±{within:.2f} |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in table.itertuples():
        if pd.isna(r.median):
            print(f"| {r.transport} | {r.datapath} | {r.data_len} | {r.tree:.2f} | - | - "
                  "| - | - | not measured |")
            continue
        print(f"| {r.transport} | {r.datapath} | {r.data_len} | {r.tree:.2f} | "
              f"{r.median:.2f} | {r.low:.2f} .. {r.high:.2f} | {r.mean:.2f} ± "
              f"{r.half_ci:.2f} | {r.difference:+.2f} | "
              f"{'fitted on: not counted' if r.fitted else 'yes' if r.within else 'no'} |")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tree", type=Path, help="the published Data/ folder, or a folder of "
                    "runs k8sdds imported from it [the figures in k8sdds/analysis/published.csv]")
    ap.add_argument("--write-tree", action="store_true",
                    help="write the tree's figures into k8sdds/analysis/published.csv "
                    "(needs --tree)")
    ap.add_argument("--tree-only", action="store_true", help="the tree's ratios only")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of emulated runs")
    ap.add_argument("--duration", type=float, default=5, help="seconds per test (the "
                    "study's)")
    ap.add_argument("--udp-only", action="store_true", help="the UDP cells only")
    ap.add_argument("--profile", default="rpi3b", choices=("rpi3b", "rpi3b-armhf"),
                    help="the emulated Pi: rpi3b (this machine's programs, the CPU budget "
                    "alone) or rpi3b-armhf (the Pi's own armhf programs under qemu-user, the "
                    "budget and the kernel's share at the Pi's pace) [rpi3b]")
    ap.add_argument("--calibrate", action=argparse.BooleanOptionalAction, default=True,
                    help="calibrate the profile in this sitting first (about 5 min; about "
                    "20 for rpi3b-armhf, with the kernel's share)")
    ap.add_argument("--cloud", action=argparse.BooleanOptionalAction, default=True,
                    help="check the cloud profile's order too")
    ap.add_argument("--engine", default="ddsperf",
                    help="engines, comma-separated, each run in every round "
                    "(ddsperf, rtiperftest) [ddsperf]")
    ap.add_argument("--write-known", action="store_true",
                    help="write the first engine's measured cells, with this sitting's "
                    "rpi3b budget and date, into k8sdds/analysis/known_error.csv (the "
                    "answer's known error)")
    ap.add_argument("--round-trip", action="store_true",
                    help="also the round trip's median as a ratio to host at 64 B and 1 KiB "
                    f"(latency tests, in rounds of their own), judged within "
                    f"±{RTT_WITHIN:.2f} of the tree's")
    ap.add_argument("--quick", action="store_true",
                    help="the 1 KiB UDP row only, no cloud check: the quick check before "
                    "trusting the emulator on a new machine (about 8 minutes with the "
                    "calibration)")
    args = ap.parse_args()
    if args.quick:
        args.udp_only, args.cloud = True, False
    if args.write_tree and not args.tree:
        sys.exit("--write-tree needs --tree DIR")
    tree = tree_cells(args.tree) if args.tree else pd.read_csv(SHIPPED)
    if args.write_tree:
        tree.sort_values(KEY).to_csv(SHIPPED, index=False, float_format="%.4g")
        print(f"wrote {SHIPPED} ({len(tree)} cells)", file=sys.stderr)
    if args.tree_only:
        print(tree.pivot_table(index=["transport", "data_len"], columns="datapath",
                               values="ratio")[list(DATAPATHS)].round(2).to_string())
        return
    need_root()
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        if args.calibrate:
            print(f"calibrating {args.profile} in this sitting (`k8sdds testbed calibrate`)",
                  file=sys.stderr, flush=True)
            cal = k8sdds("testbed", "calibrate", "--profile", args.profile, "--output",
                         str(Path(tmp) / "calibration.json"))
            os.environ["K8SDDS_CALIBRATION"] = cal["file"]  # every k8sdds call below
        run(args, tree, Path(tmp))
    print(f"\nwall time: {time.monotonic() - started:.0f} s")


def run(args: argparse.Namespace, tree: pd.DataFrame, tmp: Path) -> None:
    pi = resolve(args.profile)
    print(f"## {pi.name}: {pi.cpu:g} CPU ({pi.cpu_from})"
          + ("; the kernel's share at the Pi's pace, idle rules a packet: " + ", ".join(
              f"{d} {r}" for d, r in pi.hop_rules.items()) if pi.hop_rules else "")
          + "\n")
    sch = tmp / "cells.csv"
    sch.write_text(schedule(args.udp_only, (1024,) if args.quick else PAYLOADS))
    engines = [e.strip() for e in args.engine.split(",") if e.strip()]
    rounds: dict[str, list[pd.DataFrame]] = {e: [] for e in engines}
    raw: dict[str, list[pd.DataFrame]] = {e: [] for e in engines}
    for i in range(1, args.rounds + 1):
        for engine in engines:  # interleaved: each round runs every engine in turn
            print(f"round {i}/{args.rounds}: {engine}", file=sys.stderr, flush=True)
            raw[engine].append(one_round(pi.name, DATAPATHS, sch, args.duration, "kdfid",
                                         tmp, engine))
            rounds[engine].append(ratios(raw[engine][-1]))
    board = BOARDS.get(pi.board or "")
    fitted = frozenset({("UDP", board.hop_cell, board.payload)} if board and board.hop_cell
                       else ())  # the calibration's own target: in no score
    tables = {}
    for engine in engines:
        table = compare(tree, over_rounds(rounds[engine]), fitted)
        if args.udp_only:
            table = table[table.transport == "UDP"]
        if args.quick:
            table = table[table.data_len == 1024]
        tables[engine] = table
        print(f"### {pi.name} with {engine} against the published tree, {args.rounds} rounds, "
              f"{args.duration:g} s tests: ratio to UDP host at the same payload\n")
        print_table(table)
        print()
        print(count_line(table))
        print()
        cpu = compare(cpu_tree(tree), cpu_rounds(raw[engine]), fitted)
        if args.quick:
            cpu = cpu[cpu.data_len == 1024]
        print(f"### {pi.name} with {engine}: the publisher's CPU per message as a ratio to "
              "UDP host's at the same payload (the tree's: Perftest's CPU share of the Pi's "
              f"{PI_CORES} cores over its samples a second)\n")
        print_table(cpu)
        print()
        print(cpu_count_line(cpu))
        print()
        if args.round_trip:
            rtt = rtt_table(tree, pi.name, engine, args.rounds, args.duration, tmp)
            print(f"### {pi.name} with {engine}: the round trip's median as a ratio to UDP "
                  f"host's at the same payload (within ±{RTT_WITHIN:.2f})\n")
            print_table(rtt, RTT_WITHIN)
            print()
            print(f"round trip within ±{RTT_WITHIN:.2f} of the tree's ratio: "
                  f"{int(rtt.within.sum())} of {int(rtt['median'].notna().sum())} cells")
            print()
    for other in engines[1:]:
        print_moved(tables[engines[0]], tables[other], engines[0], other)
    table = tables[engines[0]]
    if args.write_known:
        path = known_error.DATA
        fresh = known(pd.read_csv(path), table, pi.name, pi.cpu,
                      datetime.date.today().isoformat())
        fresh.to_csv(path, index=False, float_format="%.4g")
        print(f"wrote {path} ({len(fresh)} cells; this sitting's at {pi.cpu:g} CPU)",
              file=sys.stderr)
    if args.cloud:
        cloud_order(args.duration, tmp)


def print_moved(first: pd.DataFrame, second: pd.DataFrame, a: str, b: str) -> None:
    """The cells whose emulated ratios differ between two engines by more than ±0.10, each
    with whether it is within ±0.10 of the tree with either engine."""
    both = first.merge(second, on=KEY + ["tree"], suffixes=(f"_{a}", f"_{b}"))
    both["moved"] = both[f"median_{b}"] - both[f"median_{a}"]
    moved = both[both.moved.abs() > WITHIN]
    print(f"### cells that move between {a} and {b} (by more than ±{WITHIN:.2f}): "
          f"{len(moved)} of {int(both.moved.notna().sum())}\n")
    print(f"| transport | datapath | payload | tree | {a} | {b} | moved | within with {a} | "
          f"within with {b} |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in moved.itertuples():
        d = r._asdict()
        print(f"| {r.transport} | {r.datapath} | {r.data_len} | {r.tree:.2f} | "
              f"{d[f'median_{a}']:.2f} | {d[f'median_{b}']:.2f} | {r.moved:+.2f} | "
              f"{'yes' if d[f'within_{a}'] else 'no'} | {'yes' if d[f'within_{b}'] else 'no'} |")
    print()


def cloud_order(duration: float, tmp: Path) -> None:
    sch = tmp / "cloud.csv"
    sch.write_text(COLUMNS + "1024,false,1,false,0,udp,false\n16384,false,1,false,0,udp,"
                   "false\n")
    runs = [one_round("cloud", CLOUD_DATAPATHS, sch, duration, "kdfidc", tmp)
            for _ in range(3)]
    med = pd.concat(runs).groupby(["data_len", "datapath"]).mbps.median().unstack()
    print("\n### cloud, median of 3 rounds (Mb/s)\n")
    for size in med.index:
        row = [med.loc[size, dp] for dp in CLOUD_DATAPATHS]
        ok = all(a > b for a, b in zip(row, row[1:], strict=False))
        print(f"- [{'x' if ok else ' '}] {size} B: bare > routed > VXLAN > encrypted "
              f"({' > '.join(f'{v:.0f}' for v in row)})")


if __name__ == "__main__":
    main()
