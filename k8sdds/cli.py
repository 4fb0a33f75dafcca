"""The `k8sdds` command: run, parse, plot, testbed."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from k8sdds import model, schedule, stopping
from k8sdds.errors import UserError

app = typer.Typer(add_completion=False, no_args_is_help=True,
                  help="Benchmark DDS publish/subscribe on (emulated) edge Kubernetes clusters.")
testbed_app = typer.Typer(no_args_is_help=True,
                          help="Manage the emulated edge cluster by hand.")
app.add_typer(testbed_app, name="testbed")

out_console = Console()
err_console = Console(stderr=True)


class RichProgress:
    """Progress bar on stderr: test i of n, repeat, elapsed, ETA."""

    def __init__(self) -> None:
        self._bar = Progress(TextColumn("{task.description}"), BarColumn(),
                             MofNCompleteColumn(), TimeElapsedColumn(), TextColumn("ETA"),
                             TimeRemainingColumn(), console=err_console, transient=False)
        self._task = None

    def start(self, total: int) -> None:
        self._bar.start()
        self._task = self._bar.add_task("starting", total=total)

    def step(self, description: str) -> None:
        self._bar.update(self._task, description=description)

    def advance(self) -> None:
        self._bar.advance(self._task)

    def stop(self) -> None:
        self._bar.stop()


def _choice(value: str | None, allowed: list[str], option: str) -> str | None:
    if value is None:
        return None
    low = value.strip().lower()
    if low not in allowed:
        raise typer.BadParameter(f"{value!r} is not one of {', '.join(allowed)}",
                                 param_hint=option)
    return low


def _datapath_list(value: str, offered: list[str]) -> list[str]:
    names = [v.strip().lower() for v in value.split(",") if v.strip()]
    if not names:
        raise typer.BadParameter("give at least one datapath", param_hint="--datapath")
    for name in names:
        if name not in model.DATAPATHS or name not in offered:
            raise typer.BadParameter(f"{name!r} is not one of {', '.join(offered)}",
                                     param_hint="--datapath")
    return list(dict.fromkeys(names))


# options `run` and `baseline` share, defined once
OUT = typer.Option(Path("logs"), "--out", help="Where run directories go.")
MIN_FREE = typer.Option(
    64, "--min-free", min=0, help="MiB that must stay free where the run writes: checked "
    "before the run and before each repeat; below it the run stops, resumable.")
BACKEND = typer.Option(
    "emulated", "--backend", help="Where tests run: emulated (namespaces on this machine), "
    "kubernetes (pods on the cluster of --kubeconfig) or ssh (bare hosts of --inventory).")
SSH_INVENTORY = typer.Option(
    None, "--inventory", help="ssh: the hosts (YAML, as for `k8sdds cluster`); the "
    "publisher on the first worker, subscribers on the others.")
SSH_KNOWN_HOSTS = typer.Option(
    None, "--known-hosts", help="ssh: known_hosts the host keys are checked against [the "
    "inventory's, ~/.ssh/known_hosts].")
KUBECONFIG = typer.Option(
    None, "--kubeconfig", help="kubernetes: kubeconfig file [$KUBECONFIG, ~/.kube/config].")
CONTEXT = typer.Option(None, "--context", help="kubernetes: kubeconfig context [current].")
NAMESPACE = typer.Option(
    None, "--namespace", help="kubernetes: namespace to run in (made if absent) [a new "
    "k8sdds-XXXXXX per run]; everything the run makes there is removed at the end.")
IMAGE = typer.Option(
    None, "--image", help="kubernetes: engine image (ddsperf, iperf3, qperf, ping; see "
    "docker/Dockerfile) [ghcr.io/k8sdds/engines:0.1].")
PUB_NODE = typer.Option(
    None, "--pub-node", help="kubernetes: node of the publisher (the first role) [the first "
    "Ready worker by name].")
SUB_NODES = typer.Option(
    None, "--sub-nodes", help="kubernetes: comma-separated nodes the subscribers are spread "
    "over [the other Ready workers].")
ARCH = typer.Option(
    None, "--arch", help="kubernetes: only workers of this architecture (kubernetes.io/arch: "
    "amd64, arm64, arm), for hybrid clusters.")
POD_TIMEOUT = typer.Option(
    120.0, "--pod-timeout", min=1, help="kubernetes: seconds a pod gets to be running "
    "(scheduled, image pulled) before its repeat fails with the pod's reason.")
TESTBED = typer.Option(
    "k8sdds", "--testbed", help="emulated: testbed name (namespace prefix); an existing "
    "testbed of that name is reused and left up, else one is built and removed after.")
PROFILE = typer.Option(
    None, "--profile", help="emulated: edge profile of every worker: "
    "cloud, rpi3b, rpi4, rpi3b-wifi (see `k8sdds testbed profiles`).")
CLUSTER = typer.Option(
    None, "--cluster", help="emulated: cluster spec (YAML): nodes with name, role, arch, "
    "profile.")
REPORT = typer.Option(
    False, "--report", help="Write report.html (and every plot) into the run directory at "
    "the end, as `k8sdds report` does.")
QUIET = typer.Option(False, "--quiet", "-q", help="No progress bar.")
AS_JSON = typer.Option(False, "--json", help="Print the outcome as JSON on stdout.")


# the options of `run` and `baseline` that go to the backends (each takes its own)
BACKEND_OPTIONS = ("testbed", "nodes", "profile", "cluster", "kubeconfig", "context",
                   "namespace", "image", "pub_node", "sub_nodes", "arch", "pod_timeout",
                   "inventory", "known_hosts")


def _options(values: dict) -> dict:
    """The backend options among a command's parameters."""
    return {k: values[k] for k in BACKEND_OPTIONS}


