"""Report, notebook and compare on a run directory made by a real emulated run; the report is
opened in a real headless Chromium."""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from .emulated_support import cli, interval_fill, requires_namespaces

pytestmark = [pytest.mark.emulated, requires_namespaces()]

ROOT = Path(__file__).parent.parent
SCHEDULE = """dataLen,multicast,numSubscribers,bestEffort,batchSize,latencyTest
256,false,1,false,0,false
4096,false,1,false,0,false
4096,false,2,false,0,false
64,false,1,false,0,true
"""
IMAGES = ["throughput", "samples", "latency", "latency_cdf", "overhead", "subscribers", "cpu"]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("analysis")
    (tmp / "s.csv").write_text(SCHEDULE)
    env = {**os.environ, "K8SDDS_STATE_DIR": str(tmp / "state")}
    proc = cli("run", "--sch", str(tmp / "s.csv"), "--datapath", "host,flannel-vxlan",
               "--duration", "2", "--repeats", "2", "--out", str(tmp / "logs"), "--testbed",
               "kda" + str(os.getpid() % 1000), "--json", "--no-plot", env=env)
    assert proc.returncode == 0, proc.stderr
    outcome = json.loads(proc.stdout)
    assert outcome["failed"] == []
    # the run ends with the answer: the datapath against the host baseline, in words
    # and what 1 and 2 subscribers of 4096 B cost, per datapath (unicast only: no multicast
    # row ran)
    assert [line.split(":")[0] for line in outcome["answer"]] == [
        "flannel-vxlan", "1 to N subscribers on flannel-vxlan (ddsperf udp 4096 B)",
        "1 to N subscribers on host (ddsperf udp 4096 B)"]
    assert outcome["answer"][0].startswith("flannel-vxlan: throughput ")
    assert outcome["answer"][1].endswith("no multicast on it in these runs")
    return Path(outcome["run_dir"])


def test_ddsperfs_stored_round_trips_fill_their_intervals(run_dir):
    """One latency definition on a real ddsperf run: one ping in flight, so each interval's
    round trips times their stored mean round trip come to the interval (ddsperf prints half
    of it: stored as printed, they came to half)."""
    df = pd.read_csv(run_dir / "results.csv")
    fill = [f for test in df[df.latency_test].test.unique()  # 64 B, each datapath
            for f in interval_fill(df, int(test))]
    assert fill and statistics.median(fill) == pytest.approx(1.0, abs=0.10), fill
    assert set(df[df.metric.str.startswith("latency_us")].definition) == {"round trip"}


