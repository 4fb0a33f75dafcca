"""`k8sdds report`: plots (PNG and SVG) and one self-contained report.html (images embedded,
no network needed)."""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path

import pandas as pd

from k8sdds import __version__
from k8sdds.analysis import (
    answer,
    discovery,
    history,
    middlewares,
    plots,
    references,
    subscribers,
    tables,
    under_load,
)
from k8sdds.analysis.load import Runs, load
from k8sdds.results import atomic_write

SECTIONS = [("answer", "The answer: each datapath against host, middlewares side by side"),
            ("throughput", "Throughput"), ("latency", "Latency"),
            ("overhead", "Overhead against host"), ("scaling", "Subscribers and multicast"),
            ("qos", "Reliable vs best effort, transports"),
            ("security", "Security: TLS, DDS Security, encrypted datapaths"),
            ("middlewares", "Middlewares side by side: DDS, Zenoh, MQTT"),
            ("discovery", "Discovery: time and traffic against participants"),
            ("under_load", "Round trip under load"),
            ("baselines", "Network baselines and DDS efficiency"), ("cpu", "CPU"),
            ("history", "Across runs: change points"), ("warnings", "Warnings"),
            ("runs", "Runs"), ("environment", "Where it ran: the nodes' fingerprints"),
            ("failures", "Failed repeats"),
            ("missing", "Not measured in these runs")]

# the middleware table's columns as the report names them
MIDDLEWARE_COLUMNS = {"throughput_mbps": "Mb/s", "throughput_mbps_low": "Mb/s low",
                      "throughput_mbps_high": "Mb/s high", "p50_us": "p50 (µs)",
                      "p50_us_low": "p50 low", "p50_us_high": "p50 high",
                      "p99_us": "p99 (µs)", "p99_us_low": "p99 low", "p99_us_high": "p99 high",
                      "via": "broker or router on"}

# the discovery table's columns as the report names them
DISCOVERY_COLUMNS = {"time_s": "time (s)", "time_low": "low", "time_high": "high",
                     "median_s": "median (s)", "late_s": "latest start (s)",
                     "why_failed": "why failed", "discovery_kB": "kB a node",
                     "discovery_kBps": "kB/s discovering", "discovery_kBps_low": "low ",
                     "discovery_kBps_high": "high ", "discovery_pps": "packets/s discovering",
                     "steady_kBps": "kB/s steady", "steady_kBps_low": "low  ",
                     "steady_kBps_high": "high  ", "steady_pps": "packets/s steady"}

CSS = """
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
h1{margin-bottom:0}nav ul{columns:3}img{max-width:100%;border:1px solid #ddd}
table{border-collapse:collapse;margin:1em 0;font-size:90%}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f3f3f3}
.note{color:#666}.answer{font-size:110%;margin:.3em 0}.warn{color:#a40}code{background:#f5f5f5}
"""
# builds the table of contents from the sections, so a broken report shows in the console
SCRIPT = """
document.addEventListener('DOMContentLoaded', () => {
  const list = document.getElementById('toc');
  document.querySelectorAll('section > h2').forEach(h => {
    const li = document.createElement('li');
    li.innerHTML = '<a href="#' + h.parentElement.id + '">' + h.textContent + '</a>';
    list.appendChild(li);
  });
});
"""


def _img(out: Path, stem: str | None, alt: str) -> str:
    """The figure embedded, or nothing when the runs had nothing to draw."""
    if stem is None:
        return ""
    data = base64.b64encode((out / f"{stem}.png").read_bytes()).decode()
    return (f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{data}">'
            f'<figcaption>{html.escape(alt)} (also <code>{stem}.svg</code>)</figcaption>'
            f'</figure>')


def _table(df: pd.DataFrame, floatfmt: str = "{:.1f}", index: bool = False) -> str:
    if df.empty:
        return ""
    return df.to_html(float_format=floatfmt.format, na_rep="-", border=0, escape=True,
                      index=index)


def _references(mw: pd.DataFrame) -> str:
    """How k8sdds' own clients of the middlewares shown stand against each middleware's
    reference tool, as last measured (analysis/references.csv)."""
    shown = set(mw["middleware"]) if not mw.empty else set()
    ref = references.table(shown)
    if ref.empty:
        return ""
    return ("<h3>Against each middleware's own tools</h3><p>k8sdds runs its own clients of "
            "Zenoh and MQTT (k8sdds-zenoh, k8sdds-mqtt); beside the middleware's reference "
            "programs on one path, interleaved, they read as below (" +
            html.escape(references.measured(shown)) + "). A ratio near 1 means a figure "
            "above is the middleware's, not the client's: where one middleware is slower "
            "than another, its own tools are too (docs/how-to/zenoh.md says where Zenoh's "
            "round trip goes).</p>" + _table(ref, "{:.0f}"))