def _backend(backend: str, **options):
    """The chosen backend, from the registry, given every backend option (each uses its
    own); returns (name, backend)."""
    from k8sdds.deployment import BACKENDS

    name = _choice(backend, list(BACKENDS), "--backend")
    for other, factory in BACKENDS.items():
        for option in getattr(factory, "options", ()):
            if (other != name and options.get(option) is not None
                    and option not in getattr(BACKENDS[name], "options", ())
                    and option not in ("testbed", "nodes", "pod_timeout")):  # have defaults
                flag = "--" + option.replace("_", "-")
                raise UserError(f"{flag} is an option of --backend {other}, not {name}")
    if options.get("sub_nodes") is not None:
        options["sub_nodes"] = [n.strip() for n in options["sub_nodes"].split(",")
                                if n.strip()]
    options = {k: v for k, v in options.items() if v is not None}
    return name, BACKENDS[name](**options)


def _announce(tests, backend_name: str, what: str = "") -> None:
    err_console.print(f"{what}{len(tests)} tests ({sum(t.repeats for t in tests)} repeats) on "
                      f"{backend_name}, datapaths "
                      f"{', '.join(dict.fromkeys(t.datapath for t in tests))}")


@app.command()
def run(
    sch: Path | None = typer.Option(None, "--sch", "--schedule",
                                    help="Schedule CSV, a test a row."),
    resume: Path | None = typer.Option(
        None, "--resume", help="Continue the run in this run directory (after a crash, a kill "
        "or Ctrl-C): finished repeats are kept, the rest run; its own schedule and options "
        "are used."),
    backend: str = BACKEND,
    datapath: str | None = typer.Option(
        None, "--datapath",
        help="Comma-separated datapaths; the schedule runs once per datapath, into one run "
             "directory [emulated: host; kubernetes: the cluster's own]: "
             + ", ".join(model.DATAPATHS)),
    duration: float | None = typer.Option(
        None, "--duration", help="Seconds each test runs (rows without a duration). [10]"),
    repeats: int | None = typer.Option(
        None, "--repeats", help="Repeats of each test (rows without repeats). [1]"),
    from_i: int | None = typer.Option(
        None, "--fromI", help="First schedule row to run (0-based, inclusive)."),
    to_i: int | None = typer.Option(
        None, "--toI", help="Last schedule row to run (0-based, inclusive)."),
    latency_test: bool = typer.Option(
        False, "--latencyTest", help="Latency (ping-pong) tests instead of throughput."),
    transport: str | None = typer.Option(
        None, "--transport",
        help="udp, tcp, tls or dtls (case-insensitive; ddsperf: udp, tcp and tls, with a "
             "CA and certificates made for the run)."),
    secure: bool = typer.Option(
        False, "--secure", help="DDS Security: authentication, access control and "
        "encryption (ddsperf: Cyclone's plugins, credentials made for the run)."),
    peers: bool = typer.Option(
        False, "--peers", help="Discover by unicast peers even where multicast would work."),
    send_queue_size: int | None = typer.Option(
        None, "--sendQueueSize",
        help="Writer queue in samples (ddsperf: Cyclone's WhcHigh = this x dataLen bytes)."),
    no_print: bool = typer.Option(
        False, "--noPrint", help="Accepted for K8sDDS; ddsperf always prints intervals."),
    out: Path = OUT,
    min_free: float = MIN_FREE,
    rtiperftest: Path | None = typer.Option(
        None, "--rtiperftest", help="RTI Perftest executable (perftest_cpp), for "
        "engine=rtiperftest [$K8SDDS_RTIPERFTEST]."),
    rti_license: Path | None = typer.Option(
        None, "--rti-license", help="RTI license file, given to Perftest as "
        "RTI_LICENSE_FILE [$K8SDDS_RTI_LICENSE]."),
    rtiperftest_image: str | None = typer.Option(
        None, "--rtiperftest-image", help="kubernetes: an image holding RTI Perftest (and "
        "rticlouddiscoveryservice, for discovery=cds), for engine=rtiperftest; --rtiperftest "
        "then names perftest_cpp inside it [perftest_cpp on its PATH]."),
    rti_cds: str | None = typer.Option(
        None, "--rti-cds", help="RTI Cloud Discovery Service executable, for discovery=cds "
        "[$K8SDDS_RTI_CDS, else rticlouddiscoveryservice on the PATH]."),
    rti_tls_dir: Path | None = typer.Option(
        None, "--rti-tls-dir", help="Certificates for Perftest over TLS or DTLS, in Perftest's "
        "layout (cacert.pem, pub.pem, pubkey.pem, sub.pem, subkey.pem) [$K8SDDS_RTI_TLS_DIR]."),
    testbed: str = TESTBED,
    nodes: int = typer.Option(
        4, "--nodes", min=2, max=64,
        help="emulated: nodes when the run builds the testbed: node0 is the control plane, "
             "the others are workers, where pods run."),
    profile: str | None = PROFILE,
    cluster: Path | None = CLUSTER,
    kubeconfig: Path | None = KUBECONFIG,
    context: str | None = CONTEXT,
    namespace: str | None = NAMESPACE,
    image: str | None = IMAGE,
    pub_node: str | None = PUB_NODE,
    sub_nodes: str | None = SUB_NODES,
    arch: str | None = ARCH,
    pod_timeout: float = POD_TIMEOUT,
    inventory: Path | None = SSH_INVENTORY,
    known_hosts: Path | None = SSH_KNOWN_HOSTS,
    plot: bool = typer.Option(True, "--plot/--no-plot", help="Draw throughput.png at the end."),
    with_report: bool = REPORT,
    quiet: bool = QUIET,
    as_json: bool = AS_JSON,
) -> None:
    """Run a schedule and write one run directory under --out."""
    from k8sdds import perftest
    from k8sdds.runner import RunOptions

    name, chosen = _backend(backend, **_options(locals()),
                            rtiperftest_image=rtiperftest_image)
    perftest.ENGINES["rtiperftest"].configure(
        str(rtiperftest) if rtiperftest else None, rti_license, rti_tls_dir,
        image=rtiperftest_image, cds=rti_cds)
    if resume is not None:
        _resume(chosen, resume, quiet, as_json, plot, with_report, min_free)
        return
    if sch is None:
        raise typer.BadParameter("give the schedule (--sch FILE), or --resume RUN_DIR",
                                 param_hint="--sch")
    names = _datapath_list(datapath or chosen.datapaths()[0], list(chosen.datapaths()))
    defaults = model.Defaults(
        latency_test=True if latency_test else None,
        transport=_choice(transport, list(model.TRANSPORTS), "--transport"),
        secure=True if secure else None,
        duration=duration, repeats=repeats, send_queue_size=send_queue_size,
        discovery="peers" if peers else None, no_print=True if no_print else None)
    tests = schedule.load(sch, defaults, chosen.limits())
    tests = schedule.expand(tests, names, sch, from_i, to_i)
    _check_available(chosen, [t.datapath for t in tests])
    if not quiet and not as_json:
        _announce(tests, name)
    options = RunOptions(schedule=sch, out=out, command_line=tuple(sys.argv),
                         min_free_mb=min_free)
    _execute(chosen, tests, options, None, quiet, as_json, plot, with_report)


