"""Figures from the results (matplotlib/seaborn), each written as PNG and SVG.

Every function returns the file stem it wrote, or None when the runs hold nothing to draw.
"""

from __future__ import annotations

import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display needed

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from k8sdds.analysis import tables  # noqa: E402
from k8sdds.analysis.load import Runs, intervals, load, repeat_values  # noqa: E402
from k8sdds.analysis.stats import latency_cdf  # noqa: E402
from k8sdds.analysis.tables import base  # noqa: E402

sns.set_theme(style="whitegrid")


def _save(fig, out: Path, stem: str, layout: bool = True) -> str:
    if layout:  # else the figure laid itself out (room kept for a figure legend)
        fig.tight_layout()
    for ext in ("png", "svg"):
        tmp = out / f".{stem}.tmp.{ext}"
        fig.savefig(tmp, dpi=110)
        os.replace(tmp, out / f"{stem}.{ext}")
    plt.close(fig)
    return stem


HOST_LABEL = "host (no CNI)"


def _style(dp: str) -> dict:
    """The host baseline reads as the reference: black, dashed, drawn on top."""
    if dp == "host":
        return {"color": "black", "linestyle": "--", "zorder": 5, "label": HOST_LABEL}
    return {"label": dp}


def _ordered(table: pd.DataFrame):
    """(datapath, rows), host first so it leads the legend."""
    groups = dict(list(table.groupby("datapath", sort=True)))
    return sorted(groups.items(), key=lambda kv: kv[0] != "host")


def _lines_with_ci(ax, table: pd.DataFrame, x: str) -> None:
    for dp, g in _ordered(table.sort_values(x)):
        g = g.sort_values(x)
        yerr = np.vstack([g["mean"] - g["ci_low"], g["ci_high"] - g["mean"]])
        yerr = np.nan_to_num(yerr)
        drawn = ax.errorbar(g[x], g["mean"], yerr=yerr, marker="o", capsize=3, **_style(dp))
        drawn.lines[0].set_gid(f"datapath-{dp}")  # named in the SVG: what was drawn, per datapath
    ax.legend(title="datapath")


def _bars_by_datapath(ax, table: pd.DataFrame, column: str, err: tuple[str, str] | None = None
                      ) -> None:
    """One payload: a bar per datapath (a line through one point says nothing)."""
    rows = [g.iloc[0] for _, g in _ordered(table)]
    names = [HOST_LABEL if r["datapath"] == "host" else r["datapath"] for r in rows]
    values = [r[column] for r in rows]
    yerr = None
    if err:
        yerr = np.nan_to_num(np.vstack([[r[column] - r[err[0]] for r in rows],
                                        [r[err[1]] - r[column] for r in rows]]))
    colors = ["black" if r["datapath"] == "host" else f"C{i}" for i, r in enumerate(rows)]
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
    return _save(fig, out, "throughput" if metric == "throughput_mbps" else "samples")


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
            for dp, g in _ordered(lat):
                g = g.sort_values("data_len")
                ax.plot(g["data_len"], g[name], marker="o", **_style(dp))[0].set_gid(
                    f"datapath-{dp}")
            ax.set_xscale("log", base=2)
            ax.set_xlabel("payload (bytes)")
        ax.set_ylim(bottom=0)  # from zero: a 4 % difference looks like 4 %
        ax.set_title(f"{name} round trip")
        ax.set_ylabel("µs")
    if not one:
        axes[0].legend(title="datapath")
    return _save(fig, out, "latency")


def latency_cdf_plot(runs: Runs, out: Path) -> str | None:
    """CDF of the round trip per datapath, one panel per payload (at most four)."""
    iv = base(intervals(runs.results))
    if iv.empty:
        return None
    sizes = sorted(iv["data_len"].unique())[:4]
    fig, axes = plt.subplots(1, len(sizes), figsize=(4.5 * len(sizes), 4), squeeze=False)
    for ax, size in zip(axes[0], sizes, strict=True):
        for dp, g in _ordered(iv[iv["data_len"] == size]):
            x, f = latency_cdf(g.to_dict("records"))
            ax.plot(x, f, **_style(dp))[0].set_gid(f"datapath-{dp}")
        ax.set_xscale("log")
        ax.set_title(f"{size} B")
        ax.set_xlabel("round trip (µs)")
        ax.set_ylabel("fraction of round trips")
    axes[0][0].legend(title="datapath")
    return _save(fig, out, "latency_cdf")