def _shown(*parts: str) -> bool:
    """Whether a section has a figure or a table to show (prose alone is not content)."""
    return any("<figure>" in p or "<table" in p for p in parts)


def _section(key: str, body: str) -> str:
    title = dict(SECTIONS)[key]
    return f'<section id="{key}"><h2>{html.escape(title)}</h2>{body}</section>'


def _environment_html(runs: Runs) -> str:
    """Each run's fingerprints, per datapath and node (k8sdds.fingerprint.rows); "" where no
    run has any (runs older than fingerprints, imported data)."""
    from k8sdds import fingerprint

    parts = []
    for rid, m in runs.manifests.items():
        found = fingerprint.rows(m.get("fingerprints") or {})
        if found:
            parts.append(f"<h3>{html.escape(rid)}</h3>" + _table(pd.DataFrame(found)))
    return ("<p>What decides a network figure besides the test, as each run found it at "
            "each datapath's first repeat: interfaces on the path (kind, MTU, offloads), "
            "kernel, CPU and governor, runtime, CNI, socket buffer ceilings. "
            "<code>k8sdds compare</code> and <code>k8sdds history</code> show what differs."
            "</p>" + "".join(parts)) if parts else ""


def _runs_html(runs: Runs) -> str:
    parts = []
    for rid, m in runs.manifests.items():
        env = m.get("environment", {})
        cluster = m.get("cluster", {})
        nodes = ", ".join(f"{n['name']} ({n.get('role', '')}, {n.get('arch', '')}, "
                          f"{n.get('profile', '')})" for n in cluster.get("nodes", []))
        items = {
            "status": m.get("status"), "created": m.get("created"),
            "command line": " ".join(m.get("command_line", [])),
            "schedule": f"{(m.get('schedule') or {}).get('path')} "
                        f"(sha256 {(m.get('schedule') or {}).get('sha256', '')[:12]})",
            "backend": m.get("backend"), "datapaths": ", ".join(m.get("datapaths", [])),
            "nodes": nodes,
            "CPU budgets": "; ".join(f"{name}: {p.get('cpu')} CPU ({p.get('cpu_from', '')})"
                                     for name, p in (cluster.get("profiles") or {}).items()
                                     if p.get("cpu") is not None) or "-",
            "not applied": "; ".join(cluster.get("not_applied", [])) or "-",
            "the emulator cannot show": "; ".join(cluster.get("cannot_show", [])) or "-",
            "tools": ", ".join(f"{k} {v}" for k, v in m.get("tools", {}).items()),
            "controller (the computer k8sdds ran on)":
                f"{env.get('cpu_model')} x{env.get('cpu_count')}, {env.get('memory')}, "
                f"kernel {env.get('kernel')}, {env.get('os')}, Python {env.get('python')}",
            "repeats": f"{len(m.get('repeats', {}))} "
                       f"({sum(e.get('status') == 'failed' for e in m.get('repeats', {}).values())}"
                       " failed)",
        }
        rows = "".join(f"<tr><th>{html.escape(k)}</th><td style='text-align:left'>"
                       f"{html.escape(str(v))}</td></tr>" for k, v in items.items())
        parts.append(f"<h3>{html.escape(rid)}</h3><table>{rows}</table>")
    return "".join(parts)