@app.command()
def baseline(
    datapath: str | None = typer.Option(
        None, "--datapath",
        help="Comma-separated datapaths; the matrix runs on each [emulated: host, "
             "flannel-hostgw, flannel-vxlan; kubernetes: host and the cluster's own]."),
    paths: str = typer.Option(
        "all", "--paths", help="all (what the backend offers), or comma-separated: "
        + ", ".join(model.PATHS) + " (a host-network datapath has only node-node; "
        "pod-service and external-nodeport, through a Service, on kubernetes only)."),
    engines_: str = typer.Option(
        "ping,iperf3,qperf,ab", "--engines", help="Comma-separated: ping, iperf3, qperf, ab."),
    dds: bool = typer.Option(
        True, "--dds/--no-dds", help="Also run ddsperf (1 KiB throughput, 64 B round trip) on "
        "every path, for the report's DDS efficiency."),
    duration: float = typer.Option(
        5, "--duration", min=1, max=86_400,
        help="Seconds per test (ddsperf tests: at least 3, its first second is discovery)."),
    repeats: int = typer.Option(1, "--repeats", min=1, max=1000, help="Repeats per test."),
    out: Path = OUT,
    min_free: float = MIN_FREE,
    backend: str = BACKEND,
    testbed: str = TESTBED,
    nodes: int = typer.Option(
        4, "--nodes", min=3, max=64, help="emulated: nodes when the run builds the testbed "
        "(at least a control plane and two workers, for the cross-node paths)."),
    profile: str | None = PROFILE,
    cluster: Path | None = CLUSTER,
    kubeconfig: Path | None = KUBECONFIG,
    context: str | None = CONTEXT,
    namespace: str | None = NAMESPACE,
    image: str | None = IMAGE,
    pub_node: str | None = PUB_NODE,
    sub_nodes: str | None = SUB_NODES,
    arch: str | None = ARCH,
    pod_timeout: float = POD_TIMEOUT,
    inventory: Path | None = SSH_INVENTORY,
    known_hosts: Path | None = SSH_KNOWN_HOSTS,
    with_report: bool = REPORT,
    quiet: bool = QUIET,
    as_json: bool = AS_JSON,
) -> None:
    """Measure the network itself (ping, iperf3, qperf, ab) over the path matrix, beside
    ddsperf on the same paths; one ordinary run directory."""
    import tempfile

    from k8sdds import baseline as matrix
    from k8sdds.runner import RunOptions

    name, chosen = _backend(backend, **_options(locals()))
    offered = list(chosen.datapaths())
    usual = ["host", "flannel-hostgw", "flannel-vxlan"]
    names = _datapath_list(datapath or ",".join(usual if set(usual) <= set(offered)
                                                else offered), offered)
    wanted = list(chosen.limits().paths) if paths.strip().lower() == "all" else [
        _choice(p, list(model.PATHS), "--paths") for p in paths.split(",") if p.strip()]
    picked = [_choice(e, list(matrix.ENGINES), "--engines")
              for e in engines_.split(",") if e.strip()]
    if not picked and not dds:
        raise typer.BadParameter("give at least one engine, or --dds", param_hint="--engines")
    if not any(matrix.paths_of(dp, wanted) for dp in names):
        raise UserError(f"no test: none of the paths {', '.join(wanted)} exists on "
                        f"{', '.join(names)} (a host-network datapath has only node-node)")
    text = matrix.schedule(names, wanted, list(dict.fromkeys(picked)), dds, duration)
    with tempfile.TemporaryDirectory(prefix="k8sdds-baseline-") as tmp:
        sch = Path(tmp) / "baseline.csv"
        sch.write_text(text)
        tests = schedule.load(sch, model.Defaults(repeats=repeats), chosen.limits())
        tests = schedule.expand(tests, names, sch)
        _check_available(chosen, [t.datapath for t in tests])
        if not quiet and not as_json:
            _announce(tests, name, "baseline: ")
        options = RunOptions(schedule=sch, out=out, command_line=tuple(sys.argv),
                             min_free_mb=min_free)
        _execute(chosen, tests, options, None, quiet, as_json, False, with_report)


