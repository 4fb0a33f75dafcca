"""Each backend's options, declared once: the dataclass is what the backend takes, and the
CLI builds its `--flags` (help, bounds, aliases) from the same fields."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from k8sdds.flags import option
from k8sdds.images import DEFAULT_IMAGE  # the engine image's tag: the image owns it
from k8sdds.testbed.profiles import PROFILES  # the profiles' names: the registry owns them
from k8sdds.testbed.spec import DEFAULT_NAME  # the default testbed's name: the spec owns it

CALIBRATED = ", ".join(n for n, p in PROFILES.items() if p.board)


def _names(text: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Comma-separated names (or a list of them, as a manifest records them)."""
    parts = text if isinstance(text, (list, tuple)) else str(text).split(",")
    return tuple(n.strip() for n in parts if n.strip())


@dataclass(frozen=True)
class EmulatedOptions:
    """--backend emulated: the testbed on this machine."""

    testbed: str = option(
        DEFAULT_NAME, "--testbed", "testbed name (namespace prefix; left at its default with "
        "--testbed-spec: the spec's name); a run reuses a testbed of that name that is up and "
        "leaves it up, else builds one and removes it after", pins=True)
    nodes: int = option(4, "--nodes", "nodes when the testbed is built: node0 is the "
                        "control plane, the others are workers, where pods run",
                        cli_type=int, min=2, max=64)
    profile: str | None = option(
        None, "--profile", f"edge profile of every worker: {', '.join(PROFILES)} (see "
        "`k8sdds testbed profiles`)")
    testbed_spec: Path | None = option(
        None, "--testbed-spec", "testbed spec (YAML): nodes with name, role, arch, profile "
        "(--cluster is the old spelling)", "--cluster", cli_type=Path, pins=True)
    no_calibrate: bool = option(
        False, "--no-calibrate", f"run a calibrated profile ({CALIBRATED}) on the "
        "CPU budget in use even where it was not calibrated on this machine (the answer says "
        "so); without it, the run calibrates that budget here first (`k8sdds testbed "
        "calibrate`, about 4 minutes, kept for the runs after it)", cli_type=bool)

    def target(self) -> str:
        """What a run on these options occupies (one run at a time on it)."""
        return f"emulated:{self.testbed}"


@dataclass(frozen=True)
class KubernetesOptions:
    """--backend kubernetes: pods on the cluster of a kubeconfig."""

    kubeconfig: Path | None = option(None, "--kubeconfig", "kubeconfig file [$KUBECONFIG, "
                                     "~/.kube/config]", cli_type=Path, pins=True)
    context: str | None = option(None, "--context", "kubeconfig context [current]",
                                 pins=True)
    namespace: str | None = option(
        None, "--namespace", "namespace to run in (made if absent) [a new k8sdds-XXXXXX per "
        "run]; everything the run makes there is removed at the end", pins=True)
    image: str = option(DEFAULT_IMAGE, "--image", "engine image (ddsperf, iperf3, qperf, "
                        "ping; see docker/Dockerfile)")
    pub_node: str | None = option(None, "--pub-node", "node of the publisher (the first "
                                  "role) [the first Ready worker by name]")
    sub_nodes: tuple[str, ...] = option(
        (), "--sub-nodes", "comma-separated nodes the subscribers are spread over [the other "
        "Ready workers]", parse=_names)
    arch: str | None = option(None, "--arch", "only workers of this architecture "
                              "(kubernetes.io/arch: amd64, arm64, arm), for hybrid clusters")
    pod_timeout: float = option(
        120.0, "--pod-timeout", "seconds a pod gets to be running (scheduled, image pulled) "
        "before its repeat fails with the pod's reason", cli_type=float, min=1)

    def target(self) -> str:
        """What a run on these options occupies (one run at a time on it)."""
        return f"kubernetes:{self.kubeconfig or '~/.kube/config'}:{self.context or ''}"


@dataclass(frozen=True)
class SshOptions:
    """--backend ssh: the bare hosts of an inventory."""

    inventory: Path | None = option(
        None, "--inventory", "the hosts (YAML, as for `k8sdds cluster`); the publisher on "
        "the first worker, subscribers on the others", cli_type=Path, pins=True)
    known_hosts: Path | None = option(
        None, "--known-hosts", "known_hosts the host keys are checked against [the "
        "inventory's, ~/.ssh/known_hosts]", cli_type=Path)

    def target(self) -> str:
        """What a run on these options occupies (one run at a time on it)."""
        return f"ssh:{self.inventory}"
