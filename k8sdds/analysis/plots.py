"""Figures from the results (matplotlib/seaborn), each written as PNG and SVG.

Every function returns the file stem it wrote, or None when the runs hold nothing to draw.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import matplotlib

from k8sdds import model

matplotlib.use("Agg")  # files only; no display needed

import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from k8sdds.analysis import styles, tables  # noqa: E402
from k8sdds.analysis.load import Runs, intervals, load, repeat_values  # noqa: E402
from k8sdds.analysis.stats import latency_cdf  # noqa: E402
from k8sdds.analysis.tables import base  # noqa: E402

sns.set_theme(style="whitegrid")


def save(fig, out: Path, stem: str, layout: bool = True) -> str:
    if layout:  # else the figure laid itself out (room kept for a figure legend)
        fig.tight_layout()
    for ext in ("png", "svg"):
        tmp = out / f".{stem}.tmp.{ext}"
        fig.savefig(tmp, dpi=110)
        os.replace(tmp, out / f"{stem}.{ext}")
    plt.close(fig)
    return stem


HOST_LABEL = styles.HOST_LABEL


def style(dp: str) -> dict:
    """The datapath's colour and marker; host black, dashed, drawn on top."""
    return styles.line(dp)


def ordered(table: pd.DataFrame):
    """(datapath, rows) in the one legend order of every figure, host first."""
    groups = dict(list(table.groupby("datapath", sort=True)))
    return [(dp, groups[dp]) for dp in styles.order(groups)]


def _lines_with_ci(ax, table: pd.DataFrame, x: str) -> None:
    for dp, g in ordered(table.sort_values(x)):
        g = g.sort_values(x)
        yerr = np.vstack([g["mean"] - g["ci_low"], g["ci_high"] - g["mean"]])
        yerr = np.nan_to_num(yerr)
        drawn = ax.errorbar(g[x], g["mean"], yerr=yerr, capsize=3, **style(dp))
        drawn.lines[0].set_gid(f"datapath-{dp}")  # named in the SVG: what was drawn, per datapath
    ax.legend(title="datapath")


def _bars_by_datapath(ax, table: pd.DataFrame, column: str, err: tuple[str, str] | None = None
                      ) -> None:
    """One payload: a bar per datapath (a line through one point says nothing)."""
    rows = [g.iloc[0] for _, g in ordered(table)]
    names = [HOST_LABEL if r["datapath"] == model.HOST_NETWORK else r["datapath"] for r in rows]
    values = [r[column] for r in rows]
    yerr = None
    if err:
        yerr = np.nan_to_num(np.vstack([[r[column] - r[err[0]] for r in rows],
                                        [r[err[1]] - r[column] for r in rows]]))
    colors = [styles.colour(r["datapath"]) for r in rows]
    bars = ax.bar(names, values, yerr=yerr, capsize=3, color=colors)
    for patch, r in zip(bars.patches, rows, strict=True):
        patch.set_gid(f"datapath-{r['datapath']}")
    ax.tick_params(axis="x", rotation=20)


def throughput(runs: Runs, out: Path, metric: str = "throughput_mbps") -> str | None:
    """Throughput per subscriber against payload, a line per datapath, 95 % CI bars."""
    t = base(tables.throughput(runs, metric))
    if t.empty:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    if t["data_len"].nunique() == 1:
        _bars_by_datapath(ax, t, "mean", ("ci_low", "ci_high"))
        ax.set_xlabel(f"datapath ({int(t['data_len'].iloc[0])} B payload)")
    else:
        _lines_with_ci(ax, t, "data_len")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("payload (bytes)")
    ax.set_ylim(bottom=0)  # from zero: differences drawn at their size
    unit = "Mb/s" if metric == "throughput_mbps" else "samples/s"
    ax.set_ylabel(f"throughput per subscriber ({unit})")
    ax.set_title(f"DDS throughput ({unit}) by datapath")
    return save(fig, out, "throughput" if metric == "throughput_mbps" else "samples")


def latency_percentiles(runs: Runs, out: Path) -> str | None:
    """p50, p90, p99 of the pooled round-trip distribution against payload, per datapath."""
    lat = base(tables.latency(runs))
    if lat.empty:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(12, 4), sharey=False)
    one = lat["data_len"].nunique() == 1
    for ax, (name, _) in zip(axes, tables.PERCENTILES, strict=True):
        if one:
            _bars_by_datapath(ax, lat, name)
            ax.set_xlabel(f"datapath ({int(lat['data_len'].iloc[0])} B payload)")
        else:
            for dp, g in ordered(lat):
                g = g.sort_values("data_len")
                ax.plot(g["data_len"], g[name], **style(dp))[0].set_gid(
                    f"datapath-{dp}")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("payload (bytes)")
        ax.set_ylim(bottom=0)  # from zero: a 4 % difference looks like 4 %
        ax.set_title(f"{name} round trip")
        ax.set_ylabel("µs")
    if not one:
        axes[0].legend(title="datapath")
    return save(fig, out, "latency")