def _execute(backend, tests, options, resume, quiet: bool, as_json: bool, plot: bool,
             with_report: bool) -> None:
    """Run (or resume) the tests, draw what was asked, and say how it went."""
    from k8sdds.runner import Runner

    runner = Runner(backend, options, None if (quiet or as_json) else RichProgress())
    try:
        outcome = runner.run(tests, resume=resume)
    except KeyboardInterrupt:
        hint = f"; continue with `k8sdds run --resume {runner.run_dir}`" if runner.run_dir else ""
        err_console.print(f"interrupted: the processes, pods and objects the run made are "
                          f"removed{hint}")
        raise typer.Exit(130) from None
    plotted = plot and _plot(outcome.run_dir)
    report_path = None
    if with_report and (outcome.run_dir / "results.csv").exists():
        from k8sdds.analysis.report import build

        report_path = build([outcome.run_dir], outcome.run_dir)
    if as_json:
        out_console.print_json(json.dumps({
            "run_dir": str(outcome.run_dir), "repeats": outcome.repeats,
            "failed": outcome.failed, "not_applied": outcome.not_applied,
            "wall_s": round(outcome.wall_s, 2),
            "plot": str(outcome.run_dir / "throughput.png") if plotted else None,
            "report": str(report_path) if report_path else None}))
        return
    # even with --quiet: failures and limits not applied are never silent
    for failure in outcome.failed:
        err_console.print(f"[red]failed[/red] {failure}")
    for line in outcome.not_applied:
        err_console.print(f"[yellow]not applied:[/yellow] {line}")
    if not quiet:
        err_console.print(f"{outcome.repeats - len(outcome.failed)}/{outcome.repeats} repeats "
                          f"done in {outcome.wall_s:.1f} s")
        out_console.print(f"results: {outcome.run_dir / 'results.csv'}")
        if plotted:
            out_console.print(f"plot:    {outcome.run_dir / 'throughput.png'}")
        if report_path:
            out_console.print(f"report:  {report_path}")


def _resume(backend, run_dir: Path, quiet: bool, as_json: bool, plot: bool,
            with_report: bool, min_free: float) -> None:
    from k8sdds.model import Test
    from k8sdds.results import RunDir
    from k8sdds.runner import RunOptions

    run = RunDir(run_dir)
    try:
        manifest = run.read_manifest()
        tests = [Test(**t) for t in manifest["tests"]]
    except FileNotFoundError:
        raise UserError(f"{run_dir}: no manifest.json; not a run directory") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"{run_dir / 'manifest.json'}: cannot resume from it ({exc})") from None
    if manifest.get("backend") != backend.name:
        raise UserError(f"{run_dir} ran on the {manifest.get('backend')} backend; resume it "
                        f"with --backend {manifest.get('backend')}")
    _check_available(backend, [t.datapath for t in tests])
    total = sum(t.repeats for t in tests)
    if not quiet and not as_json:
        err_console.print(f"resuming {run_dir}: {total - len(manifest.get('repeats', {}))} of "
                          f"{total} repeats left")
    options = RunOptions(schedule=run.path / "schedule.csv", out=run.path.parent,
                         command_line=tuple(sys.argv), min_free_mb=min_free)
    _execute(backend, tests, options, run, quiet, as_json, plot, with_report)


def _check_available(backend, names: list[str]) -> None:
    for name in dict.fromkeys(names):
        reason = backend.unavailable(name)
        if reason:
            raise UserError(f"datapath {name} is not available here: {reason} "
                            f"(`k8sdds testbed datapaths` lists what is)")


def _plot(run_dir: Path) -> bool:
    from k8sdds.analysis import load, plots

    if not (Path(run_dir) / "results.csv").exists():
        return False
    return plots.throughput(load.load([run_dir]), Path(run_dir)) is not None


