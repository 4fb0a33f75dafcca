"""The ssh backend: the engines run directly on bare hosts (the bare-metal baseline of the
studies), started over SSH from the inventory of `k8sdds cluster`.

Each role is one SSH channel running `sh -c 'echo PID; exec env K=V... ARGV'`: its output
streams into the role's log here, its exit status is the channel's, and it is stopped with
`kill` by that PID. Configuration files and the run's secrets are copied into a private
directory per run on every host, removed at the end.
"""

from __future__ import annotations

import secrets as random
import shlex
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from k8sdds import model, stopping
from k8sdds.cluster import inventory as inv
from k8sdds.cluster.remote import HostError, Remote
from k8sdds.deployment.base import Handle, Placement, mentions, shippable
from k8sdds.deployment.options import SshOptions
from k8sdds.deployment.placement import place
from k8sdds.engines.base import Command
from k8sdds.errors import SshError, UserError
from k8sdds.model import DEBIAN_ARCH, Limits, Test
from k8sdds.results import atomic_write

MAX_PER_HOST = 16  # processes of one test on one host
PID_LINE = "k8sdds-pid "
STARTED_S = 30.0  # seconds a started role's shell gets to say its PID (`ready`)


class SshBackend:
    name = "ssh"
    local_engines = False  # they run on the hosts
    images = False  # roles run in container images (--image, --rtiperftest-image)

    def __init__(self, options: SshOptions = SshOptions()):
        if options.inventory is None:
            raise UserError("--backend ssh needs the hosts: --inventory FILE (see "
                            "`k8sdds cluster`)")
        self.inventory = inv.load(options.inventory)
        self.known_hosts = (str(options.known_hosts) if options.known_hosts
                            else self.inventory.known_hosts)
        self.run_id = random.token_hex(3)
        self.workdir = f"/tmp/k8sdds-{self.run_id}"
        self._remotes: dict[str, Remote] = {}
        self._facts: dict[str, dict] = {}
        self._engine_bin = {h.name: h.engine_bin for h in self.inventory.hosts}
        self._handles: list[Handle] = []
        self._procs: dict[str, tuple[object, threading.Thread, dict]] = {}
        self._secrets_dir: Path | None = None
        self._shipped: dict[str, bytes] = {}

    def limits(self) -> Limits:
        workers = max(1, len(self.inventory.workers()) - 1)
        arches = {h.name: DEBIAN_ARCH.get(h.arch, h.arch) for h in self.inventory.workers()}
        return Limits(max_subscribers=workers * MAX_PER_HOST, paths=("node-node",),
                      arches=arches)

    def datapaths(self) -> Sequence[str]:
        return [model.HOST_NETWORK]

    def unavailable(self, datapath: str) -> str | None:
        return None if datapath == model.HOST_NETWORK else (
            "the ssh backend runs on the hosts' own network (host); the datapaths of a CNI "
            "are measured with --backend kubernetes")

    def up(self) -> None:
        hosts = self.inventory.workers() or list(self.inventory.hosts)
        try:
            for host in hosts:
                remote = Remote(host, self.known_hosts)
                remote.__enter__()
                self._remotes[host.name] = remote
                self._must(remote, ["mkdir", "-m", "700", "-p", f"{self.workdir}/config",
                                    f"{self.workdir}/secrets"])
                kernel = remote.run(["uname", "-r"]).out.strip()
                # the interface holding the inventory's address: DDS is told to use it, so
                # that a host with more (a Kubernetes node's bridge, tunnels and veths) never
                # has Cyclone pick another one for discovery
                addrs = remote.run(["ip", "-o", "addr", "show"])
                self._facts[host.name] = {"name": host.name, "address": host.address,
                                          "role": host.role, "arch": host.arch,
                                          "kernel": kernel,
                                          "interface": interface_of(host.address, addrs.out)
                                          if addrs.code == 0 else ""}
        except (HostError, SshError) as exc:
            self.down()
            raise SshError(f"ssh backend: {exc}") from None

    def use_datapath(self, name: str) -> None:
        """The hosts' network is what it is."""

    def deploy(self, test: Test, roles: Sequence[str], repeat: int = 1,
               service_ports: Sequence[tuple[int, str]] = ()) -> Mapping[str, Placement]:
        names = list(self._remotes)
        on = place(roles, names, test.placement)
        hosts = {h.name: h for h in self.inventory.hosts}
        return {r: Placement(r, on[r], hosts[on[r]].address,
                             self._facts[on[r]]["interface"], on[r], on[r]) for r in roles}

    def role_dirs(self, config_dir: Path, secrets_dir: Path) -> tuple[str, str]:
        self._secrets_dir = secrets_dir
        return f"{self.workdir}/config", f"{self.workdir}/secrets"

    def count_traffic(self, nodes: Sequence[str], folder: Path, start: float) -> None:
        """The sampler (parsers.counters: bash on the host) on each placed host, as a role
        of its own over SSH, stopped with the roles at teardown."""
        from k8sdds.parsers import counters

        for node in nodes:
            self.start(Placement(counters.ROLE, node, "", "", node, node),
                       Command(counters.argv(start)), folder / f"{counters.PREFIX}{node}.log")

    def start_lead(self, roles: int) -> float:
        """An SSH channel a role: a fraction of a second each, on a slow board too."""
        return 2.0 + 0.3 * roles

    def start(self, placement: Placement, command: Command, log: Path,
              listen: int | None = None) -> Handle:
        remote = self._remotes[placement.node]
        try:
            if mentions(command, f"{self.workdir}/secrets"):
                self._ship_secrets(remote)
            for name, content in command.files.items():
                self._must(remote, ["tee", f"{self.workdir}/config/{name}"], stdin=content)
        except HostError as exc:
            raise SshError(f"start {placement.role} on {placement.node}: {exc}") from None
        try:
            chan = self._open(placement.node, command)
        except Exception as exc:  # noqa: BLE001 - the connection went: this repeat fails
            raise SshError(f"start {placement.role} on {placement.node}: {exc}") from None
        state: dict = {"pid": None, "data": bytearray(), "started": threading.Event()}
        pump = threading.Thread(target=_pump, args=(chan, state, log), daemon=True)
        pump.start()
        handle = Handle(placement.role, None, log, ref=f"{placement.node}/{placement.role}")
        self._procs[handle.ref] = (chan, pump, state)
        self._handles.append(handle)
        return handle

    def _open(self, node: str, command: Command):
        """A channel running `command` on `node` (its engine_bin first on PATH), its first
        line the shell's PID, stderr in stdout (one log, as the other backends keep it)."""
        env = [f"{k}={v}" for k, v in sorted(command.env.items())]
        # the host's engine_bin first on PATH (quoted into the script, checked by inventory)
        path = self._engine_bin.get(node, "")
        prefix = f'PATH={shlex.quote(path)}:"$PATH"; ' if path else ""
        line = shlex.join(["sh", "-c", f'{prefix}echo "{PID_LINE}$$"; exec "$@"', "sh",
                           "env", *env, *command.argv])
        chan = self._remotes[node]._client.get_transport().open_session(timeout=10)
        chan.set_combine_stderr(True)
        chan.exec_command(line)
        chan.shutdown_write()
        return chan

    def ready(self, handles: Sequence[Handle]) -> None:
        """Each process has started: its shell said its PID (or its channel closed). An
        exec'd channel is not yet a process: a slow host (an emulated Pi under load) took
        seconds more to start one, and a follower's ddsperf had given up on its peers
        (-Q initwait) before the driver's started."""
        deadline = time.monotonic() + STARTED_S
        for handle in handles:
            started = self._procs[handle.ref][2]["started"]
            while not started.wait(min(0.2, max(0.0, deadline - time.monotonic()))):
                stopping.check()
                if time.monotonic() >= deadline:
                    raise SshError(f"{handle.role} did not start on "
                                   f"{handle.ref.split('/')[0]} within {STARTED_S:g} s")

    def wait_listening(self, handle: Handle, port: int, timeout: float) -> bool:
        chan, _, _ = self._procs[handle.ref]
        remote = self._remotes[handle.ref.split("/")[0]]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not chan.exit_status_ready():
            try:
                r = remote.run(["ss", "-Htln", "sport", "=", f":{port}"])
            except HostError:
                return False
            if r.out.strip():
                return True
            time.sleep(0.1)  # a remote socket appearing: polled, no event reaches here
        return False

    def wait(self, handle: Handle, timeout: float) -> int | None:
        chan, pump, _ = self._procs[handle.ref]
        if not chan.status_event.wait(max(0.0, timeout)):
            return None
        pump.join(timeout=5)
        return chan.recv_exit_status()

    def stop(self, handles: Sequence[Handle], grace: float = 2.0) -> dict[str, int]:
        running = [h for h in handles if not self._procs[h.ref][0].exit_status_ready()]
        for signal in ("TERM", "KILL"):
            for handle in running:
                chan, _, state = self._procs[handle.ref]
                if state["pid"] and not chan.exit_status_ready():
                    handle.stopped = True
                    try:
                        self._remotes[handle.ref.split("/")[0]].run(
                            ["kill", f"-{signal}", str(state["pid"])])
                    except HostError:
                        chan.close()  # the host is gone, and its process with it

            deadline = time.monotonic() + grace
            for handle in running:
                self._procs[handle.ref][0].status_event.wait(
                    max(0.0, deadline - time.monotonic()))
        codes = {}
        for handle in handles:
            chan, pump, _ = self._procs[handle.ref]
            pump.join(timeout=5)
            codes[handle.role] = chan.recv_exit_status() if chan.exit_status_ready() else -9
        return codes

    def teardown(self) -> None:
        if self._handles:
            self.stop(self._handles, grace=1.0)
        for chan, pump, _ in self._procs.values():
            pump.join(timeout=5)
            chan.close()
        self._handles, self._procs = [], {}

    def down(self) -> None:
        try:
            self.teardown()
        finally:
            for remote in self._remotes.values():
                try:
                    remote.run(["rm", "-rf", self.workdir])
                except Exception:  # noqa: BLE001 - a host gone: its /tmp is its own
                    pass
                remote.__exit__(None, None, None)
            self._remotes = {}

    def role_cpu(self, handles: Sequence[Handle]) -> dict:
        """Not read yet on this backend."""
        return {}

    def node_cpu(self) -> dict[str, float]:
        """Not read yet on this backend."""
        return {}

    def usage(self) -> dict[str, float]:
        """The 1-minute load average of the hosts running the repeat."""
        loads = []
        for name in {h.ref.split("/")[0] for h in self._handles}:
            try:
                r = self._remotes[name].run(["cat", "/proc/loadavg"])
                loads.append(float(r.out.split()[0]))
            except (HostError, ValueError, IndexError):
                continue
        return {"node_load1": sum(loads) / len(loads)} if loads else {}

    def fingerprint(self, placement: Mapping[str, Placement]) -> dict[str, dict]:
        """Each placed host's fingerprint, over its SSH connection (k8sdds.fingerprint): a
        bare host's own network, no CNI."""
        from k8sdds import fingerprint as fp

        out = {}
        for name in dict.fromkeys(p.node for p in placement.values()):
            remote = self._remotes[name]

            def run(argv, remote=remote):
                try:
                    done = remote.run(argv)
                except HostError as exc:
                    return 255, str(exc)
                return done.code, done.out

            out[name] = fp.node(run, {"name": model.HOST_NETWORK, "version": "none (a bare host)",
                                      "mode": "the host's network"}, {})
        probed = self._multicast(placement)
        for name in out if probed else ():
            out[name]["multicast"] = probed
        return out

    def _multicast(self, placement: Mapping[str, Placement]) -> dict | None:
        """Multicast probed from the first placed host to the others, on each one's
        inventory address (testbed.multicast's probe, the hosts' `k8sdds-discovery probe`
        from their engine_bin): its record, or why it did not run; None on one host."""
        from k8sdds.engines.discovery import BINARY
        from k8sdds.testbed import multicast as mc

        hosts = {p.node: p.address for p in placement.values()}
        if len(hosts) < 2:
            return None
        sender, *others = hosts
        nonce = random.token_hex(8)
        listen = f"{mc.READY + mc.LISTEN + 5:g}"  # each ends by itself soon after
        chans, said_by = {}, {}
        try:
            for node in others:
                chans[node] = self._open(node, Command(
                    (BINARY, "probe", "recv", hosts[node], nonce, listen)))
            for node, chan in chans.items():
                said = said_by[node] = _said(chan, ("ready",), mc.READY)
                if "ready" not in said.split():
                    raise SshError(f"the receiver on {node} said: {said.strip()[-200:]}")
            chans[sender] = self._open(sender, Command(
                (BINARY, "probe", "send", hosts[sender], nonce)))
            said = _said(chans[sender], ("sent",), mc.READY)
            if "sent" not in said.split():
                raise SshError(f"the sender on {sender} said: {said.strip()[-200:]}")
            arrived = {node: "arrived" in _said(chans[node], ("arrived", "none"),
                                                mc.LISTEN).split() for node in others}
            return mc.MulticastProbe(sender=sender, between="nodes", arrived=arrived).record()
        except (HostError, SshError, OSError) as exc:  # said, never the repeat's end
            return {"error": f"the multicast probe failed: {exc}"[:300]}
        finally:
            for node, chan in chans.items():  # a receiver that heard nothing still listens
                pid = _pid(said_by.get(node, ""))
                if pid and not chan.exit_status_ready():
                    try:
                        self._remotes[node].run(["kill", pid])
                    except HostError:
                        pass  # the host went: so did the receiver's session
                chan.close()

    def describe(self) -> dict:
        return {"hosts": list(self._facts.values()), "workdir": self.workdir,
                "not_applied": []}

    def _ship_secrets(self, remote: Remote) -> None:
        """The run's credentials (without the CA key) into the host's private directory."""
        for name, data in shippable(self._secrets_dir).items():
            key = f"{remote.host.name}/{name}"
            if self._shipped.get(key) != data:
                self._must(remote, ["sh", "-c", 'umask 077 && cat > "$1"', "sh",
                                    f"{self.workdir}/secrets/{name}"], stdin=data.decode())
                self._shipped[key] = data

    @staticmethod
    def _must(remote: Remote, argv, stdin: str | None = None):
        r = remote.run(argv, stdin=stdin)
        if r.code != 0:
            raise HostError(f"{remote.host.name}: {argv[0]}: "
                            f"{r.err.strip() or 'exit ' + str(r.code)}")
        return r


