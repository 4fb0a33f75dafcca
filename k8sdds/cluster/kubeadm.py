"""`k8sdds cluster init|join|reset`: kubeadm and the CNIs of the K8sDDS study, as argv lists.

kubeadm gets a configuration file k8sdds writes (the control plane's address and name, the
pod network, the Kubernetes version of the host's own kubeadm: nothing is looked up on the
network), with the user's extra documents (`--kubeadm-config`). The CNI's manifest is the
one shipped with k8sdds (its record in k8sdds/cni), copied to the control plane and applied
from there; `--manifest-url` applies the published one by URL instead.
"""

from __future__ import annotations

import json
import re
import secrets
import shlex
from pathlib import Path

from k8sdds import cni as cnis
from k8sdds.cluster.inventory import Inventory
from k8sdds.cluster.ready import ADMIN, KUBECTL, wait_ready
from k8sdds.cluster.remote import HostError, Remote, checked, last_line, on_hosts, remote_file
from k8sdds.cni.base import Plan
from k8sdds.cni.manifests import adapt, shipped, url_steps
from k8sdds.errors import UserError

__all__ = ["Plan", "init", "join_all", "drain", "reset", "reset_all", "kubeadm_config",
           "without_cluster_rules"]

DRAIN_TIMEOUT_S = 180  # pods leaving every node (their grace periods)
KINDS = {"InitConfiguration": "kubeadm.k8s.io", "ClusterConfiguration": "kubeadm.k8s.io",
         "KubeletConfiguration": "kubelet.config.k8s.io",
         "KubeProxyConfiguration": "kubeproxy.config.k8s.io"}
PREFLIGHT = re.compile(r"^(all|[A-Za-z0-9][A-Za-z0-9._-]*)(,[A-Za-z0-9][A-Za-z0-9._-]*)*$")
JOIN = re.compile(r"^kubeadm join \S+:\d+ --token [a-z0-9]{6}\.[a-z0-9]{16} "
                  r"--discovery-token-ca-cert-hash sha256:[0-9a-f]{64}\s*$")
VERSION = re.compile(r"^v\d+\.\d+\.\d+([-+][0-9A-Za-z.+-]+)?$")