@app.command()
def cleanup(
    namespace: str | None = typer.Option(
        None, "--namespace", help="Remove what k8sdds made in this namespace (and the "
        "namespace, if k8sdds made it) [every namespace k8sdds made]."),
    kubeconfig: Path | None = KUBECONFIG,
    context: str | None = CONTEXT,
) -> None:
    """kubernetes: remove what a killed run left behind (pods, ConfigMaps, Secrets, RBAC,
    namespaces labelled app.kubernetes.io/managed-by=k8sdds)."""
    from k8sdds.deployment import kubernetes as kube

    api = kube.connect(kubeconfig, context)
    spaces = [namespace] if namespace else kube.managed_namespaces(api)
    gone = []
    for ns in spaces:
        gone += kube.remove(api, ns)
    for item in gone:
        out_console.print(f"deleted {item}")
    out_console.print(f"{len(gone)} objects deleted in {len(spaces)} namespace(s)")


cluster_app = typer.Typer(no_args_is_help=True,
                          help="Bare hosts over SSH: preflight checks, network tuning, "
                          "kubeadm bring-up.")
app.add_typer(cluster_app, name="cluster")
INVENTORY = typer.Option(..., "--inventory", "-i", help="Inventory (YAML): hosts with name, "
                         "address, user, key, role, arch (see README).")
KNOWN_HOSTS = typer.Option(None, "--known-hosts", help="known_hosts file host keys are "
                           "checked against [the inventory's known_hosts, ~/.ssh/known_hosts].")
DRY_RUN = typer.Option(False, "--dry-run", help="Print every remote command per host; "
                       "connect to none.")
HOST_LOGS = typer.Option(Path("logs/cluster"), "--log-dir", help="Per-host logs of every "
                         "command and its output.")


def _hosts(inventory: Path, known_hosts: Path | None):
    from k8sdds.cluster import inventory as inv

    loaded = inv.load(inventory)
    return loaded, str(known_hosts) if known_hosts else loaded.known_hosts


def _per_host(loaded, known: str, dry_run: bool, logs: Path, work):
    """`work(remote)` on every host at once, each with its own connection and log."""
    from k8sdds.cluster.remote import Remote, each_host, log_dir

    folder = log_dir(logs)

    def one(host):
        with Remote(host, known, folder / f"{host.name}.log", dry_run=dry_run) as remote:
            return work(remote)

    return each_host(loaded.hosts, one), folder


def _dry_run_listing(folder: Path, hosts) -> None:
    for host in hosts:
        out_console.print(f"[bold]{host.name}[/bold] ({host.user}@{host.address}:{host.port})")
        out_console.print((folder / f"{host.name}.log").read_text().rstrip(), markup=False,
                          highlight=False)


@cluster_app.command("check")
def cluster_check(inventory: Path = INVENTORY, known_hosts: Path | None = KNOWN_HOSTS,
                  dry_run: bool = DRY_RUN, log_dir: Path = HOST_LOGS) -> None:
    """Preflight of every host: reachable, swap off, cgroup memory/cpuset, br_netfilter,
    ip_forward, container runtime, kubeadm and kubelet, time skew; the fix for each failure.
    Exit status 1 when a check fails on a host."""
    from k8sdds.cluster.checks import check_host
    from k8sdds.cluster.remote import HostError

    loaded, known = _hosts(inventory, known_hosts)
    results, folder = _per_host(loaded, known, dry_run, log_dir, check_host)
    if dry_run:
        _dry_run_listing(folder, loaded.hosts)
        return
    table = Table(title="cluster check")
    for col in ("host", "check", "result", "found", "fix"):
        table.add_column(col, overflow="fold")
    failed = False
    for host, outcome in results.items():
        if isinstance(outcome, HostError):
            failed = True
            table.add_row(host, "reachable", "[red]fail[/red]", str(outcome), "")
            continue
        for o in outcome:
            failed |= not o.passed
            table.add_row(host, o.check, "pass" if o.passed else "[red]fail[/red]", o.found,
                          o.fix)
    out_console.print(table)
    out_console.print(f"per-host logs: {folder}")
    if failed:
        raise typer.Exit(1)


@cluster_app.command("tune")
def cluster_tune(
    inventory: Path = INVENTORY,
    revert: bool = typer.Option(False, "--revert", help="Restore the values the first tune "
                                "replaced, and remove the drop-in."),
    keys: str | None = typer.Option(None, "--keys", help="Comma-separated subset of the "
                                    "sysctls [all of them, see README]."),
    root: str = typer.Option("", "--root", help="Prefix of the files written on the hosts "
                             "(/etc/sysctl.d/..., /etc/k8sdds/...), for tests; {host} in it "
                             "is the host's name [none]."),
    known_hosts: Path | None = KNOWN_HOSTS, dry_run: bool = DRY_RUN,
    log_dir: Path = HOST_LOGS,
) -> None:
    """The K8sDDS network tuning (socket buffers, backlog, fragments) as
    /etc/sysctl.d/90-k8sdds.conf on every host, idempotent; --revert undoes it. A host that
    fails is reported by name; the others are done (or reverted) all the same."""
    from k8sdds.cluster import tune as tuning
    from k8sdds.cluster.remote import HostError

    chosen = list(tuning.SETTINGS) if not keys else [k.strip() for k in keys.split(",")
                                                      if k.strip()]
    for key in chosen:
        if key not in tuning.SETTINGS:
            raise typer.BadParameter(f"{key!r} is not one of {', '.join(tuning.SETTINGS)}",
                                     param_hint="--keys")
    loaded, known = _hosts(inventory, known_hosts)
    results, folder = _per_host(
        loaded, known, dry_run, log_dir,
        (lambda r: tuning.revert(r, root)) if revert else
        (lambda r: tuning.tune(r, chosen, root)))
    if dry_run:
        _dry_run_listing(folder, loaded.hosts)
        return
    failed = [h for h, r in results.items() if isinstance(r, HostError)]
    for host, changes in results.items():
        if isinstance(changes, HostError):
            err_console.print(f"[red]{host}: failed[/red]: {changes}")
            continue
        for c in changes:
            out_console.print(f"{host}: {c.key}: {c.before} -> {c.after}")
        if not changes:
            out_console.print(f"{host}: nothing to {'revert' if revert else 'change'}")
    done = len(results) - len(failed)
    out_console.print(f"{'reverted' if revert else 'tuned'} {done}/{len(results)} hosts; "
                      f"per-host logs: {folder}")
    if failed:
        err_console.print(f"not done on: {', '.join(failed)} (the others are)")
        raise typer.Exit(1)


