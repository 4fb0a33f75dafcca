"""`k8sdds serve`: the runs' database and its HTTP API."""

from __future__ import annotations

import ipaddress
import re
import sys
from pathlib import Path

import typer

from k8sdds.cli.common import err_console, out_console
from k8sdds.serve.limits import DEFAULT_MAX_SECONDS


def _listen(value: str) -> tuple[str, int]:
    host, _, port = value.rpartition(":")
    try:
        address = ipaddress.ip_address(host.strip("[]"))
        number = int(port)
        if not 0 < number < 65536:
            raise ValueError(port)
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not ADDRESS:PORT (an IP address and a port "
                                 "1-65535, e.g. 127.0.0.1:8080)", param_hint="--listen"
                                 ) from None
    return str(address), number


SHUTDOWN_WAIT = 5  # seconds a stopping server waits for open connections to close


def _tls(cert: Path | None, key: Path | None) -> dict[str, str]:
    """uvicorn's TLS arguments for `cert` and `key` ({}: plain HTTP), checked before the
    server starts: both given, the key private to its owner, the two a pair, the
    certificate valid now."""
    import ssl

    if cert is None and key is None:
        return {}
    if cert is None or key is None:
        raise typer.BadParameter("--tls-cert and --tls-key go together",
                                 param_hint="--tls-cert" if cert is None else "--tls-key")
    for path, option in ((cert, "--tls-cert"), (key, "--tls-key")):
        if not path.is_file():
            raise typer.BadParameter(f"{path}: no such file", param_hint=option)
    if key.stat().st_mode & 0o077:
        raise typer.BadParameter(f"{key}: others can read this private key (mode "
                                 f"{key.stat().st_mode & 0o777:o}); chmod 600 {key}",
                                 param_hint="--tls-key")
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (ssl.SSLError, ValueError, OSError) as exc:
        raise typer.BadParameter(f"{cert} and {key}: not a PEM certificate and its private "
                                 f"key ({exc.args[-1] if exc.args else exc})",
                                 param_hint="--tls-cert") from None
    outside = _outside_validity(cert)
    if outside:
        raise typer.BadParameter(outside, param_hint="--tls-cert")
    return {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}


def _outside_validity(cert: Path) -> str | None:
    """Why the server's certificate (the chain's first) cannot serve now: expired or not yet
    valid, with its dates; None where it can. Every client refuses such a certificate, so a
    service started with it would answer nobody."""
    import datetime as dt

    from cryptography import x509

    first = x509.load_pem_x509_certificate(cert.read_bytes())
    now = dt.datetime.now(dt.timezone.utc)
    start, end = first.not_valid_before_utc, first.not_valid_after_utc
    if start <= now <= end:
        return None
    when = "expired" if now > end else "not valid yet"
    return (f"{cert} is {when}: valid from {start:%Y-%m-%d %H:%M} to {end:%Y-%m-%d %H:%M} "
            f"UTC, and it is {now:%Y-%m-%d %H:%M} UTC; every client would refuse it (a new "
            "one: `k8sdds serve-cert`, or your CA's)")


