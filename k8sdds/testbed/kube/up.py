"""`k8sdds testbed up --kubernetes`: the images the nodes need, then the cluster."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from k8sdds import model
from k8sdds.errors import UserError
from k8sdds.testbed.kube.kubelets import Kubelets
from k8sdds.testbed.kube.node import PAUSE
from k8sdds.testbed.kube.pod_network import choose
from k8sdds.testbed.testbed import Testbed


def check_datapath(name: str, cni_mode: str = "emulated") -> None:
    """What carries the pods: a real CNI wires its own datapath; the emulated wiring gives
    each node's pods its own /24 on the bridge, so a routed datapath."""
    from k8sdds.caches import k8s_bin as binaries

    dp = model.datapath(name)
    if dp.host_network:
        raise UserError("--kubernetes needs a datapath that carries pods, not host")
    if choose(name, cni_mode, binaries()).wires_testbed() and dp.pod_prefix != 24:
        fit = [d.name for d in model.DATAPATHS.values() if not d.host_network
               and d.pod_prefix == 24 and d.wiring is not None]
        raise UserError(f"--kubernetes with the emulated wiring needs a datapath that routes a "
                        f"pod CIDR per node ({', '.join(fit)}), not {name} (its real CNI: "
                        "--pod-network real)")


def bring_up(tb: Testbed, datapath: str, image_archive: Path | None, cni_mode: str = "auto",
             say: Callable[[str], None] = lambda _: None) -> Path:
    """The pause, engine and CNI images (built once, cached), the datapath (wired by the
    testbed, or by the real CNI), then the cluster; the kubeconfig."""
    from k8sdds.caches import k8s_bin as binaries
    from k8sdds.images.build import engine_image, pause

    cni = choose(datapath, cni_mode, binaries())
    if cni.fallback:
        say(f"{datapath}: emulated wiring ({cni.fallback})")
    images = [pause(PAUSE)]
    if image_archive is None:
        image_archive = engine_image(say)
    elif not Path(image_archive).is_file():
        raise UserError(f"--image-archive {image_archive}: no such file")
    images.append(Path(image_archive))
    cni.prepare(binaries(), say)
    tb.use_datapath(datapath, wired=cni.wires_testbed())
    say(f"bringing up Kubernetes on testbed {tb.spec.name}: {cni.describe()}")
    return Kubelets(tb).up(images + cni.archives, cni)