CNI = typer.Option(..., "--cni", help="flannel-vxlan, flannel-hostgw, kube-router, weave, "
                   "weave-encrypted, calico or cilium.")


def _bringup_report(results: dict, what: str, folder: Path) -> None:
    """What each host did; the hosts that failed by name (the others are done)."""
    from k8sdds.cluster.remote import HostError

    failed = [h for h, r in results.items() if isinstance(r, HostError)]
    for host, done in results.items():
        if isinstance(done, HostError):
            err_console.print(f"[red]{host}: failed[/red]: {done}")
        else:
            out_console.print(f"{host}: {'; '.join(done)}")
    out_console.print(f"{what}: {len(results) - len(failed)}/{len(results)} hosts; per-host "
                      f"logs: {folder}")
    if failed:
        err_console.print(f"not done on: {', '.join(failed)} (the others are)")
        raise typer.Exit(1)


@cluster_app.command("init")
def cluster_init(inventory: Path = INVENTORY, cni: str = CNI,
                 known_hosts: Path | None = KNOWN_HOSTS, dry_run: bool = DRY_RUN,
                 log_dir: Path = HOST_LOGS) -> None:
    """kubeadm init on the control plane with the CNI's pod network, then the CNI (manifests
    pinned to a release; weave-encrypted: a generated password, never printed)."""
    from k8sdds.cluster import kubeadm
    from k8sdds.cluster.inventory import Inventory

    plan = kubeadm.CNIS[_choice(cni, list(kubeadm.CNIS), "--cni")]
    loaded, known = _hosts(inventory, known_hosts)
    control = Inventory((loaded.control_plane(),), loaded.known_hosts)
    results, folder = _per_host(control, known, dry_run, log_dir,
                                lambda r: kubeadm.init(r, plan))
    if dry_run:
        _dry_run_listing(folder, control.hosts)
        return
    _bringup_report(results, f"init with {plan.name}", folder)


@cluster_app.command("join")
def cluster_join(inventory: Path = INVENTORY, known_hosts: Path | None = KNOWN_HOSTS,
                 dry_run: bool = DRY_RUN, log_dir: Path = HOST_LOGS) -> None:
    """Join every worker with a fresh token from the control plane, then wait until every
    node is Ready."""
    from k8sdds.cluster import kubeadm
    from k8sdds.cluster.inventory import Inventory
    from k8sdds.cluster.remote import HostError, Remote
    from k8sdds.cluster.remote import log_dir as host_logs

    loaded, known = _hosts(inventory, known_hosts)
    control = loaded.control_plane()
    folder = host_logs(log_dir)
    try:
        with Remote(control, known, folder / f"{control.name}.log", dry_run=dry_run) as r:
            command = kubeadm.join_command(r)
    except HostError as exc:
        raise UserError(f"{control.name} (control plane): {exc}; no worker was touched"
                        ) from None
    workers = Inventory(tuple(loaded.workers()), loaded.known_hosts)
    results, _ = _per_host(workers, known, dry_run, log_dir,
                           lambda r: kubeadm.join(r, command))
    if dry_run:
        with Remote(control, known, folder / f"{control.name}.log", dry_run=True) as r:
            kubeadm.wait_ready(r)
        _dry_run_listing(folder, loaded.hosts)
        return
    if not any(isinstance(v, HostError) for v in results.values()):
        try:
            with Remote(control, known, folder / f"{control.name}.log") as r:
                results[control.name] = kubeadm.wait_ready(r)
        except HostError as exc:
            results[control.name] = exc
    _bringup_report(results, "join", folder)


@cluster_app.command("reset")
def cluster_reset(inventory: Path = INVENTORY, known_hosts: Path | None = KNOWN_HOSTS,
                  dry_run: bool = DRY_RUN, log_dir: Path = HOST_LOGS) -> None:
    """kubeadm reset -f on every host, and the CNI state it leaves (/etc/cni/net.d, links)."""
    from k8sdds.cluster import kubeadm

    loaded, known = _hosts(inventory, known_hosts)
    results, folder = _per_host(loaded, known, dry_run, log_dir, kubeadm.reset)
    if dry_run:
        _dry_run_listing(folder, loaded.hosts)
        return
    _bringup_report(results, "reset", folder)


import_app = typer.Typer(no_args_is_help=True, help="Import data from other tools.")
app.add_typer(import_app, name="import")


