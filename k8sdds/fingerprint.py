"""A node's environment fingerprint: what decides a network figure besides the test itself.
The MTU and the NIC offloads of every interface on the measured path (the pods' interfaces,
bridge, tunnel, uplink), the kernel, the CPU model, count and governor, the network sysctls
k8sdds tunes or reads, the container runtime and kubelet versions, the CNI, and whether
multicast crossed from one node to the others (probed where the backend can:
testbed.multicast). Two runs that differ in one of these do not measure the same thing
(`compare` and `history` say so).

The probes are argv lists each backend runs its own way (in the node's namespaces, over SSH);
what they print is parsed here, with no I/O (`node`, given a runner)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

# (exit status, standard output) of an argv on the node; an absent program is exit 127, as a
# shell says it, never an exception
Runner = Callable[[Sequence[str]], tuple[int, str]]

# the sysctls k8sdds tunes (`cluster tune`) or that bound a socket's buffers and backlog
SYSCTLS = ("net.core.rmem_max", "net.core.wmem_max", "net.core.rmem_default",
           "net.core.wmem_default", "net.core.netdev_max_backlog", "net.ipv4.udp_mem",
           "net.ipv4.udp_rmem_min", "net.ipv4.udp_wmem_min", "net.ipv4.tcp_rmem",
           "net.ipv4.tcp_wmem", "net.ipv4.tcp_congestion_control")
# the offloads `ethtool -k` reports that change a packet's per-byte and per-packet price
OFFLOADS = ("rx-checksumming", "tx-checksumming", "scatter-gather",
            "tcp-segmentation-offload", "generic-segmentation-offload",
            "generic-receive-offload", "large-receive-offload", "rx-udp-gro-forwarding")
# interfaces that are not on any measured path
SKIPPED_KINDS = ("ifb", "dummy")
GOVERNOR = "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"


def links(text: str) -> dict[str, dict]:
    """`ip -j -d link show` -> {name: {mtu, kind}}; the loopback and ifb/dummy devices left
    out (no measured path crosses them). Pure."""
    out = {}
    for link in json.loads(text or "[]"):
        kind = (link.get("linkinfo") or {}).get("info_kind") or (
            "loopback" if link.get("link_type") == "loopback" else "device")
        if kind == "loopback" or kind in SKIPPED_KINDS:
            continue
        out[str(link.get("ifname"))] = {"mtu": int(link.get("mtu", 0)), "kind": kind}
    return out


def offloads(text: str) -> dict[str, str]:
    """`ethtool -k IF` -> {feature: "on"/"off"} for OFFLOADS (a "[fixed]" one as it is). Pure."""
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name in OFFLOADS and value.strip():
            out[name] = value.split()[0]
    return out


def sysctls(text: str) -> dict[str, str]:
    """`grep -H . /proc/sys/...` -> {net.core.rmem_max: "4194304", ...}. Pure."""
    out = {}
    for line in text.splitlines():
        path, sep, value = line.partition(":")
        if sep and path.startswith("/proc/sys/"):
            out[path[len("/proc/sys/"):].replace("/", ".")] = " ".join(value.split())
    return out


def sysctl_paths() -> list[str]:
    return ["/proc/sys/" + key.replace(".", "/") for key in SYSCTLS]


def _first(run: Runner, argv: Sequence[str], missing: str = "absent") -> str:
    code, out = run(argv)
    lines = out.strip().splitlines()
    return lines[0].strip() if code == 0 and lines else missing


def local(argv: Sequence[str]) -> tuple[int, str]:
    """The Runner of this machine."""
    import subprocess

    try:
        done = subprocess.run(list(argv), capture_output=True, text=True, timeout=30)
    except (FileNotFoundError, PermissionError):
        return 127, ""
    except subprocess.TimeoutExpired:
        return 124, ""
    return done.returncode, done.stdout


def _interfaces(run: Runner) -> tuple[dict[str, dict], list[str]]:
    """The namespace's interfaces (MTU, kind, offloads) and what could not be read of them
    because its program is absent (exit 127: an image without iproute2 or ethtool)."""
    code, out = run(["ip", "-j", "-d", "link", "show"])
    if code == 127:
        return {}, ["interfaces (no `ip`)"]
    found = links(out) if code == 0 else {}
    absent = []
    for name, link in found.items():
        code, text = run(["ethtool", "-k", name])
        link["offloads"] = offloads(text) if code == 0 else {}
        if code == 127 and not absent:
            absent.append("offloads (no `ethtool`)")
    return found, absent


def interfaces(run: Runner) -> dict[str, dict]:
    """Every interface of the namespace `run` runs in: MTU, kind and offloads."""
    return _interfaces(run)[0]


def network(run: Runner) -> dict:
    """What a network namespace decides: its interfaces and its network sysctls; where the
    probes' programs are absent, `not_read` says what is missing rather than an empty
    reading standing for one."""
    code, out = run(["grep", "-H", ".", *sysctl_paths()])  # exit 2 where one is absent
    found, absent = _interfaces(run)
    got = {"interfaces": found, "sysctls": sysctls(out)}
    if absent:
        got["not_read"] = ", ".join(absent)
    return got


def system(run: Runner) -> dict:
    """What a node's system decides: kernel, CPU, governor, runtime and kubelet versions."""
    code, cpuinfo = run(["cat", "/proc/cpuinfo"])
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines()
                  if line.split(":", 1)[0].strip() in ("model name", "Model")), "unknown")
    cpus = sum(1 for line in cpuinfo.splitlines() if line.startswith("processor"))
    return {"kernel": _first(run, ["uname", "-r"], "unknown"), "cpu_model": model,
            "cpu_count": cpus or None,
            "governor": _first(run, ["cat", GOVERNOR], "none (no cpufreq)"),
            "runtime": _first(run, ["containerd", "--version"]),
            "kubelet": _first(run, ["kubelet", "--version"])}