def serve(
    db_url: str | None = typer.Option(None, "--db", help="SQLAlchemy URL of the database "
                                  "(postgresql+psycopg://user@host/db, sqlite:///file) "
                                  "[sqlite: k8sdds.db in --out]."),
    listen: str = typer.Option("127.0.0.1:8080", "--listen", help="Address and port the "
                               "API listens on; anything but loopback needs --token-file "
                               "and --tls-cert with --tls-key."),
    tls_cert: Path | None = typer.Option(None, "--tls-cert", help="Serve HTTPS with this "
                                         "PEM certificate (chain first: the server's, then "
                                         "its CA's) [none: HTTP, loopback only]."),
    tls_key: Path | None = typer.Option(None, "--tls-key", help="The private key of "
                                        "--tls-cert (PEM), readable by its owner only."),
    plain_http: bool = typer.Option(False, "--plain-http", help="Beyond loopback without "
                                    "TLS: the token travels in clear, so only behind a proxy "
                                    "that terminates TLS on the same host."),
    out: Path = typer.Option(Path("logs"), "--out", help="The folder of run directories "
                             "(`k8sdds run --out`)."),
    token_file: Path | None = typer.Option(None, "--token-file", help="A file holding the "
                                           "token every API call must bring (Authorization: "
                                           "Bearer TOKEN) [none: loopback only]."),
    add_runs: bool = typer.Option(False, "--add-runs", help="Add every run directory in "
                                  "--out to the database (each once), then exit (`k8sdds "
                                  "import` is another thing: K8sDDS data into run "
                                  "directories)."),
    old_add: bool = typer.Option(False, "--import", hidden=True,
                                 help="The old spelling of --add-runs."),
    include_failed: bool = typer.Option(False, "--include-failed", help="With --add-runs "
                                        "and --watch: add the rows a failed repeat parsed "
                                        "too (left out by default; the run's manifest "
                                        "keeps the repeat and its reason)."),
    kubeconfig: Path | None = typer.Option(None, "--kubeconfig", help="A cluster whose nodes "
                                           "the nodes page shows [none]."),
    context: str | None = typer.Option(None, "--context", help="That kubeconfig's context."),
    inventory: Path | None = typer.Option(None, "--inventory", help="Bare hosts whose sshd "
                                          "the nodes page asks [none]."),
    max_task_seconds: float = typer.Option(DEFAULT_MAX_SECONDS, "--max-task-seconds",
                                           min=0, help="A submitted schedule that would "
                                           "measure longer (its tests' durations times "
                                           "their repeats) is refused with the reason "
                                           "[a week]."),
    max_connections: int = typer.Option(64, "--max-connections", min=1, help="Requests "
                                        "served at once; more are answered 503 at once (a "
                                        "connection idle or still sending holds none; at "
                                        "most 16 times as many are open)."),
    read_timeout: float = typer.Option(10.0, "--read-timeout", min=0.1, max=3600,
                                       help="Seconds a client gets to send a whole request "
                                       "(head and body), and over TLS to complete its "
                                       "handshake; a slower one is closed."),
    watch: float = typer.Option(5.0, "--watch", min=0, help="Every this many seconds, add "
                                "the run directories that appeared in --out (those there at "
                                "start at once; a run still running when it ends; each "
                                "once); 0: never, only --add-runs."),
) -> None:
    """The runs' database (migrated to the newest schema at start) and its HTTP API
    (OpenAPI at /openapi.json): runs listed with filters, one run's results as JSON or CSV,
    runs added from --out."""
    from k8sdds.serve import store

    host, port = _listen(listen)
    token, tls = _access(host, token_file, tls_cert, tls_key, plain_http)
    out.mkdir(parents=True, exist_ok=True)
    db = store.open_db(db_url or store.default_url(out))
    if add_runs or old_add:
        _add_runs(db, out, include_failed)
        return
    from k8sdds.serve.nodes import online

    worker, watcher = _started(db, out, max_task_seconds, watch, include_failed)
    err_console.print(f"k8sdds serve: {'https' if tls else 'http'}://{listen} (runs in {out}"
                      + (f", new ones added every {watch:g} s)" if watch else ")"))
    try:
        from k8sdds.serve.api import create_app

        app = create_app(db, out, token, worker,
                         lambda: online(kubeconfig, context, inventory),
                         lambda: watcher.refused)
        _listen_until_stopped(app, host, port, max_connections, read_timeout, tls)
    finally:
        watcher.stop()
        worker.stop()


def _started(db, out: Path, max_task_seconds: float, watch: float,
             include_failed: bool):
    """The task queue's worker and the run folder's watcher (every `watch` s; 0: never),
    started."""
    from k8sdds.serve.tasks import Worker
    from k8sdds.serve.watch import Watcher

    worker = Worker(db, out, max_seconds=max_task_seconds)
    worker.start()
    watcher = Watcher(db, out, watch, include_failed)
    if watch:
        watcher.start()
    return worker, watcher


def _access(host: str, token_file: Path | None, cert: Path | None, key: Path | None,
            plain_http: bool) -> tuple[str | None, dict[str, str]]:
    """The token every call must bring (None: none) and uvicorn's TLS arguments: beyond
    loopback a token, and TLS unless `plain_http`."""
    token = None
    if token_file is not None:
        from k8sdds.guarded import read_text

        token = read_text(token_file, "token").strip()
        if len(token) < 16:
            raise typer.BadParameter(f"{token_file}: the token must be at least 16 "
                                     "characters", param_hint="--token-file")
    loopback = ipaddress.ip_address(host).is_loopback
    if token is None and not loopback:
        raise typer.BadParameter(f"listening on {host} needs --token-file (every call is "
                                 "then checked)", param_hint="--listen")
    tls = _tls(cert, key)
    if not tls and not loopback and not plain_http:
        raise typer.BadParameter(f"listening on {host} sends the token over the network: "
                                 "give --tls-cert and --tls-key so that it travels "
                                 "encrypted (or --plain-http behind a proxy that terminates "
                                 "TLS)", param_hint="--listen")
    return token, tls