@import_app.command("k8sdds-data")
def import_k8sdds(
    tree: Path = typer.Argument(..., help="A K8sDDS data tree (throughput-test/, "
                                "latency-test/)."),
    out: Path = typer.Option(Path("logs"), "--out", help="Where run directories go."),
) -> None:
    """K8sDDS logs -> one run directory per configuration, ready for `k8sdds report`."""
    from k8sdds.importer import import_tree

    for run in import_tree(tree, out):
        out_console.print(f"imported: {run}")


@app.command()
def engines() -> None:
    """List the measuring engines and whether each can run here."""
    from k8sdds import perftest

    table = Table(title="engines")
    for col in ("engine", "available here"):
        table.add_column(col, overflow="fold")
    for name, engine in perftest.ENGINES.items():
        reason = engine.unavailable()
        table.add_row(name, f"no: {reason}" if reason else f"yes ({engine.version()})")
    out_console.print(table)


@app.command()
def parse(run_dir: Path = typer.Argument(..., help="A run directory.")) -> None:
    """Re-parse the raw logs of a run into results.csv (idempotent)."""
    from k8sdds.reparse import reparse

    count = reparse(run_dir)
    out_console.print(f"{count} rows written to {run_dir / 'results.csv'}")


@app.command("plot")
def plot_cmd(run_dir: Path = typer.Argument(..., help="A run directory.")) -> None:
    """Draw throughput.png/.svg of a run (throughput against payload, a line per datapath)."""
    if not _plot(run_dir):
        raise UserError(f"{run_dir}: no throughput figures to plot")
    out_console.print(f"plot: {run_dir / 'throughput.png'}")


@app.command()
def report(
    run_dirs: list[Path] = typer.Argument(..., help="One or more run directories."),
    out: Path | None = typer.Option(
        None, "--out", help="Where the plots and report.html go [the run directory, or "
        "./report when several runs are given]."),
) -> None:
    """Plots (PNG, SVG) and one self-contained report.html over one or more runs."""
    from k8sdds.analysis.report import build

    target = out or (run_dirs[0] if len(run_dirs) == 1 else Path("report"))
    path = build(run_dirs, target)
    out_console.print(f"report: {path}")


@app.command()
def compare(
    baseline: Path = typer.Argument(..., help="The baseline run directory."),
    contender: Path = typer.Argument(..., help="The run directory to compare with it."),
    metric: list[str] = typer.Option(
        ["throughput_mbps", "latency_us_p50", "latency_us_p99"], "--metric",
        help="Metrics to compare (repeat the option for several)."),
    fail_if: list[str] = typer.Option(
        [], "--fail-if", help="METRIC:+N% or METRIC:-N%: exit with status 1 when the "
        "contender changes METRIC by more than N % in that direction (e.g. "
        "throughput_mbps:-5%, latency_us_p99:+10%)."),
    test: str = typer.Option("welch", "--test", help="Significance test: welch or "
                             "mannwhitney."),
    as_json: bool = typer.Option(False, "--json", help="Print the comparison as JSON."),
) -> None:
    """Per test and metric: baseline, contender, ratio and whether the change is significant."""
    from k8sdds.analysis import compare as cmp

    method = _choice(test, ["welch", "mannwhitney"], "--test")
    bounds = [cmp.parse_bound(b) for b in fail_if]
    metrics = list(dict.fromkeys(list(metric) + [b.metric for b in bounds]))
    rows = cmp.compare(baseline, contender, metrics, method)
    crossed = cmp.crossed(rows, bounds)
    if as_json:
        out_console.print_json(json.dumps({"rows": rows, "crossed": crossed}, default=str))
    else:
        table = Table(title=f"{contender} against {baseline}")
        for col in ("test", "metric", "baseline", "contender", "ratio", "p", "significant"):
            table.add_column(col)
        for r in rows:
            table.add_row(r["test"], r["metric"], f"{r['baseline']:.4g}",
                          f"{r['contender']:.4g}", f"{r['ratio']:.3f}",
                          "-" if r["p_value"] is None else f"{r['p_value']:.3g}",
                          {True: "yes", False: "no", None: "-"}[r["significant"]])
        out_console.print(table)
        for line in crossed:
            err_console.print(f"[red]bound crossed:[/red] {line}")
    if crossed:
        raise typer.Exit(1)


@app.command("results")
def results_cmd(
    run_dir: Path = typer.Argument(..., help="A run directory."),
    fmt: str = typer.Option("csv", "--format", help="csv, json or parquet."),
    out: Path | None = typer.Option(None, "--out", help="Output file [stdout; parquet needs "
                                    "--out]."),
) -> None:
    """Export the tidy results table of a run."""
    from k8sdds.analysis import load

    fmt = _choice(fmt, ["csv", "json", "parquet"], "--format")
    df = load.load([run_dir]).results
    if fmt == "parquet":
        if out is None:
            raise UserError("--format parquet writes a binary file: give --out FILE")
        df.to_parquet(out, index=False)
    elif fmt == "json":
        text = df.to_json(orient="records", indent=1)
        out.write_text(text) if out else sys.stdout.write(text + "\n")
    else:
        text = df.to_csv(index=False)
        out.write_text(text) if out else sys.stdout.write(text)
    if out:
        err_console.print(f"{len(df)} rows written to {out}")


