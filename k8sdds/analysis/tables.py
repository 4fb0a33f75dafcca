"""Tables that answer the question: figures per datapath and payload, and the overhead of
each datapath against `host`."""

from __future__ import annotations

import pandas as pd

from k8sdds import baseline, model
from k8sdds.analysis import verdict
from k8sdds.analysis.load import (
    MEASURING,
    PARAMS,
    ROUND_TRIPS,
    Runs,
    intervals,
    pooled_quantile,
    repeat_values,
)
from k8sdds.analysis.stats import summarize
from k8sdds.analysis.verdict import Side

PERCENTILES = (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))


def payload(n: int) -> str:
    """A payload as people write it: 1 KiB, 16 KiB, 256 B."""
    return f"{n // 1024} KiB" if n >= 1024 and n % 1024 == 0 else f"{n} B"
MIN_SAMPLES = 10  # a percentile q needs at least MIN_SAMPLES / (1 - q) samples to be shown


def _varying(df: pd.DataFrame, exclude: tuple[str, ...] = ()) -> list[str]:
    """The test parameters that take more than one value in `df`."""
    return [p for p in PARAMS if p not in exclude and df[p].nunique(dropna=False) > 1]


def base(table: pd.DataFrame, keep: tuple[str, ...] = ("datapath", "data_len")) -> pd.DataFrame:
    """The payload sweep: rows whose other parameters take their most common value. The
    `host` baseline keeps its own path (node-node where the CNIs run pod to pod): it is the
    reference every figure draws."""
    out = table
    for p in PARAMS:
        if p not in keep and p in out and out[p].nunique(dropna=False) > 1:
            if p == "path" and "datapath" in out:
                others = out[out["datapath"] != model.HOST_NETWORK][p]
                mode = (others if not others.empty else out[p]).mode(dropna=False).iloc[0]
                out = out[(out[p] == mode) | (out["datapath"] == model.HOST_NETWORK)]
            else:
                out = out[out[p] == out[p].mode(dropna=False).iloc[0]]
    return out


def throughput(runs: Runs, metric: str = "throughput_mbps",
               roles: str | tuple[str, ...] = MEASURING) -> pd.DataFrame:
    """Per test parameters: repeats, mean, std, 95 % CI and coefficient of variation of
    `metric` (each repeat's mean over the `roles`: the subscribers, by default)."""
    rv = repeat_values(runs.results, metric, roles)
    rv = rv[~rv["latency_test"]]
    rows = []
    for key, group in rv.groupby(PARAMS, dropna=False):
        s = summarize(group["value"].tolist())
        rows.append({**dict(zip(PARAMS, key, strict=True)), "repeats": s.n, "mean": s.mean,
                     "std": s.std, "ci_low": s.ci_low, "ci_high": s.ci_high, "cv": s.cv,
                     "unstable": s.unstable})
    return pd.DataFrame(rows)


def latency(runs: Runs) -> pd.DataFrame:
    """Per test parameters: p50/p90/p99 of the distribution pooled over repeats (never an
    average of percentiles), with the number of round trips behind them; and, for comparing,
    each percentile taken per repeat and summarized over the repeats (`p50_mean`,
    `p50_ci_low`, `p50_ci_high`: Student's t, as for throughput). The repeats are the
    independent samples: round trips inside one repeat share its machine's state, so their
    count says how well a repeat's percentile is known, not how a second sitting would read."""
    iv = intervals(runs.results)
    if iv.empty:
        return pd.DataFrame()
    rows = []
    for key, group in iv.groupby(PARAMS, dropna=False):
        count = group["cnt"].sum()
        repeats = [g for _, g in group.groupby(["run_id", "test", "repeat"], dropna=False)]
        fewest = min(int(g["cnt"].sum()) for g in repeats)
        row = {**dict(zip(PARAMS, key, strict=True)), "repeats": len(repeats),
               "roundtrips": int(count), "roundtrips_fewest": fewest}
        for name, q in PERCENTILES:
            row[name] = pooled_quantile(group, q)
            row[f"{name}_enough"] = count >= MIN_SAMPLES / (1 - q)
            s = summarize([pooled_quantile(g, q) for g in repeats])
            row |= {f"{name}_mean": s.mean, f"{name}_ci_low": s.ci_low,
                    f"{name}_ci_high": s.ci_high,
                    f"{name}_enough_each": fewest >= MIN_SAMPLES / (1 - q)}
        rows.append(row)
    return pd.DataFrame(rows)