def node(run: Runner, cni: Mapping[str, str], engines: Mapping[str, str],
         pods: Mapping[str, Runner] | None = None) -> dict:
    """A node's fingerprint: the machine, the node's network namespace, each pod's (by role)
    and the CNI (name, version, mode) and engines (name -> version) the backend knows."""
    return {**system(run), **network(run),
            "pods": {role: interfaces(pod) for role, pod in (pods or {}).items()},
            "cni": dict(cni), "engines": dict(engines)}


# ---- probes run elsewhere: one script, its output recorded, read back as a Runner ---------

MARK, END = "@@k8sdds-probe ", "@@k8sdds-exit "


def probe_script(network_only: bool = False) -> str:
    """A POSIX shell script that runs the probes `node` asks for (`network` only, with
    `network_only`) and prints each one's argv, output and exit status between markers: for
    a pod, whose log is all a run reads back. Fixed text: no value of the user's in it."""
    import shlex

    fixed = [["ip", "-j", "-d", "link", "show"], ["grep", "-H", ".", *sysctl_paths()]]
    if not network_only:
        fixed += [["uname", "-r"], ["cat", "/proc/cpuinfo"], ["cat", GOVERNOR]]
    lines = [f'p() {{ echo "{MARK}$*"; "$@" 2>/dev/null; echo "{END}$?"; }}']
    lines += ["p " + " ".join(shlex.quote(a) for a in argv) for argv in fixed]
    lines.append('for d in /sys/class/net/*; do p ethtool -k "${d##*/}"; done')
    return "\n".join(lines) + "\n"


def recorded(text: str) -> Runner:
    """The Runner that answers from a probe script's output (`probe_script`): each argv it
    ran gets its recorded exit status and output; any other, 127 (as absent). Pure."""
    answers: dict[str, tuple[int, str]] = {}
    key, out = None, []
    for line in text.splitlines():
        if line.startswith(MARK):
            key, out = line[len(MARK):], []
        elif line.startswith(END) and key is not None:
            code = line[len(END):].strip()
            answers[key] = (int(code) if code.lstrip("-").isdigit() else 1,
                            "\n".join(out) + ("\n" if out else ""))
            key = None
        elif key is not None:
            out.append(line)
    return lambda argv: answers.get(" ".join(argv), (127, ""))


# ---- showing them ------------------------------------------------------------------------

def _interface(name: str, link: Mapping) -> str:
    """`flannel.1 (vxlan) 1450, GRO on, GSO on, TSO off`."""
    short = {"generic-receive-offload": "GRO", "generic-segmentation-offload": "GSO",
             "tcp-segmentation-offload": "TSO", "tx-checksumming": "tx-csum"}
    offs = link.get("offloads") or {}
    said = ", ".join(f"{word} {offs[key]}" for key, word in short.items() if key in offs)
    return f"{name} ({link.get('kind', '?')}) {link.get('mtu')}" + (f", {said}" if said
                                                                   else "")