def latency_cdf_plot(runs: Runs, out: Path) -> str | None:
    """CDF of the round trip per datapath, one panel per payload (at most four)."""
    iv = base(intervals(runs.results))
    if iv.empty:
        return None
    sizes = sorted(iv["data_len"].unique())[:4]
    fig, axes = plt.subplots(1, len(sizes), figsize=(4.5 * len(sizes), 4), squeeze=False)
    for ax, size in zip(axes[0], sizes, strict=True):
        for dp, g in ordered(iv[iv["data_len"] == size]):
            x, f = latency_cdf(g.to_dict("records"))
            ax.plot(x, f, markevery=0.1, **style(dp))[0].set_gid(f"datapath-{dp}")
        ax.set_xscale("log")
        ax.set_title(f"{size} B")
        ax.set_xlabel("round trip (µs)")
        ax.set_ylabel("fraction of round trips")
    axes[0][0].legend(title="datapath")
    return save(fig, out, "latency_cdf")


# a heatmap cell's mark where its change has no verdict word (tables.overhead's verdict)
UNJUDGED = {"within noise": "noise", "no verdict": "no verdict"}


def overhead_heatmap(over: pd.DataFrame, out: Path) -> str | None:
    """Throughput change of each datapath against host, per payload, in % (`over`:
    tables.overhead on the payload sweep), each cell marked where its change is within noise
    or has no verdict (one repeat), as the answer says it."""
    pivot = tables.overhead_pivot(over) if not over.empty else over
    if pivot.empty:
        return None
    words = tables.overhead_pivot(over, "verdict").reindex_like(pivot)
    text = pivot.copy().astype(object)
    for r in pivot.index:
        for c in pivot.columns:
            v, word = pivot.loc[r, c], words.loc[r, c]
            mark = UNJUDGED.get(word, "")
            text.loc[r, c] = "" if pd.isna(v) else f"{v:.0f}" + (f"\n{mark}" if mark else "")
    fig, ax = plt.subplots(figsize=(1.2 * len(pivot.columns) + 3, 0.5 * len(pivot) + 2))
    sns.heatmap(pivot, annot=text.to_numpy(), fmt="", center=0, cmap="RdYlGn", ax=ax,
                cbar_kws={"label": "% vs host"})
    ax.set_xlabel("payload (bytes)")
    ax.set_ylabel("")  # the datapath names say it; a rotated title overlapped them
    ax.tick_params(axis="y", rotation=0)
    ax.set_title("throughput against host (%); noise: within noise, no verdict: one repeat",
                 fontsize=9)
    return save(fig, out, "overhead")


def subscribers(runs: Runs, out: Path) -> str | None:
    """Throughput per subscriber against the number of subscribers, unicast vs multicast."""
    t = base(tables.throughput(runs), keep=("datapath", "num_subscribers", "multicast"))
    if t.empty or t["num_subscribers"].nunique() < 2:
        return None
    t = t.assign(delivery=np.where(t["multicast"], "multicast", "unicast"))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for dp, g in ordered(t):
        for delivery, d in g.groupby("delivery", sort=True):
            d = d.sort_values("num_subscribers")
            drawn = {**style(dp), "label": f"{styles.label(dp)}, {delivery}"}
            if delivery == "multicast":
                drawn["linestyle"] = ":"
            ax.plot(d["num_subscribers"], d["mean"], **drawn)[0].set_gid(f"datapath-{dp}")
    ax.legend(title="datapath, delivery")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("subscribers")
    ax.set_ylabel("throughput per subscriber (Mb/s)")
    ax.set_title("scaling with subscribers")
    return save(fig, out, "subscribers")


MODE_LINES = {"multicast": "-", "peers": "--", "cds": ":"}  # a discovery mode's line


