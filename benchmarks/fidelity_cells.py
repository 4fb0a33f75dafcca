"""The cells of the fidelity table: throughput of each transport, datapath and payload as a
ratio to UDP over the host's network at the same payload, from k8sdds results tables (the
published K8sDDS tree imported with `k8sdds import k8sdds-data`, or emulated runs). Pure:
frames in, frames out; benchmarks/fidelity.py does the I/O."""

from __future__ import annotations

import pandas as pd

# (label, results' transport, results' secure)
TRANSPORTS = (("UDP", "udp", False), ("TCP", "tcp", False), ("TLS", "tls", False),
              ("DDS Security/UDP", "udp", True), ("DDS Security/TCP", "tcp", True))
DATAPATHS = ("host", "flannel-hostgw", "kube-router", "flannel-vxlan", "weave",
             "weave-encrypted")
PAYLOADS = (64, 256, 1024, 4096, 16384)
OTHER_PAYLOADS = (1024, 16384)  # the transports other than UDP, compared at these
WITHIN = 0.10  # a cell matches when the ratios differ by at most this
KEY = ["transport", "datapath", "data_len"]


def wanted(transport: str, data_len: int) -> bool:
    """Whether the table has this cell: UDP at every payload, the others at two."""
    return data_len in (PAYLOADS if transport == "UDP" else OTHER_PAYLOADS)


def _cells(results: pd.DataFrame, metric: str, role: str, name: str,
           latency: bool = False) -> pd.DataFrame:
    """`metric` of the roles starting with `role` per cell (median of the rows that match:
    a test may appear in several of a tree's sweeps) of the throughput tests the table
    compares (`latency`: of the latency tests): one subscriber, reliable, unicast, no
    batching. Columns transport, datapath, data_len, `name`."""
    df = results[(results.kind == "summary") & (results.metric == metric)
                 & results.role.astype(str).str.startswith(role)]
    df = df[(df.num_subscribers == 1) & ~_bool(df.best_effort) & ~_bool(df.multicast)
            & (df.batch_size == 0) & (_bool(df.latency_test) == latency)]
    label = {(t, s): name for name, t, s in TRANSPORTS}
    df = df.assign(transport=[label.get((t, bool(s))) for t, s in
                              zip(df.transport, _bool(df.secure), strict=True)])
    df = df[df.transport.notna() & df.datapath.isin(DATAPATHS)]
    df = df[[wanted(t, int(n)) for t, n in zip(df.transport, df.data_len, strict=True)]]
    return (df.groupby(KEY).value.median().rename(name).reset_index())


def throughput(results: pd.DataFrame) -> pd.DataFrame:
    """Subscriber Mb/s per cell. Columns transport, datapath, data_len, mbps."""
    return _cells(results, "throughput_mbps", "sub", "mbps")


def round_trip(results: pd.DataFrame) -> pd.DataFrame:
    """The round trip's median (µs, k8sdds' definition: a whole round trip, whatever the
    engine printed) per cell of the latency tests. Column rtt_p50_us."""
    return _cells(results, "latency_us_p50", "pub", "rtt_p50_us", latency=True)


RTT_PAYLOADS = (64, 1024)  # the round trip's goal is judged at these
RTT_WITHIN = 0.15  # and within this of the tree's ratio to host


# the Pi 3B's BCM2837 has four Cortex-A53 cores, and Perftest prints its process's CPU as a
# share of all of them (srcCppCommon/CpuMonitor.cxx: `percent /= _numProcessors`)
PI_CORES = 4


def pub_cpu(results: pd.DataFrame, cores: int | None = None) -> pd.DataFrame:
    """The publisher's CPU per message per cell, µs (column pub_us): k8sdds' own figure
    (cpu_per_message_us), or, for a tree whose engine printed only its CPU share of
    `cores` cores (Perftest's cpu_pct), that share over the subscriber's samples a second."""
    if cores is None:
        return _cells(results, "cpu_per_message_us", "pub", "pub_us")
    share = _cells(results, "cpu_pct", "pub", "pct")
    rate = _cells(results, "samples_per_s", "sub", "rate")
    both = share.merge(rate, on=KEY)
    both["pub_us"] = both.pct / 100 * cores / both.rate * 1e6
    return both[KEY + ["pub_us"]]


def _bool(column: pd.Series) -> pd.Series:
    return column.astype(str).str.lower().isin(("true", "1"))


def ratios(cells: pd.DataFrame, column: str = "mbps") -> pd.DataFrame:
    """Each cell's `column` over UDP host's at its payload (the cells without one dropped).
    Adds the column ratio."""
    host = cells[(cells.transport == "UDP") & (cells.datapath == "host")].set_index(
        "data_len")[column]
    out = cells[cells.data_len.isin(host.index)].copy()
    out["ratio"] = out[column] / out.data_len.map(host)
    return out