def test_report_has_every_image_and_section(run_dir, tmp_path):
    out = tmp_path / "report"
    proc = cli("report", str(run_dir), "--out", str(out), env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    page = (out / "report.html").read_text()
    for stem in IMAGES:
        for ext in ("png", "svg"):
            assert (out / f"{stem}.{ext}").stat().st_size > 5_000, f"{stem}.{ext}"
    for section in ("answer", "throughput", "latency", "overhead", "scaling", "cpu", "runs",
                    "environment", "missing"):
        assert f'<section id="{section}">' in page
    environment = page[page.index('<section id="environment">'):]
    assert "flannel.1 (vxlan) 1450" in environment[:environment.index("</section>")]
    for empty in ("qos", "failures"):  # one reliability, one transport; nothing failed
        assert f'<section id="{empty}">' not in page
    assert page.count("data:image/png;base64,") >= len(IMAGES)  # self-contained
    assert "http://" not in page and "https://" not in page  # nothing fetched
    assert run_dir.name in page and "0 failed repeat(s)" in page
    assert "<b>flannel-vxlan: throughput" in page  # the answer opens the report
    assert oct((out / "report.html").stat().st_mode & 0o777) == "0o644"


def test_every_figure_draws_the_host_baseline(run_dir, tmp_path):
    """In the data drawn (the SVG's elements named per datapath), not only the legend."""
    out = tmp_path / "report"
    assert cli("report", str(run_dir), "--out", str(out), env=dict(os.environ)).returncode == 0
    for stem in ("throughput", "samples", "latency", "latency_cdf"):
        svg = (out / f"{stem}.svg").read_text()
        for dp in ("host", "flannel-vxlan"):
            drawn = re.search(rf'<g id="datapath-{dp}">\s*<path[^>]* d="([^"]+)"', svg)
            assert drawn, f"{stem}: no {dp} drawn"
            assert drawn[1].count(" L ") + drawn[1].count("\nL ") >= 1 or stem == "latency", \
                f"{stem}: {dp} is not a line"


def test_the_answer_equals_the_results_computed_by_hand(run_dir):
    import pandas as pd

    from k8sdds.analysis import answer, load, tables

    runs = load.load([run_dir])
    found = {(c.datapath, c.metric, c.data_len): c
             for c in answer.costs(tables.throughput(runs), tables.latency(runs))}
    df = pd.read_csv(run_dir / "results.csv")
    s = df[(df.kind == "summary") & (df.metric == "throughput_mbps")
           & df.role.str.startswith("sub") & (df.num_subscribers == 1)]
    per_repeat = s.groupby(["datapath", "data_len", "repeat"]).value.mean()
    for size in (256, 4096):
        host = per_repeat["host"][size].mean()
        vxlan = per_repeat["flannel-vxlan"][size].mean()
        c = found[("flannel-vxlan", "throughput", size)]
        assert c.host == pytest.approx(host) and c.value == pytest.approx(vxlan)
        assert c.change_pct == pytest.approx((vxlan / host - 1) * 100)


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.skipif(_chromium() is None, reason="needs Debian chromium (make test installs it)")
def test_report_opens_in_headless_chromium(run_dir, tmp_path):
    out = tmp_path / "report"
    assert cli("report", str(run_dir), "--out", str(out), env=dict(os.environ)).returncode == 0
    url = (out / "report.html").as_uri()
    flags = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
             "--no-first-run", "--disable-background-networking", "--disable-component-update",
             "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}",
             "--enable-logging=stderr", "--v=0"]
    shot = subprocess.run(flags + ["--window-size=1200,3000", f"--screenshot={tmp_path}/r.png",
                                   url], capture_output=True, text=True, timeout=120)
    assert shot.returncode == 0, shot.stderr[-2000:]
    png = (tmp_path / "r.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000
    console = [line for line in shot.stderr.splitlines() if "CONSOLE" in line]
    assert not console, console
    # the DOM after scripts ran: the table of contents was built, so no script failed
    dom = subprocess.run(flags + ["--dump-dom", url], capture_output=True, text=True,
                         timeout=120)
    assert dom.returncode == 0
    toc = re.findall(r"<li><a href=\"#[a-z]+\">", dom.stdout)
    assert len(toc) == dom.stdout.count("<section id=")
    # the answer, in words, comes before the first figure
    assert dom.stdout.index("<b>flannel-vxlan: ") < dom.stdout.index("<img")
    assert "Uncaught" not in dom.stderr


def test_report_over_two_runs_combines_them(run_dir, tmp_path):
    other = tmp_path / (run_dir.name[:-4] + "ffff")
    shutil.copytree(run_dir, other)
    manifest = json.loads((other / "manifest.json").read_text())
    manifest["run_id"] = other.name
    (other / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "both"
    proc = subprocess.run([sys.executable, "-m", "k8sdds", "report", str(run_dir), str(other),
                           "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    page = (out / "report.html").read_text()
    assert run_dir.name in page and other.name in page and "2 run(s)" in page


def test_compare_a_run_with_itself_passes_the_gate(run_dir):
    proc = cli("compare", str(run_dir), str(run_dir), "--fail-if", "throughput_mbps:-5%",
               "--json", env=dict(os.environ))
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)["rows"]
    assert {r["metric"] for r in rows} == {"throughput_mbps", "latency_us_p50",
                                           "latency_us_p99"}
    assert all(abs(r["ratio"] - 1) < 1e-9 for r in rows)


def test_notebook_executes(run_dir):
    nbformat = pytest.importorskip("nbformat")
    from nbclient import NotebookClient

    nb = nbformat.read(ROOT / "notebooks" / "analysis.ipynb", as_version=4)
    os.environ["K8SDDS_RUNS"] = str(run_dir)
    try:
        NotebookClient(nb, timeout=300, kernel_name="python3",
                       resources={"metadata": {"path": str(ROOT)}}).execute()
    finally:
        os.environ.pop("K8SDDS_RUNS")
    text = json.dumps([o for c in nb.cells if c.cell_type == "code" for o in c.outputs])
    assert "1 run(s)" in text and "flannel-vxlan" in text
    assert '"output_type": "error"' not in text
    assert "image/png" in text  # the plot was drawn


@pytest.mark.parametrize("page", ["README.md", "docs/tutorials/first-run.md"])
def test_the_pages_read_the_results_blocks_run_as_written(run_dir, tmp_path, page):
    """The README's "Read the results" block and the first run's, their lines read from the
    page and run in a folder of their own, logs/RUN_A and logs/RUN_B both copies of this
    module's run (a run against itself: compare has a verdict, within noise, and the gate
    passes)."""
    from .test_docs_commands import blocks

    [block] = [b for b in blocks() if b.page == ROOT / page and b.commands and
               b.commands[0][:2] == ("k8sdds", "report")]
    (tmp_path / "logs").mkdir()
    for name in ("RUN_A", "RUN_B"):
        shutil.copytree(run_dir, tmp_path / "logs" / name)  # a link is refused, by design
    for words in block.commands:
        done = subprocess.run([sys.executable, "-m", "k8sdds", *words[1:]], cwd=tmp_path,
                              capture_output=True, text=True, timeout=300,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0, (words, done.stdout[-2000:], done.stderr[-2000:])
    assert (tmp_path / "report" / "report.html").is_file()
    import pandas as pd

    assert len(pd.read_parquet(tmp_path / "run.parquet")) == len(
        pd.read_csv(run_dir / "results.csv"))


def test_the_manifest_holds_each_datapaths_node_fingerprints(run_dir):
    """Taken by the real run at each datapath's first repeat, in the nodes' and pods'
    namespaces: flannel-vxlan's flannel.1 (a VXLAN device of MTU 1450, the kernel's own) on
    the nodes, the pods' eth0 at 1450, none of it on host."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    prints = manifest["fingerprints"]
    assert set(prints) == {"host", "flannel-vxlan"}
    for node, fp in prints["flannel-vxlan"].items():
        assert fp["interfaces"]["flannel.1"]["kind"] == "vxlan", node
        assert fp["interfaces"]["flannel.1"]["mtu"] == 1450
        assert "generic-receive-offload" in fp["interfaces"]["flannel.1"]["offloads"]
        assert fp["kernel"] == os.uname().release and fp["cpu_count"] == os.cpu_count()
        assert fp["cni"]["mode"] == "VXLAN"
        assert {ifs["eth0"]["mtu"] for ifs in fp["pods"].values()} == {1450}
    for fp in prints["host"].values():
        assert "flannel.1" not in fp["interfaces"] and fp["pods"] == {}


def test_the_export_block_runs_as_written(run_dir, tmp_path):
    """docs/how-to/analyse.md's exports, read from the page and run in a folder of their own
    on this module's real run (logs/RUN_A its copy): the JSON has the fields
    github-action-benchmark documents, the OpenMetrics text reads back through
    prometheus-client's parser with the subscribers' mean throughput the run measured."""
    import json as json_

    import pandas as pd
    from prometheus_client.openmetrics.parser import text_string_to_metric_families

    from .test_docs_commands import blocks

    [block] = [b for b in blocks() if b.page == ROOT / "docs/how-to/analyse.md" and
               b.commands and b.commands[0][:2] == ("k8sdds", "results")]
    (tmp_path / "logs").mkdir()
    shutil.copytree(run_dir, tmp_path / "logs" / "RUN_A")
    for words in block.commands:
        done = subprocess.run([sys.executable, "-m", "k8sdds", *words[1:]], cwd=tmp_path,
                              capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
        assert done.returncode == 0, (words, done.stderr[-2000:])
    for name, metrics in (("bigger.json", {"throughput_mbps", "samples_per_s"}),
                          ("smaller.json", {"lost"})):
        entries = json_.loads((tmp_path / name).read_text())
        assert entries and all({"name", "unit", "value"} <= set(e) <= {
            "name", "unit", "value", "range", "extra"} for e in entries)
        assert {e["name"].rsplit(": ", 1)[1] for e in entries} >= metrics
    df = pd.read_csv(run_dir / "results.csv")
    thr = df[(df.kind == "summary") & (df.metric == "throughput_mbps")
             & df.role.str.startswith("sub") & (df.datapath == "host")
             & (df.num_subscribers == 1)]
    expected = thr.groupby(["data_len", "repeat"]).value.mean().groupby("data_len").mean()
    families = {f.name: f for f in text_string_to_metric_families(
        (tmp_path / "run.om").read_text())}
    got = {int(s.labels["payload_bytes"]): s.value for s in families["k8sdds_cell_mean"].samples
           if s.labels["metric"] == "throughput_mbps" and s.labels["datapath"] == "host"
           and "num_subscribers=" not in s.labels["test"]}  # the one-subscriber tests
    assert got == pytest.approx(expected.to_dict())


def test_the_service_shows_the_runs_answer_and_plots_on_its_page(run_dir, tmp_path):
    """`k8sdds serve` over the folder of this module's run (no --add-runs: it adds it by
    itself): the run's page opens with the answer `k8sdds run` gave and its plot."""
    import json as json_
    import time

    from .test_serve import _free_port, _get, _wait_listening

    out = tmp_path / "logs"
    shutil.copytree(run_dir, out / run_dir.name)
    drawn = cli("plot", str(out / run_dir.name), env=dict(os.environ))
    assert drawn.returncode == 0, drawn.stderr
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "k8sdds", "serve", "--listen",
                             f"127.0.0.1:{port}", "--out", str(out), "--watch", "0.2",
                             "--db", f"sqlite:///{tmp_path / 'k8sdds.db'}"],
                            env={**os.environ, "PYTHONPATH": str(ROOT)},
                            stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_listening(proc, port)
        deadline = time.monotonic() + 60
        while not json_.loads(_get(f"{base}/api/runs")[1]) and time.monotonic() < deadline:
            time.sleep(0.2)  # the watcher's first sweep
        status, page = _get(f"{base}/runs/{run_dir.name}")
        assert status == 200, page
        assert re.search(r'<ul id="answer"><li>flannel-vxlan: throughput ', page), page[:3000]
        assert f'src="/runs/{run_dir.name}/plots/throughput.png"' in page
        # and where it ran: the fingerprints, flannel-vxlan's VXLAN device among them
        table = page[page.index('<table id="fingerprint">'):]
        assert "flannel.1 (vxlan) 1450" in table[:table.index("</table>")]
        import urllib.request

        with urllib.request.urlopen(f"{base}/runs/{run_dir.name}/plots/throughput.png",
                                    timeout=30) as got:
            assert got.status == 200 and got.read(8) == b"\x89PNG\r\n\x1a\n"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert "Traceback" not in proc.stderr.read()