def cpu_per_gigabit(runs: Runs) -> pd.DataFrame:
    """The subscribers' CPU per unit of work: core-seconds per gigabit received (CPU % / 100
    over Gb/s), per repeat, then summarized over repeats as `throughput` does. A datapath
    that moves less data in the same second spends less CPU per second and may still spend
    more per gigabit: this is the cost a user compares."""
    cpu = repeat_values(runs.results, "cpu_pct")
    thr = repeat_values(runs.results, "throughput_mbps")
    both = cpu.merge(thr, on=PARAMS + ["run_id", "test", "repeat"], suffixes=("_cpu", "_thr"))
    both = both[(~both["latency_test"]) & (both["value_thr"] > 0)]
    rows = []
    for key, group in both.groupby(PARAMS, dropna=False):
        per = (group["value_cpu"] / 100 / (group["value_thr"] / 1000)).tolist()
        s = summarize(per)
        rows.append({**dict(zip(PARAMS, key, strict=True)), "repeats": s.n, "mean": s.mean,
                     "std": s.std, "ci_low": s.ci_low, "ci_high": s.ci_high, "cv": s.cv,
                     "unstable": s.unstable})
    return pd.DataFrame(rows)


def cpu_per_message(runs: Runs) -> pd.DataFrame:
    """The publisher's CPU per message it wrote (`cpu_per_message_us`, parsers.cpu) on the
    throughput tests, summarized over repeats as `throughput` does: what each message cost
    the sending side, where the Pis of the K8sDDS study paid a pod path's extra work."""
    return throughput(runs, "cpu_per_message_us", "pub")


def overhead(table: pd.DataFrame, metric: str = "throughput", value: str = "mean",
             enough: str | None = None) -> pd.DataFrame:
    """Change of `value` (a mean over repeats, its 95 % interval in `ci_low`/`ci_high`)
    against `host` with the same other parameters, in %, and its verdict on `metric` as the
    answer gives it (`verdict`: better, worse, within noise, no verdict with one repeat);
    `enough`: a column that is false where too few samples back a percentile."""
    if table.empty or model.HOST_NETWORK not in set(table["datapath"]):
        return pd.DataFrame()
    # the path differs by nature (host is node-node): the datapath decides it here
    others = [p for p in PARAMS if p not in ("datapath", "path")]
    host = table[table["datapath"] == model.HOST_NETWORK].drop_duplicates(others).set_index(others)
    rows = []
    for _, row in table[table["datapath"] != model.HOST_NETWORK].iterrows():
        key = tuple(row[p] for p in others)
        if key not in host.index:
            continue
        h = host.loc[key]
        side = Side(row[value], row["ci_low"], row["ci_high"], int(row["repeats"]))
        base_side = Side(h[value], h["ci_low"], h["ci_high"], int(h["repeats"]))
        ok = not enough or (bool(row[enough]) and bool(h[enough]))
        pct = (row[value] / h[value] - 1) * 100
        rows.append({**row[PARAMS].to_dict(), "host": h[value], value: row[value],
                     "overhead_pct": pct,
                     "verdict": verdict.word(metric, pct, verdict.noise(side, base_side, ok))})
    return pd.DataFrame(rows)


def overhead_pivot(over: pd.DataFrame, values: str = "overhead_pct") -> pd.DataFrame:
    """Datapath (and any other varying parameter) x payload: the overhead in %, or another
    column of `overhead` (`verdict`, or `marked`'s `cell`: text, one value a cell)."""
    if over.empty:
        return over
    index = ["datapath"] + _varying(over, exclude=("datapath", "data_len"))
    return over.pivot_table(index=index, columns="data_len", values=values,
                            aggfunc="mean" if values == "overhead_pct" else "first")