def over_rounds(rounds: list[pd.DataFrame]) -> pd.DataFrame:
    """Each cell's ratio over the rounds (each a `ratios` frame): median, low, high, the
    number of rounds that had it, and the mean with the half width of its 95 % interval
    (k8sdds.analysis.stats.summarize; NaN from one round)."""
    from k8sdds.analysis.stats import summarize

    both = pd.concat([r.assign(round=i) for i, r in enumerate(rounds)])
    g = both.groupby(KEY).ratio
    s = g.apply(lambda v: summarize(list(v)))
    return pd.DataFrame({"median": g.median(), "low": g.min(), "high": g.max(),
                         "rounds": g.size(), "mean": s.map(lambda x: x.mean),
                         "half_ci": s.map(lambda x: (x.ci_high - x.ci_low) / 2)}
                        ).reset_index()


def compare(tree: pd.DataFrame, emulated: pd.DataFrame,
            fitted: frozenset[tuple[str, str, int]] = frozenset()) -> pd.DataFrame:
    """Every cell the tree has, beside the emulated ratio (`over_rounds`): the difference,
    whether it is within WITHIN, half the emulated range, and whether the calibration was
    fitted on it (`fitted`: (transport, datapath, data_len); counted in no score). Ordered
    by transport, datapath and payload as the study lays them out."""
    table = tree[KEY + ["ratio"]].rename(columns={"ratio": "tree"}).merge(
        emulated, on=KEY, how="left")
    table["fitted"] = [(t, d, int(n)) in fitted for t, d, n in
                       zip(table.transport, table.datapath, table.data_len, strict=True)]
    table["difference"] = table["median"] - table["tree"]
    table["within"] = table.difference.abs() <= WITHIN
    table["half_range"] = (table.high - table.low) / 2
    order = {name: i for i, (name, _, _) in enumerate(TRANSPORTS)}
    table["_t"] = table.transport.map(order)
    table["_d"] = table.datapath.map({d: i for i, d in enumerate(DATAPATHS)})
    table = table[~((table.transport == "UDP") & (table.datapath == "host"))]  # 1 by rule
    return table.sort_values(["_t", "_d", "data_len"]).drop(columns=["_t", "_d"]).reset_index(
        drop=True)


def count_line(table: pd.DataFrame) -> str:
    """The table's last line: cells within WITHIN, UDP (with and without kube-router, whose
    cells an earlier emulation could not tell from flannel-hostgw's) and the others at 1 KiB;
    the cells the calibration was fitted on are named and counted in none of them."""
    done = table["median"].notna()
    on = table["fitted"] if "fitted" in table else pd.Series(False, index=table.index)
    fitted, measured = table[done & on], table[done & ~on]
    udp = measured[measured.transport == "UDP"]
    udp_no_kr = udp[udp.datapath != "kube-router"]
    kib = measured[(measured.transport != "UDP") & (measured.data_len == 1024)]
    steady = (measured.half_range <= 0.05).sum()
    return (f"within ±{WITHIN:.2f}: {int(measured.within.sum())} of {len(measured)} cells; "
            f"UDP {int(udp.within.sum())} of {len(udp)} ({int(udp_no_kr.within.sum())} of "
            f"{len(udp_no_kr)} without kube-router); other transports at 1 KiB "
            f"{int(kib.within.sum())} of {len(kib)}; range over rounds within ±0.05: "
            f"{int(steady)} of {len(measured)}"
            + "".join(f"; not counted, fitted on: {r.transport} {r.datapath} {r.data_len} B"
                      for r in fitted.itertuples()))


KNOWN = ["profile", "transport", "datapath", "data_len", "emulated", "cpu", "measured",
         "fitted"]


def known(existing: pd.DataFrame, table: pd.DataFrame, profile: str, cpu: float,
          measured: str) -> pd.DataFrame:
    """The package's known error (k8sdds/analysis/known_error.csv) with this sitting's
    cells: each measured cell's median ratio, with the CPU budget `profile` had in this
    sitting and its date; a cell this sitting did not measure keeps its own sitting. UDP host
    is 1 by rule."""
    rows = table[table["median"].notna()].assign(
        profile=profile, emulated=lambda t: t["median"].round(2), cpu=cpu, measured=measured)
    rows["fitted"] = rows["fitted"] if "fitted" in rows else False
    existing = existing.assign(fitted=existing["fitted"] if "fitted" in existing else False)
    host = pd.DataFrame([{"profile": profile, "transport": "UDP", "datapath": "host",
                          "data_len": n, "emulated": 1.0, "cpu": cpu, "measured": measured,
                          "fitted": False}
                         for n in sorted(set(rows[rows.transport == "UDP"].data_len))])
    fresh = pd.concat([rows[KNOWN], host[KNOWN]] if not host.empty else [rows[KNOWN]])
    keys = ["profile"] + KEY
    kept = existing[~existing.set_index(keys).index.isin(fresh.set_index(keys).index)]
    return pd.concat([kept[KNOWN], fresh]).sort_values(keys).reset_index(drop=True)