def _multicast(probe: Mapping) -> str:
    """`to node2 arrived, node3 arrived (pods from node1)`; "" where none was probed."""
    arrived = probe.get("arrived") or {}
    if not arrived:
        return ""
    said = ", ".join(f"{n} {'arrived' if ok else 'lost'}" for n, ok in sorted(arrived.items()))
    return f"to {said} ({probe.get('between', '?')} from {probe.get('from', '?')})"


def rows(prints: Mapping[str, Mapping[str, dict]]) -> list[dict]:
    """One compact row per datapath and node: what the report and the service's run page
    show. Pure."""
    out = []
    for datapath, nodes in prints.items():
        for name, fp in nodes.items():
            cni = fp.get("cni") or {}
            sysctl = fp.get("sysctls") or {}
            pods = fp.get("pods") or {}
            out.append({
                "datapath": datapath, "node": name,
                "kernel": fp.get("kernel", fp.get("error", "")),
                "CPU": f"{fp.get('cpu_model', '?')} x{fp.get('cpu_count', '?')}, "
                       f"{fp.get('governor', '?')}" if "cpu_model" in fp else
                       fp.get("not_read", ""),
                "runtime, kubelet": f"{fp.get('runtime', '?')}; {fp.get('kubelet', '?')}",
                "CNI": " ".join(str(cni[k]) for k in ("name", "version", "mode") if k in cni),
                "interfaces": "; ".join(_interface(n, link) for n, link in
                                        sorted((fp.get("interfaces") or {}).items()))
                              + (f" (not read: {fp['not_read']})" if fp.get("not_read")
                                 and "cpu_model" in fp else ""),
                "pods": "; ".join(f"{role}: " + ", ".join(_interface(n, link) for n, link in
                                                        sorted(ifs.items()))
                                  for role, ifs in sorted(pods.items())),
                "buffers": ", ".join(f"{k.rsplit('.', 1)[1]} {sysctl[k]}" for k in
                                     ("net.core.rmem_max", "net.core.wmem_max")
                                     if k in sysctl),
                "multicast": _multicast(fp.get("multicast") or {})})
    return out


# ---- reading fingerprints: what differs between two runs --------------------------------

def flat(prints: Mapping[str, Mapping[str, dict]]) -> dict[str, str]:
    """A manifest's fingerprints ({datapath: {node: fingerprint}}) as "datapath node field"
    -> value lines, interfaces and sysctls one entry each: what two runs are compared on.
    Pure."""
    out: dict[str, str] = {}
    for datapath, nodes in sorted(prints.items()):
        for name, fp in sorted(nodes.items()):
            at = f"{datapath} {name}"
            for key in ("kernel", "cpu_model", "cpu_count", "governor", "runtime", "kubelet"):
                if key in fp:
                    out[f"{at} {key}"] = str(fp[key])
            for key in ("name", "version", "mode"):
                if key in (fp.get("cni") or {}):
                    out[f"{at} cni {key}"] = str(fp["cni"][key])
            for engine, version in sorted((fp.get("engines") or {}).items()):
                out[f"{at} engine {engine}"] = str(version)
            for receiver, arrived in sorted(((fp.get("multicast") or {}).get("arrived")
                                             or {}).items()):
                out[f"{at} multicast to {receiver}"] = "arrived" if arrived else "lost"
            for key, value in sorted((fp.get("sysctls") or {}).items()):
                out[f"{at} {key}"] = value
            places = [("", fp.get("interfaces") or {})] + [
                (f"pod {role} ", ifs) for role, ifs in sorted((fp.get("pods") or {}).items())]
            for place, ifs in places:
                for ifname, link in sorted(ifs.items()):
                    out[f"{at} {place}{ifname} mtu"] = str(link.get("mtu"))
                    for feature, state in sorted((link.get("offloads") or {}).items()):
                        out[f"{at} {place}{ifname} {feature}"] = state
    return out


def differences(a: Mapping, b: Mapping, limit: int = 8) -> list[str]:
    """What differs between two manifests' fingerprints, one line each (`limit` shown, then
    how many more); the fields only one run has are left out (a datapath or node the other
    did not measure). Pure."""
    fa, fb = flat(a or {}), flat(b or {})
    lines = [f"{key}: {fa[key]} against {fb[key]}" for key in sorted(fa.keys() & fb.keys())
             if fa[key] != fb[key]]
    if len(lines) > limit:
        lines = lines[:limit] + [f"and {len(lines) - limit} more fingerprint fields"]
    return lines
