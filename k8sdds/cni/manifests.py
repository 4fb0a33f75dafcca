"""A CNI's shipped manifest (k8sdds/manifests, pinned by SHA-256) and the changes every
install makes to it: images pinned where it names `latest` or no tag, pulled only when absent
(hosts with no registry run what `cluster images` loaded)."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from pathlib import Path

from k8sdds.cni.base import Cni, Plan, UpstreamManifest, containers, objects
from k8sdds.errors import UserError

DIRECTORY = Path(__file__).resolve().parents[1] / "manifests"


def path(manifest: UpstreamManifest) -> Path:
    return DIRECTORY / manifest.file


def shipped(cni: Cni) -> str:
    """The manifest as shipped, after its digest is checked."""
    from k8sdds.guarded import read_bytes

    if cni.manifest is None:
        raise UserError(f"{cni.name} has no manifest: nothing to install")
    where = path(cni.manifest)
    data = read_bytes(where, "CNI manifest")
    got = hashlib.sha256(data).hexdigest()
    if got != cni.manifest.sha256:
        raise UserError(f"{where}: not the pinned {cni.name} manifest (sha256 {got}, expected "
                        f"{cni.manifest.sha256}); reinstall k8sdds")
    return data.decode()


def documents(text: str) -> list[dict]:
    import yaml

    return [d for d in yaml.safe_load_all(text) if d]


def pin(docs: list[dict], images: Mapping[str, str]) -> list[dict]:
    """Every container's image through `images` (unlisted: unchanged), pulled if absent."""
    for obj in objects(docs):
        for c in containers(obj):
            c["image"] = images.get(c["image"], c["image"])
            c["imagePullPolicy"] = "IfNotPresent"
    return docs


def adapted(plan: Plan, text: str) -> list[dict]:
    """The manifest's documents as `cluster init` applies them. Pure."""
    docs = pin(documents(text), plan.manifest.pins if plan.manifest else {})
    return plan.cni.adapt(plan.install, docs)


def adapt(plan: Plan, text: str) -> str:
    """The manifest as `cluster init` applies it (YAML). Pure."""
    import yaml

    return yaml.safe_dump_all(adapted(plan, text), sort_keys=False)


def images(plan: Plan) -> list[str]:
    """The images the install's pods run."""
    if plan.manifest is None:
        return []
    docs = adapted(plan, shipped(plan.cni))
    return sorted({c["image"] for obj in objects(docs) for c in containers(obj)})


def url_steps(plan: Plan, kubectl: tuple[str, ...]) -> list[tuple[str, ...]]:
    """The online way (--manifest-url): the published manifest applied by URL on the control
    plane, then what `adapt` would have changed, as patches."""
    url = plan.url or (plan.manifest.url if plan.manifest else "")
    return [(*kubectl, "apply", "-f", url), *plan.cni.url_steps(plan.install, kubectl)]