def discovery(tab: pd.DataFrame, out: Path) -> str | None:
    """Discovery against the number of participants (`analysis.discovery.table`), a line
    per datapath and mode: the slowest participant's time with its interval, the bytes a
    node exchanged to discover, and the steady traffic a node carries after (log scales:
    the modes' traffic differs by orders of magnitude)."""
    tab = tab[tab["repeats"] > 0] if not tab.empty else tab
    if tab.empty:
        return None
    fig, axes = plt.subplots(1, 3, figsize=(13, 4.2))
    panels = (("time_s", "time", "time until every peer matched (s)"),
              ("discovery_kB", None, "bytes a node to discover (kB)"),
              ("steady_kBps", "steady_kBps", "steady traffic a node (kB/s)"))
    for ax, (column, err, label) in zip(axes, panels, strict=True):
        for dp, g in ordered(tab):
            for mode, d in g.sort_values("participants").groupby("discovery", sort=True):
                yerr = None if err is None else np.nan_to_num(np.vstack(
                    [d[column] - d[f"{err}_low"], d[f"{err}_high"] - d[column]]))
                ax.errorbar(d["participants"], d[column], yerr=yerr, capsize=3, **{
                    **style(dp), "label": f"{styles.label(dp)}, {mode}",
                    "linestyle": MODE_LINES.get(mode, "-.")})
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(tab["participants"].unique()))
        ax.xaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set(xlabel="participants", ylabel=label, yscale="linear" if err == "time" else "log")
    axes[0].legend(title="datapath, discovery", fontsize=8)
    fig.suptitle("DDS discovery against the number of participants")
    return save(fig, out, "discovery")


def middlewares(tab: pd.DataFrame, out: Path) -> str | None:
    """Middlewares side by side (middlewares.table): a row of panels per datapath,
    throughput and p50/p99 round trip against payload, one line per middleware."""
    if tab.empty:
        return None
    names = styles.order(tab["datapath"])
    panels = [(c, t) for c, t in (("throughput_mbps", "throughput per subscriber (Mb/s)"),
                                  ("p50_us", "p50 round trip (µs)"),
                                  ("p99_us", "p99 round trip (µs)")) if tab[c].notna().any()]
    fig, axes = plt.subplots(len(names), len(panels), squeeze=False,
                             figsize=(4.2 * len(panels), 3.4 * len(names)))
    colours = dict(zip(sorted(tab["middleware"].unique()), sns.color_palette(), strict=False))
    for row, dp in zip(axes, names, strict=True):
        d = tab[tab["datapath"] == dp]
        for ax, (column, title) in zip(row, panels, strict=True):
            for mw, g in d.dropna(subset=[column]).groupby("middleware", sort=True):
                g = g.sort_values("data_len")
                ax.plot(g["data_len"], g[column], marker="o", label=mw,
                        color=colours[mw])[0].set_gid(f"middleware-{mw}")
            ax.set_xscale("log", base=2)
            ax.set_ylim(bottom=0)
            ax.set_xlabel("payload (bytes)")
            ax.set_title(f"{styles.label(dp)}: {title}", fontsize=10)
    # one legend for every panel: a middleware measured in one kind of test only is in it too
    handles = [plt.Line2D([], [], color=c, marker="o", label=mw) for mw, c in colours.items()]
    axes[0][0].legend(handles=handles, title="middleware", fontsize=8)
    return save(fig, out, "middlewares")


def _hue_bars(ax, data: pd.DataFrame, x: str, y: str) -> None:
    """Bars grouped by `x`, one colour per datapath (the figures' own), legend in order."""
    names = styles.order(data["datapath"])
    sns.barplot(data=data, x=x, y=y, hue="datapath", hue_order=names,
                palette=styles.palette(names), saturation=1, ax=ax)
    handles, labels = ax.get_legend_handles_labels()
    ax.legend(handles, [styles.label(n) for n in labels], title="datapath")
    for container, name in zip(ax.containers, names, strict=False):
        for patch in container:
            patch.set_gid(f"datapath-{name}")


def _bars(runs: Runs, out: Path, param: str, labels: dict, stem: str, title: str
          ) -> str | None:
    t = base(tables.throughput(runs), keep=("datapath", param))
    if t.empty or t[param].nunique() < 2:
        return None
    t = t.assign(**{param: t[param].map(lambda v: labels.get(v, v))})
    fig, ax = plt.subplots(figsize=(7, 4.5))
    _hue_bars(ax, t, param, "mean")
    ax.set_xlabel("")
    ax.set_ylabel("throughput per subscriber (Mb/s)")
    ax.set_title(title)
    return save(fig, out, stem)


def reliability(runs: Runs, out: Path) -> str | None:
    return _bars(runs, out, "best_effort", {True: "best effort", False: "reliable"},
                 "reliability", "reliable vs best effort")


def transports(runs: Runs, out: Path) -> str | None:
    return _bars(runs, out, "transport", {}, "transport", "UDP vs TCP (vs TLS)")


