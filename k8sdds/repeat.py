"""One repeat's life: deploy -> start the followers, then the driver -> wait -> stop ->
collect -> parse -> store, and the reason it failed if it did. The runner calls it for each
repeat in turn; it never branches on the backend or the engine."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path

from k8sdds import model, records, stopping
from k8sdds.capacity import StreamRate
from k8sdds.deployment import Backend, Handle
from k8sdds.deployment.reaping import CpuUse
from k8sdds.engines import Engine, RoleContext
from k8sdds.errors import DeploymentError
from k8sdds.model import Test
from k8sdds.parsers import cpu
from k8sdds.results import RepeatEntry, RepeatKey, RunDir, atomic_write, now


def discovery_of(test: Test, no_multicast: str = "") -> str:
    """The test's own choice, else multicast where the datapath carries it across nodes and
    the nodes can use it (`no_multicast`: why they cannot, Limits.no_multicast)."""
    if test.discovery:
        return test.discovery
    if no_multicast:
        return "peers"
    if test.transport in ("tcp", "tls") or test.effective_path in ("node-pod", "pod-node"):
        return "peers"
    dp = model.datapath(test.datapath)
    if dp.multicast_across_nodes or (test.placement == "same-node"
                                     and dp.multicast_same_node):
        return "multicast"
    return "peers"



def probe_refuses(prints: Mapping[str, dict] | None, nodes: set[str]) -> str:
    """Why multicast cannot be used between `nodes`, from the datapath's fingerprints (its
    multicast probe, testbed.multicast's record: at the datapath's first repeat, on every
    backend); "" where it arrived at each of them, or was not probed (the datapath's record
    then decides)."""
    for fp in (prints or {}).values():
        probe = (fp.get("multicast") if isinstance(fp, dict) else None) or {}
        arrived, sender = probe.get("arrived") or {}, probe.get("from")
        missed = sorted(n for n in nodes if n != sender and arrived.get(n) is False)
        if sender in nodes and missed:
            return (f"this run's multicast probe from {sender} did not arrive at "
                    f"{', '.join(missed)}")
    return ""


def one_repeat(backend: Backend, engine: Engine, run: RunDir, test: Test, key: RepeatKey,
               arches: Mapping[str, str],
               fingerprinted: Callable[[dict[str, dict]], None] | None = None,
               probed: Mapping[str, dict] | None = None,
               stream: StreamRate | None = None) -> RepeatEntry:
    """Run one repeat of `test` with `engine` on `backend`: deploy, start the followers, then
    the driver, wait (bounded), stop, collect, parse, store its rows; always tears down;
    returns its manifest entry. With `fingerprinted`, the nodes' fingerprints are taken once
    deployed, before any role starts (a probe between a follower's start and the driver's
    delayed the driver past ddsperf's wait for its peers on an emulated ARM node), and
    handed to it (a probe that fails is said in them, never fails the repeat). Where the
    fingerprints (those taken, or `probed`: the datapath's, taken at an earlier repeat) say
    multicast did not cross between the placed nodes, discovery left to the datapath goes
    by peers, and a test that asks for multicast fails before any role starts, saying so.
    `stream`: the rate of the stream beside a round trip (`load`), kept in the entry; one
    without a rate fails the repeat before anything is deployed."""
    rep_dir = run.repeat_dir(key)
    rep_dir.mkdir(parents=True, exist_ok=True)
    roles = list(engine.roles(test))
    t0 = time.monotonic()
    entry = RepeatEntry(status="failed", started=now())
    handles: dict[str, Handle] = {}
    codes: dict[str, int | None] = {}
    nodes_before: dict[str, float] | None = None  # the nodes' CPU before a role started
    try:
        if stream is not None:
            entry.stream = stream.record()
            if stream.missing:
                raise _Refused(stream.missing)
        placement = backend.deploy(test, roles, key.repeat,
                                        engine.service_ports(test))
        entry.placement = {r: p.node for r, p in placement.items()}
        if fingerprinted is not None:  # before any role starts: nothing delays a start
            probed = _fingerprint(backend, placement)
            fingerprinted(probed)
        refused = probe_refuses(probed, {p.node for p in placement.values()})
        discovery = discovery_of(test, backend.limits().no_multicast or refused)
        entry.discovery = discovery
        if refused and (test.multicast or discovery == "multicast"):
            column, instead = (("multicast=true", "multicast=false") if test.multicast
                               else ("discovery=multicast", "discovery=peers"))
            raise _Refused(f"{refused}: {column} cannot work between these nodes; use "
                           f"{instead}")
        # the instant every role (and each node's counter sampler) has been started by,
        # which roles that start together wait for (a discovery test's participants), and
        # each node's counters count from
        sampled = list(dict.fromkeys(p.node for p in placement.values())) \
            if engine.node_traffic else []
        start_at = time.time() + backend.start_lead(len(roles) + len(sampled))
        if sampled:
            backend.count_traffic(sampled, rep_dir, start_at)
        endpoints = {r: placement[r].address for r in roles}
        commands = {}
        secrets_dir = run.secrets_path.resolve()
        engine.secrets(test, roles, str(secrets_dir))
        config_seen, secrets_seen = backend.role_dirs(rep_dir.resolve(), secrets_dir)
        ports = {k: v for p in placement.values() for k, v in p.ports.items()}
        for role in roles:
            ctx = RoleContext(role=role, address=placement[role].address,
                              interface=placement[role].interface, endpoints=endpoints,
                              discovery=discovery, config_dir=config_seen,
                              secrets_dir=secrets_seen, ports=ports, start_at=start_at,
                              stream_rate=stream.rate if stream else 0.0)
            cmd = engine.command(test, ctx)
            for name, content in cmd.files.items():
                (rep_dir / name).write_text(content)
            commands[role] = cmd
        entry.argv = {r: list(c.argv) for r, c in commands.items()}
        driver, followers = roles[0], roles[1:]
        # where the engine listens: the first follower, the server the others talk to
        server = followers[0] if engine.listen_port and followers else None
        nodes_before = backend.node_cpu()
        for role in followers:
            handles[role] = backend.start(
                placement[role], commands[role], rep_dir / f"{role}.log",
                listen=engine.listen_port if role == server else None)
        backend.ready(list(handles.values()))
        if server and not backend.wait_listening(handles[server], engine.listen_port,
                                                 LISTEN_TIMEOUT):
            # the client would only fail to connect: say why instead
            codes.update(backend.stop(list(handles.values())))
            raise _Refused(f"{server} did not listen on TCP port {engine.listen_port} "
                           f"within {LISTEN_TIMEOUT:g} s (see {server}.log)")
        handles[driver] = backend.start(placement[driver], commands[driver],
                                             rep_dir / f"{driver}.log")
        backend.ready([handles[driver]])
        before, started = backend.usage(), time.monotonic()
        stopping.check()  # a stop swallowed by a library on the way is not lost
        codes[driver] = backend.wait(handles[driver], engine.timeout(test))
        stopping.check()
        _write_usage(rep_dir, before, backend.usage(), time.monotonic() - started)
        stopping.check()
        if codes[driver] is None:
            codes.update(backend.stop(list(handles.values())))
            entry.reason = (f"{driver} did not finish within "
                               f"{engine.timeout(test):g} s and was stopped")
        else:
            deadline = time.monotonic() + engine.drain
            for role in followers:
                codes[role] = backend.wait(handles[role], deadline - time.monotonic())
            # the clients before their server: a broker stopped under a load stream cut
            # the stream's writes, and its log's "connection reset by peer" failed the
            # repeat (CI, 2026-12-03)
            for group in ([r for r in followers if r != server], [server]):
                codes.update(backend.stop([handles[r] for r in group
                                           if r in handles and codes.get(r) is None]))
    except DeploymentError as exc:  # this repeat could not be deployed; the run goes on
        entry.reason = f"deployment failed: {exc}"
    except _Refused as exc:
        entry.reason = str(exc)
    finally:
        backend.teardown()
    if nodes_before is not None:
        _write_cpu(rep_dir, backend.role_cpu(list(handles.values())), nodes_before,
                   backend.node_cpu(), set(entry.placement.values()))
    entry.exit_codes = codes
    entry.wall_s = round(time.monotonic() - t0, 3)
    parsed = records.parse_logs(test, rep_dir, roles, engine.parser)
    rows = records.rows(run.run_id, backend.name, test, key.repeat, entry.placement,
                        parsed, arches, dropped=entry.dropped)
    if rows:
        run.append_results(rows)
    if entry.reason is None:
        entry.reason = _failure(roles, handles, codes, parsed)
    entry.status = "failed" if entry.reason else "done"
    return entry


LISTEN_TIMEOUT = 10.0  # seconds a server gets to open its port


class _Refused(Exception):
    """The repeat cannot go on as asked, by what the run itself found (a server role never
    opened its port, multicast did not cross): it fails with this reason."""


# usage keys that are levels (memory, load), recorded as read at the end, not differenced
GAUGES = ("_mb", "_load1")


def _write_usage(rep_dir: Path, before: dict, after: dict, wall: float) -> None:
    """What the datapath itself consumed while the driver ran (records.USAGE)."""
    usage = {"wall_s": round(wall, 3)}
    usage.update({k: round(after[k] - before[k], 3) for k in before
                  if k in after and not k.endswith(GAUGES)})
    usage.update({k: round(v, 3) for k, v in after.items() if k.endswith(GAUGES)})
    atomic_write(rep_dir / records.USAGE, json.dumps(usage) + "\n")


def _write_cpu(rep_dir: Path, roles: Mapping[str, CpuUse], before: Mapping[str, float],
               after: Mapping[str, float], placed: set[str]) -> None:
    """What each role's process and each placed node used over the repeat
    (parsers.cpu.FILE); nothing where the backend read neither."""
    nodes = {n: round(after[n] - before[n], 6) for n in sorted(placed)
             if n in before and n in after}
    if roles or nodes:
        atomic_write(rep_dir / cpu.FILE, json.dumps({
            "roles": {r: {"user_s": round(u.user_s, 6), "system_s": round(u.system_s, 6)}
                      for r, u in roles.items()},
            "nodes": {n: {"cpu_s": s} for n, s in nodes.items()}}) + "\n")


def _failure(roles, handles, codes, parsed) -> str | None:
    """Why the repeat failed: a role that exited badly or measured nothing; None if fine."""
    reasons = []
    for role in roles:
        code = codes.get(role)
        stopped = role in handles and handles[role].stopped
        why = parsed[role].failure
        if code not in (0, None) and not stopped:
            reasons.append(f"{role} exited with status {code}" + (f": {why}" if why else ""))
        elif why:
            reasons.append(f"{role}: {why}")
    return "; ".join(reasons) or None


def _fingerprint(backend: Backend, placement) -> dict[str, dict]:
    """The backend's fingerprints of the deployed nodes; a probe's failure, said."""
    try:
        return backend.fingerprint(placement)
    except (OSError, DeploymentError, ValueError) as exc:
        return {"(not taken)": {"error": f"{type(exc).__name__}: {exc}"[:300]}}