def _testbed(name: str, nodes: int, profile: str | None, cluster: Path | None):
    from k8sdds.testbed import spec
    from k8sdds.testbed.testbed import Testbed

    if cluster:
        return Testbed(spec.load(cluster, name=name, profile=profile))
    return Testbed(spec.default_nodes(nodes, profile, name))


NAME = typer.Option("k8sdds", "--name", help="Testbed name (namespace prefix).")


@testbed_app.command("up")
def testbed_up(name: str = NAME,
               nodes: int = typer.Option(4, "--nodes", min=2, max=64,
                                         help="Nodes: node0 is the control plane."),
               profile: str | None = typer.Option(None, "--profile",
                                                  help="Edge profile of every worker."),
               cluster: Path | None = typer.Option(None, "--cluster",
                                                   help="Cluster spec (YAML)."),
               datapath: str = typer.Option("host", "--datapath", help="Datapath to wire."),
               ) -> None:
    """Bring the emulated cluster up (a run reuses it and leaves it up)."""
    from k8sdds.deployment.emulated import EmulatedBackend
    from k8sdds.testbed.wiring import WIRING

    [dp] = _datapath_list(datapath, list(WIRING))[:1]
    _check_available(EmulatedBackend(name), [dp])
    tb = _testbed(name, nodes, profile, cluster)
    with _locked(name):
        tb.up()
        tb.use_datapath(dp)
    _status(tb)


@testbed_app.command("datapaths")
def testbed_datapaths() -> None:
    """List the datapaths the emulated cluster offers, and whether this machine can."""
    from k8sdds.testbed.capabilities import datapath_unavailable
    from k8sdds.testbed.wiring import WIRING

    table = Table(title="emulated datapaths")
    for col in ("datapath", "emulates", "encapsulation", "MTU", "multicast across nodes",
                "encryption", "available here"):
        table.add_column(col, overflow="fold")
    for name in WIRING:
        dp = model.datapath(name)
        reason = datapath_unavailable(dp)
        table.add_row(name, dp.emulates, dp.encapsulation, str(dp.mtu),
                      "yes" if dp.multicast_across_nodes else "no", dp.encryption,
                      f"no: {reason}" if reason else "yes")
    out_console.print(table)


@testbed_app.command("profiles")
def testbed_profiles() -> None:
    """List the edge node profiles (link rate, CPU quota, MTU, delay, loss)."""
    from k8sdds.testbed.capabilities import qdisc
    from k8sdds.testbed.profiles import PROFILES

    netem = qdisc("netem")
    table = Table(title="edge node profiles")
    for col in ("profile", "link (Mbit/s)", "burst (KB)", "CPUs", "MTU", "delay (ms)",
                "loss (%)", "about"):
        table.add_column(col, overflow="fold")
    for p in PROFILES.values():
        cut = " (not here: no netem)" if netem and (p.delay_ms or p.loss_pct) else ""
        table.add_row(p.name, _or_dash(p.rate_mbit), _or_dash(p.burst_kb or None),
                      _or_dash(p.cpu), _or_dash(p.mtu), _or_dash(p.delay_ms) + cut,
                      _or_dash(p.loss_pct) + cut, p.about)
    out_console.print(table)


def _or_dash(value) -> str:
    return "-" if value is None else f"{value:g}"


@testbed_app.command("status")
def testbed_status(name: str = NAME) -> None:
    """Show the emulated cluster: nodes, datapath, pods, processes."""
    from k8sdds.testbed.testbed import Testbed

    tb = Testbed.existing(name)
    if tb is None:
        out_console.print(f"testbed {name}: down")
        return
    _status(tb)


@testbed_app.command("down")
def testbed_down(name: str = NAME) -> None:
    """Remove every namespace, link and process of the testbed (also after a crash)."""
    from k8sdds.testbed.spec import TestbedSpec
    from k8sdds.testbed.testbed import Testbed

    tb = Testbed.existing(name) or Testbed(TestbedSpec(name=name))
    with _locked(name):  # a crashed run holds no lock; a live one must finish first
        gone = tb.down()
    out_console.print(f"testbed {name}: down ({len(gone)} namespaces removed)")


@contextmanager
def _locked(name: str):
    from k8sdds.testbed.testbed import TestbedLock

    lock = TestbedLock(name)
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


def _status(tb) -> None:
    st = tb.status()
    table = Table(title=f"testbed {st['name']}: {'up' if st['up'] else 'incomplete'}, "
                        f"datapath {st['datapath'] or 'none'}, {st['pods']} pods, "
                        f"{st['processes']} processes")
    for col in ("node", "role", "arch", "profile", "namespace", "address", "pod CIDR",
                "present"):
        table.add_column(col)
    for n in st["nodes"]:
        table.add_row(n["name"], n["role"], n["arch"], n["profile"], n["namespace"],
                      n["address"], n["pod_cidr"], "yes" if n["present"] else "no")
    out_console.print(table)
    for line in st["not_applied"]:
        err_console.print(f"[yellow]not applied:[/yellow] {line}")


def main(argv: list[str] | None = None) -> None:
    """Entry point: user mistakes become one message and an exit status, never a traceback."""
    stopping.install()  # Ctrl-C and SIGTERM: clean up, then exit
    try:
        app(args=argv)  # typer reports usage errors itself (exit status 2)
    except UserError as exc:
        err_console.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        sys.exit(exc.exit_code)