def marked(over: pd.DataFrame) -> pd.DataFrame:
    """`overhead` with each change as text with its verdict ("-40.0 (worse)", "-13.2 (within
    noise)") in the column `cell`, for a table a reader reads beside the answer."""
    return over.assign(cell=[f"{pct:+.1f} ({word})" for pct, word in
                             zip(over["overhead_pct"], over["verdict"], strict=True)])


def warnings(thr: pd.DataFrame, lat: pd.DataFrame) -> list[str]:
    """Unstable results (std >= 10 % of the mean) and percentiles with too few samples."""
    out = []
    single = int((thr["repeats"] < 2).sum()) if not thr.empty else 0
    if single:
        out.append(f"{single} throughput test(s) have a single repeat: no confidence interval "
                   "and no stability check (run with --repeats 3 or more)")
    for _, r in thr[thr["unstable"]].iterrows() if not thr.empty else []:
        out.append(f"unstable throughput: {r['datapath']}, {r['data_len']} B, "
                   f"{r['num_subscribers']} sub: std {r['cv'] * 100:.0f} % of the mean over "
                   f"{r['repeats']} repeats")
    for _, r in lat.iterrows() if not lat.empty else []:
        for name, q in PERCENTILES:
            if not r[f"{name}_enough"]:
                out.append(f"too few round trips for {name}: {r['datapath']}, {r['data_len']} "
                           f"B: {r['roundtrips']} (needs {MIN_SAMPLES / (1 - q):.0f})")
    return out


SECURITY_KEYS = ("datapath", "transport", "secure", "data_len")


def protection(datapath: str, transport: str, secure: bool) -> str:
    """How a configuration protects its traffic, in words."""
    parts = [transport.upper()]
    if secure:
        parts.append("DDS Security")
    if model.DATAPATHS.get(datapath) and model.datapath(datapath).encryption != "none":
        parts.append(f"encrypted datapath ({model.datapath(datapath).encryption})")
    return " + ".join(parts)


def security(thr: pd.DataFrame, lat: pd.DataFrame) -> pd.DataFrame:
    """Throughput and p50 round trip of each protection (transport, DDS Security, encrypted
    datapath) side by side, and their cost against plain UDP without DDS Security on the
    same datapath (for an encrypted datapath: on its unencrypted counterpart). Empty when
    the runs measured no protection."""
    if thr.empty:
        return pd.DataFrame()
    encrypted = thr["datapath"].map(
        lambda d: d in model.DATAPATHS and model.datapath(d).encryption != "none")
    if not (thr["secure"].any() or (thr["transport"] != "udp").any() or encrypted.any()):
        return pd.DataFrame()
    t = base(thr, keep=SECURITY_KEYS).set_index(list(SECURITY_KEYS))["mean"]
    p50 = (base(lat, keep=SECURITY_KEYS).set_index(list(SECURITY_KEYS))["p50"]
           if not lat.empty else pd.Series(dtype=float))
    rows = []
    for (dp, transport, secure, size), mean in t.items():
        fact = model.DATAPATHS.get(dp)
        plain = (fact.unencrypted if fact and fact.unencrypted else dp, "udp", False, size)
        ref = t.get(plain)
        rows.append({
            "datapath": dp, "protection": protection(dp, transport, secure), "data_len": size,
            "throughput_mbps": mean,
            "vs_plain_pct": (mean / ref - 1) * 100 if ref and plain != (dp, transport,
                                                                        secure, size) else None,
            "p50_us": p50.get((dp, transport, secure, size)),
            "reference": f"{plain[0]} / UDP" if ref else "-"})
    return pd.DataFrame(rows).sort_values(["data_len", "datapath", "protection"],
                                          ignore_index=True)