def build(run_dirs: Sequence[Path], out: Path, runs: Runs | None = None) -> Path:
    """Write the plots and report.html into `out`; return the report's path (`runs`: the
    run directories already loaded, so a command reads results.csv once)."""
    runs = runs if runs is not None else load(run_dirs)
    out.mkdir(parents=True, exist_ok=True)
    thr = tables.throughput(runs)
    lat = tables.latency(runs)
    over = tables.overhead(thr)
    # each repeat's p50, then over the repeats: the statistic the answer reads
    lat_over = tables.overhead(lat.drop(columns=["p50"]).rename(columns={
        "p50_mean": "mean", "p50_ci_low": "ci_low", "p50_ci_high": "ci_high"}), "p50",
        enough="p50_enough_each") if not lat.empty else lat
    shown = ["datapath", "data_len", "num_subscribers", "multicast", "best_effort",
             "transport", "repeats"]
    thr_view = thr[shown + ["mean", "ci_low", "ci_high"]].assign(
        **{"cv %": thr["cv"] * 100}) if not thr.empty else thr
    lat_view = lat[shown + ["roundtrips", "p50", "p90", "p99"]] if not lat.empty else lat
    sec = tables.security(thr, lat)
    warnings = tables.warnings(thr, lat)
    failed = runs.failed()

    mw = middlewares.table(thr, lat, middlewares.hubs(runs.manifests))
    disc = discovery.table(runs)
    loaded = under_load.table(runs)
    fan = subscribers.table(runs)
    hist = history.series(runs)
    changes = history.changes(hist, runs.manifests) if not hist.empty else []
    found, said = answer.of_runs(runs, thr, lat)
    thr_figs = (_img(out, plots.throughput(runs, out), "throughput (Mb/s) against payload") +
                _img(out, plots.throughput(runs, out, "samples_per_s"),
                     "throughput (samples/s) against payload") +
                _img(out, plots.by_protection(runs, out),
                     "throughput against payload per transport and DDS Security"))
    lat_figs = (_img(out, plots.latency_percentiles(runs, out),
                     "round-trip percentiles against payload") +
                _img(out, plots.latency_cdf_plot(runs, out), "round-trip CDF"))
    over_thr, over_lat = (tables.overhead_pivot(tables.marked(o), "cell") if not o.empty
                          else o for o in (over, lat_over))
    matrix, efficiency, resources = (tables.matrix(runs), tables.efficiency(runs),
                                     tables.resources(runs))
    # each section's body, or "" when the runs hold nothing it could show
    bodies = {
        "answer": ("".join(f"<p class='answer'><b>{html.escape(line)}</b></p>"
                           for line in said) +
                   "<p class='note'>Each change against host is a mean over repeats with "
                   "its 95 % interval (Student's t): better or worse where the two intervals "
                   "are apart, within noise where they overlap, and no verdict with one "
                   "repeat (no interval: the change is shown, no word said). The repeats' "
                   "order: " + html.escape(answer.order_of(runs.manifests)) + ". "
                   "Throughput: per subscriber. Round "
                   "trip: each repeat's percentile (from its ddsperf per-second quantiles), "
                   "then over the repeats; within noise too where a repeat has too few "
                   "round trips for the percentile. Subscriber CPU: per unit of work, "
                   "core-seconds per gigabit received (CPU per second is in the CPU "
                   "section).</p>" + _table(answer.table(found), "{:.3g}")) if said else "",
        "throughput": thr_figs + (
            "<p>Mean per subscriber over repeats, with the 95 % confidence interval "
            "(Student's t) and the coefficient of variation.</p>" + _table(thr_view)
            if not thr_view.empty else ""),
        "latency": lat_figs + (
            "<p>Percentiles of the round-trip distribution pooled over repeats from "
            "ddsperf's per-second quantiles; percentiles are never averaged.</p>" +
            _table(lat_view) if not lat_view.empty else ""),
        "overhead": _img(out, plots.overhead_heatmap(
                        plots.base(over) if not over.empty else over, out),
                         "throughput against host (%), payload sweep") +
                    ("<p>The statistics and verdicts of the answer: a mean over repeats with "
                     "its 95 % interval on each side, the change called better or worse only "
                     "where the intervals are apart.</p>" if not over.empty else "") +
                    ("<h3>Throughput against host (%), every test</h3>" + _table(
                        over_thr, index=True) if not over_thr.empty else "") +
                    ("<h3>p50 round trip against host (%): each repeat's p50, mean over "
                     "repeats</h3>" + _table(over_lat, index=True)
                     if not over_lat.empty else ""),
        "scaling": _img(out, plots.subscribers(runs, out),
                        "throughput against subscribers, unicast vs multicast") + (
            "<p>Per datapath and throughput test, by unicast and multicast and the number "
            "of subscribers: each subscriber's and the aggregate throughput (Mb/s), the loss "
            "(% of what was sent to them) and the publisher's CPU per message it sent (µs), "
            "each the mean over repeats with its 95 % interval.</p>" +
            _table(fan.drop(columns="multicast"), "{:.3g}") if not fan.empty else ""),
        "qos": _img(out, plots.reliability(runs, out), "reliable vs best effort") +
               _img(out, plots.transports(runs, out), "UDP vs TCP (vs TLS)"),
        "security": _img(out, plots.security(sec, out), "throughput by protection, side by side")
                    + ("<p>Mean throughput per subscriber and p50 round trip of each "
                       "protection, and its change against plain UDP without DDS Security on "
                       "the same datapath (an encrypted datapath against its unencrypted "
                       "counterpart).</p>" + _table(sec.rename(columns={
                           "vs_plain_pct": "vs plain UDP (%)", "throughput_mbps": "Mb/s",
                           "p50_us": "p50 (µs)"})) if not sec.empty else ""),
        "middlewares": _img(out, plots.middlewares(mw, out),
                            "throughput and round trip against payload, per middleware") +
                       ("<p>Mean throughput per subscriber and p50/p99 round trip (each "
                        "repeat's percentile, mean over repeats) of each middleware on the "
                        "same datapath and payload, each with its 95 % interval (low, high; "
                        "none with one repeat).</p>" + _table(
                            mw.drop(columns="engine").rename(columns=MIDDLEWARE_COLUMNS))
                        if not mw.empty else "") + _references(mw),
        "discovery": _img(out, plots.discovery(disc, out),
                          "discovery time and traffic against participants, per mode") + (
            "<p>Per datapath, discovery mode and number of participants (dds-discovery, "
            "started together): the time until the slowest participant had matched every "
            "peer's reader and writer (mean over repeats, 95 % interval), the median "
            "participant's, the latest start after the common instant, the bytes in and "
            "out a node's participants' interfaces carried to discover, and their traffic a "
            "second while discovering and at steady state (kB/s, packets/s). A failed "
            "repeat is one where not every peer was matched in time.</p>" +
            _table(disc.rename(columns=DISCOVERY_COLUMNS), "{:.3g}")
            if not disc.empty else ""),
        "under_load": _img(out, under_load.plot(loaded, out),
                           "round trip against the load beside it") + (
            "<p>Per datapath and round-trip test: its p50 and p99 (each repeat's, then the "
            "mean over repeats with its 95 % interval) on the idle path and beside a stream "
            "of the same engine between the same nodes, at a share of the path's capacity "
            "(measured in the run: that engine's throughput at the stream's sample size) or "
            "as fast as it goes (max), and what the stream's receiver got (Mb/s).</p>" +
            _table(loaded.drop(columns="share"), "{:.3g}") if not loaded.empty else ""),
        "baselines": ("<p>The network itself on each path (ping, iperf3, qperf: means over "
                      "repeats; qperf latency as a round trip, twice its one-way figure), "
                      "beside ddsperf on the same paths.</p>" + _table(matrix)
                      if not matrix.empty else "") +
                     ("<h3>DDS efficiency</h3><p>ddsperf throughput as a share of the raw TCP "
                      "and UDP throughput on the same path, and its p50 round trip as a "
                      "multiple of ping's and qperf's.</p>" + _table(efficiency, "{:.2f}")
                      if not efficiency.empty else "") +
                     ("<h3>What the datapath itself costs</h3><p>CPU of the datapath's own "
                      "processes (wireguard-go) and the kernel's softirq time while each "
                      "throughput test ran, in % of one core (on the emulated backend all "
                      "nodes share one kernel, so softirq is the whole machine's).</p>" +
                      _table(resources) if not resources.empty else ""),
        "cpu": _img(out, plots.cpu(runs, out), "CPU of publisher and subscribers"),
        "history": _img(out, plots.history(hist, out, changes),
                        "throughput across runs") +
                   "<p>Change points of each test's mean across the runs (Apache Otava's "
                   f"e-divisive means, p &lt; {history.MAX_PVALUE:g}); a few runs rarely "
                   "show one.</p>" +
                   (_table(history.table(changes), "{:.3g}") if changes else
                    "<p>No change point.</p>")
                   if not hist.empty else "",
        "warnings": "".join(f'<p class="warn">{html.escape(w)}</p>' for w in warnings),
        "runs": _runs_html(runs),
        "environment": _environment_html(runs),
        "failures": ("<p class='note'>" + html.escape(
                        f"Their rows ({runs.excluded}) are left out of every figure and table "
                        "above (--include-failed counts them)." if runs.excluded else
                        "Nothing they parsed is in the figures and tables above.")
                     + "</p>" + _table(pd.DataFrame(failed, columns=["run", "repeat",
                                                                     "reason"])))
                    if failed else "",
    }
    # prose sections count when they say something; the others need a figure or a table
    prose = {"answer", "warnings", "runs"}
    body = [_section(key, bodies[key]) for key, _ in SECTIONS
            if key in bodies and (bodies[key] if key in prose else _shown(bodies[key]))]
    missing = [title for key, title in SECTIONS if key not in prose | {"failures"}
               and key in bodies and not _shown(bodies[key])]
    if not said:
        missing.insert(0, "the answer (no host baseline beside a datapath: run with "
                          "--datapath host,...)")
    if missing:
        body.append(_section("missing", "<p class='note'>" + html.escape("; ".join(missing)) +
                             ".</p>"))
    summary = (f"{len(runs.manifests)} run(s), {len(runs.summaries)} summary values, "
               f"{len(failed)} failed repeat(s), "
               f"{len(warnings) or 'no'} warning(s)")
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    page = (f"<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>k8sdds report</title><style>{CSS}</style><script>{SCRIPT}</script>"
            f"</head><body><h1>k8sdds report</h1><p class='note'>{summary}; made {now} by "
            f"k8sdds {__version__}</p>"
            f"<nav><ul id='toc'></ul></nav>{''.join(body)}</body></html>\n")
    path = out / "report.html"
    atomic_write(path, page)
    return path
