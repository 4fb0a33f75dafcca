#!/usr/bin/env python3
"""The path matrix for the note (run as root): `k8sdds baseline` on host, flannel-hostgw,
flannel-vxlan and flannel-wireguard (encrypted), every path, ping + iperf3 + qperf + ddsperf,
then the matrix and DDS efficiency tables as the report computes them, and whether the
cross-node ordering matches the CNI studies (bare > routed > VXLAN > encrypted).

Usage: .venv/bin/python benchmarks/baseline.py [--duration 5] [--repeats 1]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from common import k8sdds  # benchmarks/common.py

from k8sdds.analysis import load, tables

DATAPATHS = ["host", "flannel-hostgw", "flannel-vxlan", "flannel-wireguard"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--repeats", type=int, default=1)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = k8sdds("baseline", "--datapath", ",".join(DATAPATHS), "--duration",
                     f"{args.duration:g}", "--repeats", str(args.repeats), "--out", tmp,
                     "--testbed", "kdbase")
        runs = load.load([Path(out["run_dir"])])
        matrix = tables.matrix(runs)
        eff = tables.efficiency(runs)
    print(f"{len(DATAPATHS)} datapaths, {args.repeats} x {args.duration:g} s per test, "
          f"wall {out['wall_s']:.0f} s\n")
    print(_markdown(matrix, "{:.0f}"))
    print()
    print(_markdown(eff, "{:.2f}"))
    cross = matrix[matrix.path.isin(["node-node", "pod-pod-cross-node"])]
    cross = cross[(cross.datapath == "host") | (cross.path == "pod-pod-cross-node")]
    print("\ncross-node ordering (host node-node, others pod to pod):")
    for col in ("iperf3 TCP (Mb/s)", "qperf TCP (Mb/s)", "ddsperf (Mb/s)"):
        order = cross.sort_values(col, ascending=False).datapath.tolist()
        print(f"  {col}: {' > '.join(order)}  (studies: {' > '.join(DATAPATHS)}; "
              f"{'same' if order == DATAPATHS else 'differs'})")
    for col in ("ping p50 (µs)", "qperf UDP RTT (µs)"):
        order = cross.sort_values(col).datapath.tolist()
        print(f"  {col} (lower first): {' < '.join(order)}  "
              f"({'same' if order == DATAPATHS else 'differs'})")


def _markdown(df, fmt: str) -> str:
    cells = [[fmt.format(v) if isinstance(v, float) else str(v) for v in row]
             for row in df.itertuples(index=False)]
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    return "\n".join(lines + ["| " + " | ".join(c) + " |" for c in cells])


if __name__ == "__main__":
    main()
