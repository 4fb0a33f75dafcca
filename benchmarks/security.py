#!/usr/bin/env python3
"""The throughput cost of TLS and DDS Security against plain UDP (run as root):

1 KiB ddsperf throughput, publisher on node1 and subscriber on node2, on flannel-hostgw over
UDP, TCP, TLS (Cyclone's TCP + SSL), UDP + DDS Security and TLS + DDS Security; and, for the
encrypted datapath, weave against weave-encrypted (UDP). Every configuration runs --repeats
times in one `k8sdds run`; the table gives mean Mb/s per subscriber, the 95 % confidence
interval, and the change against plain UDP on the same datapath (weave-encrypted: against
weave), as the report's security section computes it.

Usage: .venv/bin/python benchmarks/security.py [--duration 5] [--repeats 3]
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from common import k8sdds  # benchmarks/common.py

from k8sdds.analysis import load, tables

ROWS = [  # datapath, transport, secure
    ("flannel-hostgw", "udp", "false"), ("flannel-hostgw", "tcp", "false"),
    ("flannel-hostgw", "tls", "false"), ("flannel-hostgw", "udp", "true"),
    ("flannel-hostgw", "tls", "true"), ("weave", "udp", "false"),
    ("weave-encrypted", "udp", "false"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sch = Path(tmp) / "security.csv"
        sch.write_text("datapath,dataLen,multicast,numSubscribers,bestEffort,batchSize,"
                       "transport,secure\n" +
                       "".join(f"{dp},1024,false,1,false,0,{tr},{sec}\n"
                               for dp, tr, sec in ROWS))
        out = k8sdds("run", "--sch", str(sch), "--duration", f"{args.duration:g}",
                     "--repeats", str(args.repeats), "--out", tmp, "--no-plot", "--testbed",
                     "kdsec")
        runs = load.load([Path(out["run_dir"])])
        thr = tables.throughput(runs)
        sec = tables.security(thr, tables.latency(runs))
    ci = thr.set_index(["datapath", "transport", "secure"])
    print(f"1 KiB, cross-node, {args.repeats} x {args.duration:g} s per configuration, "
          f"wall {out['wall_s']:.0f} s\n")
    print("| datapath | protection | Mb/s (mean) | 95 % CI | vs plain UDP |")
    print("|---|---|---|---|---|")
    for _, r in sec.iterrows():
        transport = r["protection"].split(" + ")[0].lower()
        key = (r["datapath"], transport, "DDS Security" in r["protection"])
        row = ci.loc[key]
        change = "-" if r["vs_plain_pct"] != r["vs_plain_pct"] or r["vs_plain_pct"] is None \
            else f"{r['vs_plain_pct']:+.0f} %"
        print(f"| {r['datapath']} | {r['protection']} | {r['throughput_mbps']:.0f} | "
              f"{row['ci_low']:.0f}-{row['ci_high']:.0f} | {change} |")


if __name__ == "__main__":
    main()
