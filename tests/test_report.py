"""The report reads at a glance: the answer first, one line per datapath; one colour and one
marker per datapath in every figure, in one legend order; sections with nothing to show left
out and named once at the end. On runs built from real ddsperf output (no root needed)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import pandas as pd
import pytest

from k8sdds.analysis import report, styles
from k8sdds.reparse import reparse

from .conftest import fake_run

SVG = "{http://www.w3.org/2000/svg}"


def _built(tmp, repeats: int):
    """One run: the throughput test (1 and 4 KiB) and the latency test (256 B and 1 KiB) on
    host, flannel-hostgw and flannel-vxlan, host fastest, `repeats` repeats of each."""
    run = fake_run(tmp / "runs", repeats=repeats)
    reparse(run.path)
    df = pd.read_csv(run.results_path)
    df = pd.concat([df, df.assign(data_len=df["data_len"] * 4, test=df["test"] + 2)])
    parts = []
    for dp, factor in (("host", 1.0), ("flannel-hostgw", 0.8), ("flannel-vxlan", 0.6)):
        d = df.assign(datapath=dp, path="node-node" if dp == "host" else "pod-pod-cross-node")
        lat = d["metric"].str.startswith("latency_us")
        thr = d["metric"].isin(["throughput_mbps", "samples_per_s"])
        d.loc[thr, "value"] *= factor
        d.loc[lat, "value"] /= factor
        parts.append(d)
    pd.concat(parts).to_csv(run.results_path, index=False)
    out = tmp / "report"
    html = report.build([run.path], out).read_text()
    return out, html


@pytest.fixture(scope="module")
def page(tmp_path_factory):
    return _built(tmp_path_factory.mktemp("report"), repeats=2)


def _section(html: str, key: str) -> str:
    start = html.index(f'<section id="{key}">')
    return html[start:html.index("</section>", start)]


def test_one_repeat_gives_no_verdict_word_in_the_answer_or_the_overhead_tables(tmp_path):
    """The same run with one repeat: every change is shown, none is called better or worse,
    in the answer's lines, its table and the overhead tables alike; the first line says how
    to get a verdict."""
    _, html = _built(tmp_path, repeats=1)
    said = _section(html, "answer") + _section(html, "overhead")
    for word in ("better", "worse"):  # as a verdict: in brackets, or a table's cell
        assert f"({word})" not in said and f">{word}<" not in said
    lines = re.findall(r"<p class='answer'><b>([^<]*)</b></p>", html)
    assert lines[0].startswith("one repeat: no change below is called better or worse")
    assert "--repeats 3" in lines[0]
    assert lines[2] == ("flannel-vxlan: throughput -40 % at 1 KiB; p50 round trip +67 % at "
                        "256 B; p99 round trip +67 % at 256 B; subscriber CPU per gigabit "
                        "+67 % at 1 KiB; one repeat: no verdict")
    assert "-40.0 (no verdict)" in _section(html, "overhead")


def test_the_overhead_tables_read_the_answers_statistic_and_verdict(page):
    """-40 % at 1 KiB and +67 % p50 at 256 B, worse in the answer: the same figures and
    words in the overhead tables (not the pooled percentile without a mark)."""
    _, html = page
    over = _section(html, "overhead")
    assert "-40.0 (worse)" in over and "+66.7 (worse)" in over
    assert "each repeat's p50, mean over repeats" in over


def test_the_answer_is_one_line_per_datapath_before_any_figure(page):
    _, html = page
    lines = re.findall(r"<p class='answer'><b>([^<]*)</b></p>", html)
    assert [line.split(":")[0] for line in lines] == ["flannel-hostgw", "flannel-vxlan"]
    assert lines[1].startswith("flannel-vxlan: throughput -40 % at 1 KiB (worse); "
                               "p50 round trip +67 % at 256 B (worse)")
    assert html.index("class='answer'") < html.index("<img")


def test_sections_with_nothing_to_show_are_left_out_and_named_once(page):
    _, html = page
    ids = re.findall(r'<section id="([a-z]+)">', html)
    assert ids[:3] == ["answer", "throughput", "latency"]
    for empty in ("scaling", "qos", "security", "baselines", "history", "failures",
                  "warnings"):
        assert empty not in ids
    assert ids[-1] == "missing"
    missing = html[html.index('<section id="missing">'):]
    for title in ("Subscribers and multicast", "Network baselines and DDS efficiency",
                  "Across runs: change points"):
        assert title in missing
    assert "not measured in these runs" not in html.replace("Not measured in these runs", "")
    assert html.count("Not measured in these runs") == 1


def _drawn(svg_path):
    """{datapath: (colours, marker shapes)} of the elements a figure names per datapath."""
    tree = ET.parse(svg_path)
    shapes = {el.get("id"): el.get("d") for el in tree.iter(f"{SVG}path") if el.get("id")}
    out: dict[str, tuple[set, set]] = {}
    for el in tree.iter():
        gid = el.get("id", "")
        if not gid.startswith("datapath-"):
            continue
        colours, markers = out.setdefault(gid[len("datapath-"):], (set(), set()))
        for child in el.iter():
            style = child.get("style", "")
            colours.update(c for c in re.findall(r"(?:stroke|fill): ?(#[0-9a-f]{6}|black)",
                                                 style) if c != "#ffffff")
            href = child.get("{http://www.w3.org/1999/xlink}href")
            if child.tag == f"{SVG}use" and href:
                markers.add(shapes.get(href.lstrip("#")))
    return out


def test_one_colour_and_one_marker_per_datapath_in_every_figure(page):
    out, _ = page
    colours: dict[str, set] = {}
    markers: dict[str, set] = {}
    for stem in ("throughput", "latency", "latency_cdf", "cpu"):
        for dp, (c, m) in _drawn(out / f"{stem}.svg").items():
            colours.setdefault(dp, set()).update(c)
            if stem != "cpu":  # bars have no marker
                assert len(m) == 1, (stem, dp, m)
                markers.setdefault(dp, set()).update(m)
    assert set(colours) == {"host", "flannel-hostgw", "flannel-vxlan"}
    for dp, seen in colours.items():
        want = {"#000000", "black"} if dp == "host" else {styles.colour(dp)}
        assert seen and seen <= want, (dp, seen)
    assert all(len(m) == 1 for m in markers.values()), markers  # the same in every figure
    assert len({next(iter(m)) for m in markers.values()}) == 3  # and one per datapath


def test_every_legend_has_the_same_order(page):
    out, _ = page
    for stem in ("throughput", "latency", "latency_cdf", "cpu"):
        text = (out / f"{stem}.svg").read_text()
        labels = re.findall(r"<!-- (host \(no CNI\)|flannel-hostgw|flannel-vxlan) -->", text)
        assert labels[:3] == ["host (no CNI)", "flannel-hostgw", "flannel-vxlan"], stem


def test_styles_are_fixed_per_datapath_and_ordered_alike():
    assert styles.order(["weave", "flannel-vxlan", "host", "zzz", "aaa"]) == [
        "host", "flannel-vxlan", "weave", "aaa", "zzz"]
    assert styles.line("host")["linestyle"] == "--" and styles.colour("host") == "black"
    known = [n for n in styles.order(styles.model.DATAPATHS) if n != "host"][:len(styles.COLOURS)]
    assert len({styles.colour(n) for n in known}) == len(known)  # no two alike
    assert len({styles.marker(n) for n in known}) == len(known)
    # a figure without flannel-hostgw does not shift flannel-vxlan's colour
    assert styles.colour("flannel-vxlan") == styles.palette(["flannel-vxlan"])["flannel-vxlan"]


def test_run_with_report_reads_results_once_and_draws_throughput_once(tmp_path, monkeypatch):
    """`k8sdds run --report`'s ending: one read of results.csv, one throughput.png."""
    from k8sdds.analysis import plots
    from k8sdds.cli import run as cli_run
    from k8sdds.results import RunDir
    from k8sdds.runner import Outcome

    run = fake_run(tmp_path)
    reparse(run.path)
    reads, saved = [], []
    real_read, real_save = RunDir.read_results_text, plots.save
    monkeypatch.setattr(RunDir, "read_results_text",
                        lambda self: reads.append(1) or real_read(self))
    monkeypatch.setattr(plots, "save",
                        lambda fig, out, stem, *a, **k: saved.append(stem)
                        or real_save(fig, out, stem, *a, **k))
    cli_run.execute(None, lambda: Outcome(run.path, repeats=1), as_json=False, quiet=True,
                    plot=True, with_report=True)
    assert len(reads) == 1
    assert saved.count("throughput") == 1 and (run.path / "throughput.png").exists()
    assert (run.path / "report.html").exists()