def overhead_heatmap(pivot: pd.DataFrame, out: Path) -> str | None:
    """Throughput change of each datapath against host, per payload, in %."""
    if pivot.empty:
        return None
    fig, ax = plt.subplots(figsize=(1.2 * len(pivot.columns) + 3, 0.5 * len(pivot) + 2))
    sns.heatmap(pivot, annot=True, fmt=".0f", center=0, cmap="RdYlGn", ax=ax,
                cbar_kws={"label": "% vs host"})
    ax.set_xlabel("payload (bytes)")
    ax.set_ylabel("")  # the datapath names say it; a rotated title overlapped them
    ax.tick_params(axis="y", rotation=0)
    ax.set_title("throughput against host (%)")
    return _save(fig, out, "overhead")


def subscribers(runs: Runs, out: Path) -> str | None:
    """Throughput per subscriber against the number of subscribers, unicast vs multicast."""
    t = base(tables.throughput(runs), keep=("datapath", "num_subscribers", "multicast"))
    if t.empty or t["num_subscribers"].nunique() < 2:
        return None
    t = t.assign(delivery=np.where(t["multicast"], "multicast", "unicast"))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sns.lineplot(data=t, x="num_subscribers", y="mean", hue="datapath", style="delivery",
                 marker="o", ax=ax)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("subscribers")
    ax.set_ylabel("throughput per subscriber (Mb/s)")
    ax.set_title("scaling with subscribers")
    return _save(fig, out, "subscribers")


def _bars(runs: Runs, out: Path, param: str, labels: dict, stem: str, title: str
          ) -> str | None:
    t = base(tables.throughput(runs), keep=("datapath", param))
    if t.empty or t[param].nunique() < 2:
        return None
    t = t.assign(**{param: t[param].map(lambda v: labels.get(v, v))})
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sns.barplot(data=t, x="datapath", y="mean", hue=param, ax=ax)
    ax.set_ylabel("throughput per subscriber (Mb/s)")
    ax.set_title(title)
    return _save(fig, out, stem)


def reliability(runs: Runs, out: Path) -> str | None:
    return _bars(runs, out, "best_effort", {True: "best effort", False: "reliable"},
                 "reliability", "reliable vs best effort")


def transports(runs: Runs, out: Path) -> str | None:
    return _bars(runs, out, "transport", {}, "transport", "UDP vs TCP (vs TLS)")


def security(table: pd.DataFrame, out: Path) -> str | None:
    """Throughput of each protection side by side (tables.security), a bar per payload."""
    if table.empty:
        return None
    t = table.assign(configuration=table["datapath"] + "\n" + table["protection"]
                     .str.replace(" + ", "\n+ ", regex=False))
    fig, ax = plt.subplots(figsize=(max(7.0, 1.4 * t["configuration"].nunique() + 2), 5))
    sns.barplot(data=t, x="configuration", y="throughput_mbps", hue="data_len", ax=ax)
    ax.set_xlabel("")
    ax.set_ylabel("throughput per subscriber (Mb/s)")
    ax.legend(title="payload (bytes)")
    ax.set_title("transports, DDS Security and encrypted datapaths")
    ax.tick_params(axis="x", labelsize=8)
    return _save(fig, out, "security")


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
    sns.barplot(data=data, x="datapath", y="value", hue="side", ax=ax)
    ax.set_ylabel("CPU (% of one core, ddsperf threads)")
    ax.set_title("CPU of publisher and subscribers")
    return _save(fig, out, "cpu")


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
    labels = sorted(legend, key=lambda name: name != HOST_LABEL)
    fig.legend([legend[n] for n in labels], labels, loc="lower center",
               ncol=min(7, len(labels)), frameon=False)
    fig.tight_layout(rect=(0, 0.12, 1, 1))
    return _save(fig, out, "protection", layout=False)


def history(hist: pd.DataFrame, out: Path) -> str | None:
    """Each test's mean throughput per run, in the order the runs were made."""
    if hist.empty:
        return None
    fig, ax = plt.subplots(figsize=(8, 4.5))
    order = list(dict.fromkeys(hist.sort_values("created")["run_id"]))
    for test, g in hist.groupby("test", sort=True):
        ax.plot([order.index(r) for r in g["run_id"]], g["mean"], marker="o", label=test)
    ax.set_xticks(range(len(order)), order, rotation=20, ha="right")
    ax.set_ylim(bottom=0)
    ax.set_ylabel("throughput per subscriber (Mb/s)")
    ax.set_title("throughput across runs of the same schedule")
    ax.legend(fontsize="small")
    return _save(fig, out, "history")


def run_throughput(run_dir: Path) -> str | None:
    """throughput.png/.svg of one run directory, if it has throughput figures."""
    if not (Path(run_dir) / "results.csv").exists():
        return None
    return throughput(load([run_dir]), Path(run_dir))