def extra_config(path: Path) -> list[dict]:
    """The user's kubeadm configuration documents (--kubeadm-config), checked: each a
    mapping of a kind kubeadm init reads."""
    import yaml

    from k8sdds.guarded import read_text

    text = read_text(path, "kubeadm configuration")
    try:
        docs = [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f", line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise UserError(f"{path}{where}: not valid YAML") from None
    for n, doc in enumerate(docs, start=1):
        kind = doc.get("kind") if isinstance(doc, dict) else None
        if kind not in KINDS:
            raise UserError(f"{path}, document {n}: kind {kind!r} is not one of "
                            f"{', '.join(KINDS)}")
        if not str(doc.get("apiVersion", "")).startswith(KINDS[kind] + "/"):
            raise UserError(f"{path}, document {n} ({kind}): apiVersion "
                            f"{doc.get('apiVersion')!r} is not {KINDS[kind]}/<version>")
    return docs


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = (_merge(out[key], value) if isinstance(value, dict)
                    and isinstance(out.get(key), dict) else value)
    return out


def kubeadm_config(name: str, address: str, version: str, cni: Plan,
                   extra: list[dict] = ()) -> str:
    """kubeadm init's configuration: k8sdds's InitConfiguration and ClusterConfiguration with
    the user's documents merged over them (same kind) or added (other kinds). Pure."""
    import yaml

    docs = [{"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "InitConfiguration",
             "localAPIEndpoint": {"advertiseAddress": address},
             "nodeRegistration": {"name": name}},
            {"apiVersion": "kubeadm.k8s.io/v1beta4", "kind": "ClusterConfiguration",
             "kubernetesVersion": version, "networking": {"podSubnet": cni.pod_cidr}}]
    for doc in extra:
        same = [i for i, d in enumerate(docs) if d["kind"] == doc["kind"]]
        if same:
            docs[same[0]] = _merge(docs[same[0]], doc)
        else:
            docs.append(dict(doc))
    return yaml.safe_dump_all(docs, sort_keys=False)


def _preflight(ignore: str | None) -> tuple[str, ...]:
    return (f"--ignore-preflight-errors={ignore}",) if ignore else ()


def host_version(remote: Remote) -> str:
    """The Kubernetes version of the host's kubeadm (what the cluster runs)."""
    r = checked(remote, ("kubeadm", "version", "-o", "short"))
    got = r.out.strip() if not remote.dry_run else "v1.34.3"
    if not VERSION.match(got):
        raise HostError(f"kubeadm version -o short said {got[:60]!r}")
    return got


def init(remote: Remote, cni: Plan, extra: list[dict] = (), ignore: str | None = None,
         url: bool = False) -> list[str]:
    """kubeadm init on the control plane, then the CNI; returns what was done, in words."""
    host = remote.host
    version = host_version(remote)
    config = kubeadm_config(host.name, host.address, version, cni, extra)
    with remote_file(remote, config, "kubeadm") as path:
        checked(remote, ("kubeadm", "init", "--config", path, *_preflight(ignore)), root=True,
                timeout=900)
    done = [f"kubeadm init {version} (pod network {cni.pod_cidr})"]
    secret = cni.install.secret
    if secret:  # an encryption password (weave's): generated, never printed or logged
        checked(remote, (*KUBECTL, "-n", "kube-system", "create", "secret", "generic",
                         secret, f"--from-file={secret}=/dev/stdin"),
                root=True, stdin=secrets.token_urlsafe(32))
        done.append(f"Secret {secret}")
    if url:
        for step in url_steps(cni, KUBECTL):
            checked(remote, step, root=True)
            done.append(shlex.join(step[3:])[:90])
        return done
    with remote_file(remote, adapt(cni, shipped(cni)), cni.name) as path:
        checked(remote, (*KUBECTL, "apply", "-f", path), root=True)
    return [*done, f"{cni.manifest.file} applied (shipped, pinned)"]


def admin_conf(remote: Remote) -> str:
    """The control plane's admin kubeconfig (cluster-admin: write it 0600)."""
    return checked(remote, (*KUBECTL, "config", "view", "--raw"), root=True).out


def keep_admin_conf(path: Path, text: str) -> str:
    """Write the fetched admin kubeconfig to `path` (0600, in one step); what was done."""
    from k8sdds.results import atomic_write

    try:
        atomic_write(path, text, mode=0o600)
    except OSError as exc:
        raise UserError(f"--kubeconfig {path}: {exc.strerror}; the cluster is up: fetch "
                        f"{ADMIN} from the control plane by hand") from None
    return f"kubeconfig: {path} (the control plane's {ADMIN}, cluster-admin, 0600)"


def join_command(remote: Remote) -> tuple[str, ...]:
    """A fresh join command from the control plane (a token valid 24 h), as argv."""
    r = checked(remote, ("kubeadm", "token", "create", "--print-join-command"), root=True)
    line = r.out.strip().splitlines()[-1] if r.out.strip() else ""
    if remote.dry_run:
        line = ("kubeadm join CONTROL-PLANE:6443 --token TOKEN "
                "--discovery-token-ca-cert-hash sha256:HASH")
    elif not JOIN.match(line):
        raise HostError(f"unexpected answer to kubeadm token create: {line[:120]!r}")
    return tuple(shlex.split(line))


def join(remote: Remote, command: tuple[str, ...], ignore: str | None = None) -> list[str]:
    checked(remote, (*command, f"--node-name={remote.host.name}", *_preflight(ignore)),
            root=True, timeout=900)
    return ["kubeadm join"]


def join_all(inventory: Inventory, known_hosts: str, dry_run: bool, folder: Path,
             ignore: str | None = None) -> dict[str, list[str] | HostError]:
    """The join sequence: a fresh join command from the control plane, every worker joined
    with it at once, then (when all joined) a wait on the control plane until every node is
    Ready. A control plane that cannot give the command touches no worker."""
    control = inventory.control_plane()
    log = folder / f"{control.name}.log"
    try:
        with Remote(control, known_hosts, log, dry_run=dry_run) as r:
            command = join_command(r)
    except HostError as exc:
        raise UserError(f"{control.name} (control plane): {exc}; no worker was touched"
                        ) from None
    results = on_hosts(inventory.workers(), known_hosts, dry_run, folder,
                       lambda r: join(r, command, ignore))
    if dry_run or not any(isinstance(v, HostError) for v in results.values()):
        try:
            with Remote(control, known_hosts, log, dry_run=dry_run) as r:
                ready = wait_ready(r, [h.name for h in inventory.hosts])
            if not dry_run:
                results[control.name] = ready
        except HostError as exc:
            results[control.name] = exc
    return results


# what the CNIs leave on a node after kubeadm reset (each CNI's record says its own): their
# configuration (the files: the container runtime watches the directory, and one removed
# and made again goes unseen until it restarts), IPAM state, the plugins their init
# containers installed, their state, links and routes
RESET_CONFIG = ("find", "/etc/cni/net.d", "-mindepth", "1", "-delete")
RESET_FILES = ("rm", "-rf", "/var/lib/cni", *cnis.reset_files())
LINKS = cnis.reset_links()
# chains of kube-proxy, the CNI plugins and the CNIs
CHAINS = ("KUBE-", "CNI-", *cnis.reset_chains())
ROUTES = cnis.reset_routes()
IPSETS = cnis.reset_ipsets()
COMMENTS = cnis.reset_comments()


def present_links(listing: str, wanted: tuple[str, ...]) -> list[str]:
    """The links of `wanted` that `ip -o link show` lists: only those are deleted, since
    naming an absent one (`ip link delete tunl0`) makes the kernel load the module that
    provides it, which creates it (ipip's tunl0 on a Pi's kernel). Pure."""
    names = {line.split(":")[1].strip().split("@")[0] for line in listing.splitlines()
             if line.count(":") >= 2}
    return [link for link in wanted if link in names]


def cluster_sets(listing: str) -> list[str]:
    """The ipsets of `ipset list -n` a CNI made. Pure."""
    return [name for name in listing.split() if name.startswith(IPSETS)]


def _after(words: list[str], flags: tuple[str, ...]) -> list[str]:
    """The words that follow any of `flags` in an iptables rule. Pure."""
    return [words[i + 1] for i, w in enumerate(words[:-1]) if w in flags]


def without_cluster_rules(saved: str) -> str:
    """iptables-save output without the chains (and jumps to them) a cluster made, the rules
    that match a CNI's ipsets (kube-router's masquerade in POSTROUTING), those a CNI's
    comment marks (kube-router's ACCEPTs in FORWARD) and those on a CNI's links (Weave Net's
    FORWARD rules on its bridge): what `iptables-restore` puts back after a reset. Pure."""
    out = []
    for line in saved.splitlines():
        words = line.split()
        if line.startswith(":") and line[1:].startswith(CHAINS):
            continue
        if line.startswith("-A ") and (
                words[1].startswith(CHAINS)
                or any(w.startswith(CHAINS) for w in _after(words, ("-j", "-g")))
                or any(w.startswith(IPSETS) for w in _after(words, ("--match-set",)))
                or any(f'--comment "{c}' in line for c in COMMENTS)
                or any(w in LINKS for w in _after(words, ("-i", "-o")))):
            continue
        out.append(line)
    return "\n".join(out) + "\n"


def drain(remote: Remote, names: list[str]) -> list[str]:
    """On the control plane: cordon the nodes among `names`, then drain them, as Kubernetes
    asks before `kubeadm reset`. The pods leave through their CNI while its daemons still
    run: a CNI's delete may need its daemon (Weave Net's releases the pod's address through
    the router), and kubeadm reset removes pods in the runtime's order, so a pod it reaches
    after the daemon's own cannot stop, its network namespace left on the host. DaemonSet
    pods stay (the CNI's and kube-proxy's, on the host's network). No cluster to ask (no
    admin.conf, no API server): nothing drained, and why."""
    listed = remote.run((*KUBECTL, "get", "nodes", "-o", "name"), root=True)
    if listed.code != 0:
        return [f"nothing drained ({last_line(listed)[:120]})"]
    known = {n.removeprefix("node/") for n in listed.out.split()}
    nodes = names if remote.dry_run else [n for n in names if n in known]
    if not nodes:
        return ["no node to drain"]
    checked(remote, (*KUBECTL, "cordon", *nodes), root=True)  # evicted pods land nowhere
    checked(remote, (*KUBECTL, "drain", *nodes, "--ignore-daemonsets", "--delete-emptydir-data",
                     "--force", f"--timeout={DRAIN_TIMEOUT_S}s"), root=True,
            timeout=DRAIN_TIMEOUT_S + 60)
    return [f"{len(nodes)} nodes drained"]


def reset_all(inventory: Inventory, known_hosts: str, dry_run: bool, folder: Path,
              purge: bool = False) -> dict[str, list[str] | HostError]:
    """The reset sequence: every node drained from the control plane, then every host reset
    at once (and, with `purge`, what `cluster install` put on it removed). A drain that
    fails (a control plane already broken) is said and the reset goes on: a reset must work
    on what is left of a cluster."""
    from k8sdds.cluster import install

    control = inventory.control_plane()
    try:
        with Remote(control, known_hosts, folder / f"{control.name}.log",
                    dry_run=dry_run) as r:
            drained = drain(r, [h.name for h in inventory.hosts])
    except HostError as exc:
        drained = [f"drain failed ({exc}); reset anyway"]
    results = on_hosts(inventory.hosts, known_hosts, dry_run, folder,
                       (lambda r: [*reset(r), *install.purge(r)]) if purge else reset)
    if not isinstance(results.get(control.name), HostError):
        results[control.name] = [*drained, *results[control.name]]
    return results


def network_mode(inspected: str) -> str:
    """The network namespace mode of `crictl inspectp -o json`'s pod sandbox: NODE for the
    host's network, POD (protobuf leaves the default out) for its own. Pure."""
    try:
        status = json.loads(inspected)["status"]
        return status.get("linux", {}).get("namespaces", {}).get("options", {}).get(
            "network", "POD")
    except (ValueError, KeyError, TypeError, AttributeError):
        return "unknown"


def remove_pods(remote: Remote) -> list[str]:
    """Before kubeadm reset: the kubelet stopped (it would start them again), then every
    pod sandbox on a network of its own stopped and removed through the container runtime,
    while the CNI's daemon (on the host's network) still runs. kubeadm reset removes pods in
    the runtime's order, and a pod whose CNI delete needs the daemon (Weave Net's releases
    its address through the router) cannot stop once the daemon's pod is gone: its sandbox
    and network namespace stay on the host. Drained pods are gone already; this catches
    the rest (a DaemonSet's, a stopped sandbox the kubelet has not collected yet). With no
    crictl on the host, kubeadm reset alone removes them."""
    if remote.run(("crictl", "--version"), root=True).code != 0:
        return ["no crictl: the pods left to kubeadm reset"]
    remote.run(("systemctl", "stop", "kubelet"), root=True)  # not running: fine
    listed = remote.run(("crictl", "pods", "-q"), root=True)
    if listed.code != 0:
        return ["crictl pods failed: the pods left to kubeadm reset"]
    removed, failed = 0, []
    for sandbox in listed.out.split():
        inspected = remote.run(("crictl", "inspectp", "-o", "json", sandbox), root=True)
        if inspected.code != 0 or network_mode(inspected.out) in ("NODE", "unknown"):
            continue
        for verb in ("stopp", "rmp"):
            done = remote.run(("crictl", verb, sandbox), root=True, timeout=120)
            if done.code != 0:
                failed.append(sandbox[:12])
                break
        else:
            removed += 1
    return [f"{removed} pods removed" + (f" ({len(failed)} not: {', '.join(failed)})"
                                         if failed else "")]


def reset(remote: Remote) -> list[str]:
    """kubeadm reset and what it leaves behind: the CNIs' files, links, routes, the
    cluster's iptables rules and the CNIs' ipsets (what may not exist is fine)."""
    removed = remove_pods(remote)
    checked(remote, ("kubeadm", "reset", "-f"), root=True, timeout=600)
    remote.run(RESET_CONFIG, root=True)  # no such directory: nothing to remove
    checked(remote, RESET_FILES, root=True)
    listed = remote.run(("ip", "-o", "link", "show"), root=True)
    for link in present_links(listed.out, LINKS):
        remote.run(("ip", "link", "delete", link), root=True)
    for route in ROUTES:
        remote.run(route, root=True)
    done = [*removed, "kubeadm reset", "CNI state removed"]
    for save, restore in (("iptables-save", "iptables-restore"),
                          ("ip6tables-save", "ip6tables-restore")):
        saved = remote.run((save,), root=True)
        if saved.code != 0 or remote.dry_run:
            continue
        kept = without_cluster_rules(saved.out)
        if kept != saved.out.rstrip("\n") + "\n":
            checked(remote, (restore,), root=True, stdin=kept)
            done.append(f"cluster rules removed ({save.removesuffix('-save')})")
    listed = remote.run(("ipset", "list", "-n"), root=True)  # no ipset here: none made
    sets = cluster_sets(listed.out) if listed.code == 0 and not remote.dry_run else []
    for name in sets:  # no rule refers to them any more
        checked(remote, ("ipset", "destroy", name), root=True)
    if sets:
        done.append(f"{len(sets)} ipsets removed")
    return done