def _add_runs(db, out: Path, include_failed: bool) -> None:
    """--add-runs: every run directory of `out` added once; exit 1 if one was refused."""
    from k8sdds.serve import store

    done = store.add_runs(db, out, include_failed)
    for _path, why in done.refused:
        err_console.print(f"not added: {why}", markup=False, highlight=False)
    out_console.print(f"added {len(done.added)} runs, {len(done.present)} already there, "
                      f"{len(done.refused)} refused")
    if done.refused:
        raise typer.Exit(1)


def _listen_until_stopped(app, host: str, port: int, max_connections: int,
                          read_timeout: float, tls: dict[str, str]) -> None:
    """uvicorn serving `app` until a signal stops it, on an event loop that bounds TLS
    handshakes by `read_timeout` too (`protocol.handshake_bounded`)."""
    import asyncio

    import uvicorn

    from k8sdds.serve.protocol import ConcurrencyLimit, guarded, handshake_bounded

    config = uvicorn.Config(ConcurrencyLimit(app, max_connections), host=host, port=port,
                            log_level="warning", loop="asyncio",
                            http=guarded(read_timeout, 16 * max_connections),
                            # a client that keeps its TLS connection open answers no close:
                            # stop waiting for it after a few seconds (asyncio's own: 30)
                            timeout_graceful_shutdown=SHUTDOWN_WAIT, **tls)
    served = uvicorn.Server(config).serve()
    if sys.version_info >= (3, 11):  # as uvicorn runs it, on our loop
        with asyncio.Runner(loop_factory=handshake_bounded(read_timeout)) as runner:
            runner.run(served)
        return
    loop = handshake_bounded(read_timeout)()  # Python 3.10: asyncio.run's steps by hand
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(served)
    finally:  # the callbacks a stop left pending run (the worker threads' end), then close
        try:
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            asyncio.set_event_loop(None)
            loop.close()


CERT_FILES = ("ca.pem", "cert.pem", "key.pem")
# a DNS name as a certificate holds it: dot-separated ASCII labels of up to 63 characters
HOST_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
                       r"(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*")


def serve_cert(
    names: list[str] = typer.Argument(..., metavar="NAME", help="The host names and IP "
                                      "addresses clients reach the service by (each in the "
                                      "certificate; the first is its subject)."),
    out: Path = typer.Option(Path("tls"), "--out", help="Folder for ca.pem, cert.pem and "
                             "key.pem (made if absent; existing files are never replaced) "
                             "[tls]."),
    days: int = typer.Option(365, "--days", min=1, max=3650, help="Validity in days [365]."),
) -> None:
    """Make a certificate for `k8sdds serve --tls-cert` when you have no CA: a CA of its own
    (ca.pem: what clients trust, `curl --cacert`), the service's certificate for NAME...
    signed by it (cert.pem) and its key (key.pem, readable by you only).
    See docs/how-to/serve.md."""
    from k8sdds import certs
    from k8sdds.results import atomic_write

    for each in names:
        try:
            ipaddress.ip_address(each)
        except ValueError:
            if not HOST_NAME.fullmatch(each) or len(each) > 253:
                raise typer.BadParameter(f"{each!r} is neither an IP address nor a host "
                                         "name (ASCII letters, digits, - and dots; an "
                                         "international name in its xn-- form)",
                                         param_hint="NAME") from None
    there = [out / f for f in CERT_FILES if (out / f).exists()]
    if there:
        raise typer.BadParameter(f"{', '.join(map(str, there))} already there: nothing is "
                                 "replaced (remove them, or give another --out)",
                                 param_hint="--out")
    ca, chain, key = certs.serving(names, days)
    out.mkdir(parents=True, exist_ok=True)
    certs.private(out / "key.pem", key)  # the secret first: the others are what clients get
    atomic_write(out / "cert.pem", chain, mode=0o644)
    atomic_write(out / "ca.pem", ca, mode=0o644)
    out_console.print(f"{out / 'cert.pem'} for {', '.join(names)}, {days} days; its key "
                      f"{out / 'key.pem'} (0600); clients trust {out / 'ca.pem'}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command("serve")(serve)
    app.command("serve-cert")(serve_cert)
