"""A real Kubernetes cluster on the emulated testbed (`testbed up --kubernetes`), brought up
for a test module and taken down after it, with the check that the machine is left as it was
(sysctls, links, mounts, fixed paths, namespaces, cgroups, processes); and a run on it."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

from .emulated_support import cli, host_mounts, namespaces, root_links
from .kube_support import fixed_paths

ROOT = Path(__file__).parent.parent
SYSCTLS = ("vm.overcommit_memory", "vm.panic_on_oom", "kernel.panic", "kernel.panic_on_oops",
           "kernel.keys.root_maxkeys", "kernel.keys.root_maxbytes",
           "net.netfilter.nf_conntrack_max",
           # Cilium's agent's (the node shows it the values it sets)
           "net.core.bpf_jit_enable", "kernel.unprivileged_bpf_disabled",
           "kernel.timer_migration")


def sysctls() -> dict[str, str]:
    out = {}
    for key in SYSCTLS:
        path = Path("/proc/sys") / key.replace(".", "/")
        out[key] = path.read_text().strip() if path.exists() else ""
    return out


def why_not(binary: str, cni: str) -> str | None:
    """Why a real CNI's testbed cluster cannot come up here (its `binary` not built, or no
    testbed cluster at all), or None: a test module's `needs(why=...)`."""
    from k8sdds.testbed.kube import kubelets as kube

    from .emulated_support import missing

    return missing() or kube.missing() or (
        None if (kube.binaries() / binary).exists()
        else f"{cni} not built in {kube.binaries()} (.ci/k8s-test-binaries)")


def cluster_env(tmp_path_factory) -> dict:
    """The environment of a module's cluster: its own state directory, wide output."""
    return {**os.environ, "COLUMNS": "200",
            "K8SDDS_STATE_DIR": str(tmp_path_factory.mktemp("state"))}


@contextlib.contextmanager
def up_cluster(name: str, datapath: str, env: dict, says: str,
                    cni: str = "real") -> Iterator[dict]:
    """A 3-node testbed cluster (a control plane, two workers) carried by `datapath`'s CNI;
    bring-up must print `says`. Down afterwards, and the machine as it was."""
    before = (sysctls(), root_links(), host_mounts(name), fixed_paths())
    up = cli("testbed", "up", "--testbed", name, "--nodes", "3", "--kubernetes", "--datapath",
             datapath, "--pod-network", cni, env=env, cwd=ROOT, timeout=1800)
    try:
        assert up.returncode == 0, up.stderr[-3000:] + logs_of(env, name)
        assert says in up.stderr, up.stderr[-3000:]
        kubeconfig = up.stdout.strip().splitlines()[-1].removeprefix("kubeconfig: ")
        assert sysctls() == before[0]  # the kubelets changed nothing host-wide
        yield {"name": name, "env": env, "kubeconfig": kubeconfig}
    finally:
        down = cli("testbed", "down", "--testbed", name, env=env)
        assert down.returncode == 0, down.stderr
        assert (sysctls(), root_links(), host_mounts(name), fixed_paths()) == before
        assert namespaces(name) == []
        # in every hierarchy, the unified one of a hybrid system (where runc makes them) too
        assert not list(Path("/sys/fs/cgroup").glob(f"*/k8sdds/{name}"))
        assert not Path(f"/var/lib/k8sdds/{name}").exists()
        leftover = subprocess.run(["pgrep", "-f", f"{name}-kube"], capture_output=True,
                                  text=True).stdout.split()
        assert leftover == []


def logs_of(env: dict, name: str, lines: int = 15) -> str:
    """The last lines of the cluster's kubelet and CNI logs (read before `testbed down`
    removes them): why a bring-up failed, in the failure's message."""
    out = []
    for log in sorted((Path(env["K8SDDS_STATE_DIR"]) / f"{name}-kube").glob("*.log")):
        if "kubelet" in log.name or "containerd" in log.name:
            tail = log.read_text(errors="replace").splitlines()[-lines:]
            out.append(f"\n--- {log.name}\n" + "\n".join(tail))
    return "".join(out)


def run(cluster: dict, tmp_path: Path, schedule: str, *extra: str) -> tuple[dict, Path]:
    """`k8sdds run --backend kubernetes` of `schedule` on the cluster: its --json outcome and
    run directory (it must exit 0)."""
    sch = tmp_path / "s.csv"
    sch.write_text(schedule)
    done = cli("run", "--backend", "kubernetes", "--kubeconfig", cluster["kubeconfig"],
               "--sch", str(sch), "--out", str(tmp_path / "logs"), "--json", "--no-plot",
               *extra, env=cluster["env"], timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome = json.loads(done.stdout)
    return outcome, Path(outcome["run_dir"])


def probed_multicast(rundir: Path, datapath: str) -> tuple[dict[str, bool], bool | None]:
    """What the run's multicast probe (pods of the image, from node1) found on `datapath`:
    (receiving node -> arrived, arrived beside the sender); the same record on every node."""
    prints = json.loads((rundir / "manifest.json").read_text())["fingerprints"][datapath]
    records = [fp.get("multicast") for fp in prints.values()]
    assert records and all(r == records[0] for r in records), records
    probe = records[0]
    assert "error" not in probe, probe
    assert probe["from"] == "node1" and probe["group"] == "239.255.0.1:7400", probe
    return probe["arrived"], probe.get("same_node")