def _pid(said: str) -> str:
    """The PID a started channel's shell said first ("" if none)."""
    first = said.split("\n", 1)[0]
    return first[len(PID_LINE):].strip() if first.startswith(PID_LINE) else ""


def _said(chan, words: Sequence[str], timeout: float) -> str:
    """What a channel printed until a line among `words` (or `timeout` seconds, or its
    end)."""
    deadline = time.monotonic() + timeout
    text = ""
    while not any(w in text.split() for w in words):
        left = deadline - time.monotonic()
        if left <= 0:
            break
        chan.settimeout(left)
        try:
            data = chan.recv(4096)
        except TimeoutError:
            break
        if not data:
            break
        text += data.decode(errors="replace")
    return text


def _pump(chan, state: dict, log: Path) -> None:
    """The role's output into its log: the first line is the PID of the remote process."""
    buf = bytearray()
    while True:
        data = chan.recv(65536)
        if not data:
            break
        buf += data
        if state["pid"] is None and b"\n" in buf:
            first, _, rest = bytes(buf).partition(b"\n")
            if first.startswith(PID_LINE.encode()):
                state["pid"] = int(first[len(PID_LINE):])
                buf = bytearray(rest)
            state["started"].set()
    state["started"].set()  # closed: what it said is in its log
    atomic_write(log, bytes(buf))


def interface_of(address: str, ip_addr: str) -> str:
    """The interface `ip -o addr show` (its text `ip_addr`) gives address `address` to ("":
    none has it, as behind NAT, where DDS then picks the interface itself). Pure."""
    for line in ip_addr.splitlines():
        words = line.split()
        if len(words) >= 4 and words[2] in ("inet", "inet6") and \
                words[3].split("/")[0] == address:
            return words[1].split("@")[0]
    return ""

