"""Plots drawn from the tidy results table (seaborn)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only; no display needed

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from k8sdds.analysis.load import summaries  # noqa: E402


def throughput(df: pd.DataFrame, out: Path) -> bool:
    """throughput.png: subscriber throughput (Mb/s) against payload, a line per datapath.

    Each point is the mean over subscribers and repeats (means of means are fine; no
    percentile is averaged here), with a 95% confidence interval when there are several.
    Returns False when the table holds no throughput figure to plot.
    """
    data = summaries(df, "throughput_mbps")
    data = data[~data["latency_test"].astype(str).str.lower().eq("true")]
    if data.empty:
        return False
    sns.set_theme(style="whitegrid")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sns.lineplot(data=data, x="data_len", y="value", hue="datapath", marker="o",
                 errorbar=("ci", 95), ax=ax)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("payload (bytes)")
    ax.set_ylabel("throughput per subscriber (Mb/s)")
    ax.set_title("DDS throughput by datapath")
    fig.tight_layout()
    tmp = out.with_name(f".{out.name}.tmp.png")
    fig.savefig(tmp, dpi=120)
    plt.close(fig)
    tmp.replace(out)
    return True