def security(table: pd.DataFrame, out: Path) -> str | None:
    """Throughput of each protection side by side (tables.security), a bar per datapath, a
    panel per payload."""
    if table.empty:
        return None
    sizes = sorted(table["data_len"].unique())
    width = max(6.0, 1.2 * table["protection"].nunique() + 2)
    fig, axes = plt.subplots(1, len(sizes), figsize=(width * len(sizes), 5), squeeze=False)
    for ax, size in zip(axes[0], sizes, strict=True):
        t = table[table["data_len"] == size]
        _hue_bars(ax, t.assign(protection=t["protection"].str.replace(" + ", "\n+ ",
                                                                        regex=False)),
                  "protection", "throughput_mbps")
        ax.set_xlabel("")
        ax.set_title(f"{size} B")
        ax.tick_params(axis="x", labelsize=8)
    axes[0][0].set_ylabel("throughput per subscriber (Mb/s)")
    fig.suptitle("transports, DDS Security and encrypted datapaths")
    return save(fig, out, "security")


def cpu(runs: Runs, out: Path) -> str | None:
    """CPU of the publisher and of the subscribers (mean per repeat), by datapath."""
    rows = []
    for side, prefix in (("publisher", "pub"), ("subscribers", "sub")):
        rv = repeat_values(runs.results, "cpu_pct", prefix)
        rows.append(rv.assign(side=side))
    data = pd.concat(rows, ignore_index=True)
    if data.empty:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    _hue_bars(ax, data, "side", "value")
    ax.set_xlabel("")
    ax.set_ylabel("CPU (% of one core, ddsperf threads)")
    ax.set_title("CPU of publisher and subscribers")
    return save(fig, out, "cpu")


def by_protection(runs: Runs, out: Path) -> str | None:
    """Throughput against payload per datapath, one panel per protection (UDP, TCP, TLS,
    DDS Security over UDP or TCP), as the CNI study drew it; host as the reference."""
    t = tables.throughput(runs)
    if t.empty:
        return None
    t = base(t, keep=("datapath", "data_len", "transport", "secure"))
    t = t.assign(protection=[("DDS Security over " if s else "") + tr.upper()
                             for tr, s in zip(t["transport"], t["secure"], strict=True)])
    rank = {"UDP": 0, "TCP": 1, "TLS": 2}
    panels = sorted(t["protection"].unique(),
                    key=lambda p: (p.startswith("DDS"), rank.get(p.split()[-1], 3)))
    if len(panels) < 2:
        return None  # one protection: the throughput figure says it all
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 4.2), sharey=True,
                             squeeze=False)
    for ax, name in zip(axes[0], panels, strict=True):
        _lines_with_ci(ax, t[t["protection"] == name], "data_len")
        ax.set_xscale("log", base=2)
        ax.set_ylim(bottom=0)
        ax.set_title(name)
        ax.set_xlabel("payload (bytes)")
        ax.get_legend().remove()
    axes[0][0].set_ylabel("throughput per subscriber (Mb/s)")
    legend: dict[str, object] = {}
    for ax in axes[0]:  # every datapath of any panel, host first
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            legend.setdefault(label, handle)
    labels = [styles.label(n) for n in styles.order(t["datapath"]) if styles.label(n) in legend]
    fig.legend([legend[n] for n in labels], labels, loc="lower center",
               ncol=min(7, len(labels)), frameon=False)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return save(fig, out, "protection", layout=False)


def history(hist: pd.DataFrame, out: Path, found: Sequence = ()) -> str | None:
    """Each test's mean per run, in the order the runs were made (history.series), with its
    change points (history.changes) marked where the new level starts."""
    if hist.empty:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    order = list(dict.fromkeys(hist.sort_values(["created", "run_id"])["run_id"]))
    for test, g in hist.groupby("test", sort=True):
        line, = ax.plot([order.index(r) for r in g["run_id"]], g["mean"], marker="o",
                        label=test)
        for change in found:
            if change.test == test:
                x = order.index(change.run_id)
                ax.axvline(x - 0.5, color=line.get_color(), linestyle=":", linewidth=1)
                ax.annotate(f"{change.change_pct:+.0f} %", (x - 0.5, change.after),
                            fontsize="small", color=line.get_color(), ha="center")
    ax.set_xticks(range(len(order)), order, rotation=20, ha="right")
    ax.set_ylim(bottom=0)
    metric, unit = hist["metric"].iloc[0], hist["unit"].iloc[0]
    ax.set_ylabel(f"{metric} ({unit})")
    ax.set_title(f"{metric} across runs; dotted: a change point")
    ax.legend(fontsize="small")
    return save(fig, out, "history")


def run_throughput(run_dir: Path, include_failed: bool = False) -> str | None:
    """throughput.png/.svg of one run directory, if it has throughput figures (a failed
    repeat's rows left out unless `include_failed`)."""
    if not (Path(run_dir) / "results.csv").exists():
        return None
    return throughput(load([run_dir], include_failed), Path(run_dir))