# the columns of the path matrix: each probe of `k8sdds baseline` (baseline.PROBES), the
# network engines' first and ddsperf's last
PROBES = sorted((p for probes in baseline.PROBES.values() for p in probes),
                key=lambda p: p.pubsub)


def _means(runs: Runs) -> dict[str, pd.Series]:
    """Per baseline column: the mean over repeats, by (datapath, path)."""
    out = {}
    for p in PROBES:
        rv = repeat_values(runs.results, p.metric, ROUND_TRIPS if p.latency else MEASURING)
        rv = rv[(rv["engine"] == p.engine) & (rv["latency_test"] == p.latency)]
        if not p.any_transport:
            rv = rv[rv["transport"] == p.transport]
        if p.pubsub:  # the pub/sub side of the comparison: its usual sweep point
            rv = base(rv, keep=("datapath", "path", "placement", "engine", "latency_test"))
        if rv.empty:
            continue
        out[p.label] = rv.groupby(["datapath", "path"])["value"].mean()
    return out


def matrix(runs: Runs) -> pd.DataFrame:
    """The path matrix: per datapath and path, each network measurement (and ddsperf's)."""
    means = _means(runs)
    if not any(p.label in means for p in PROBES if not p.pubsub):  # no network engine: no matrix
        return pd.DataFrame()
    table = pd.DataFrame(means)
    table.index.names = ["datapath", "path"]
    return table.reset_index()


def efficiency(runs: Runs) -> pd.DataFrame:
    """DDS efficiency per datapath and path: ddsperf throughput as a fraction of iperf3's TCP
    and UDP throughput on the same path in the same runs, and ddsperf's p50 round trip
    against ping's and qperf's."""
    m = matrix(runs)
    if m.empty:
        return m
    def value(r: pd.Series, label: str) -> float:
        v = r.get(label)
        return float(v) if v is not None and v == v else float("nan")

    rows = []
    for _, r in m.iterrows():
        row = {"datapath": r["datapath"], "path": r["path"]}
        dds = value(r, "ddsperf (Mb/s)")
        for net in ("iperf3 TCP (Mb/s)", "iperf3 UDP (Mb/s)"):
            if dds == dds and value(r, net) > 0:
                row[f"ddsperf / {net.split(' (')[0]} (%)"] = dds / value(r, net) * 100
        rtt = value(r, "ddsperf p50 RTT (µs)")
        for net in ("ping p50 (µs)", "qperf UDP RTT (µs)"):
            if rtt == rtt and value(r, net) > 0:
                row[f"ddsperf RTT / {net.split(' (')[0]} (x)"] = rtt / value(r, net)
        if len(row) > 2:
            rows.append(row)
    return pd.DataFrame(rows)


def resources(runs: Runs) -> pd.DataFrame:
    """What each datapath itself costs during throughput tests: its own processes
    (wireguard-go, or the CNI's pods on Kubernetes) and the kernel's softirq time, in % of one
    core, the nodes' CPU and the CNI pods' memory (Kubernetes with metrics-server), mean over
    repeats, beside the throughput that cost bought."""
    s = runs.summaries
    s = s[(s["role"] == "datapath") & ~s["latency_test"]]
    if s.empty:
        return pd.DataFrame()
    keys = ["datapath", "path", "engine", "transport", "data_len"]
    cost = s.pivot_table(index=keys, columns="metric", values="value", aggfunc="mean")
    thr = repeat_values(runs.results, "throughput_mbps")
    thr = thr[~thr["latency_test"]].groupby(keys)["value"].mean().rename("throughput_mbps")
    out = cost.join(thr, how="left").reset_index()
    return out.rename(columns={"datapath_cpu_pct": "datapath processes (% core)",
                               "softirq_pct": "softirq (% core)",
                               "node_cpu_pct": "nodes (% core)",
                               "datapath_memory_mb": "CNI pods memory (MiB)",
                               "node_load1": "node load (1 min)",
                               "throughput_mbps": "Mb/s"})
