"""`k8sdds cluster load-image`: an image archive into each host's containerd over SSH, for
edge clusters with no registry (copied by SFTP, checked by its SHA-256 on the host, imported
with `ctr -n k8s.io images import`, then removed)."""

from __future__ import annotations

import tarfile
from pathlib import Path

from k8sdds.cluster.remote import HostError, Remote
from k8sdds.errors import UserError

DEFAULT_ADDRESS = "/run/containerd/containerd.sock"


def describe(archive: Path) -> tuple[list[str], str]:
    """The image names a docker-archive carries and its architecture; a clear error when the
    file is not one."""
    import json

    try:
        with tarfile.open(archive) as tf:
            manifest = json.loads(tf.extractfile("manifest.json").read())
            config = json.loads(tf.extractfile(manifest[0]["Config"]).read())
    except (OSError, tarfile.TarError, KeyError, IndexError, TypeError, AttributeError,
            ValueError) as exc:
        raise UserError(f"{archive}: not an image archive (a docker-archive, as `k8sdds image "
                        f"build` and `docker save` write): {exc}") from None
    tags = [tag for entry in manifest for tag in (entry.get("RepoTags") or [])]
    arch = str(config.get("architecture", "unknown"))
    return tags, {"armhf": "arm"}.get(arch, arch)  # the inventory's (and OCI's) names


def load(remote: Remote, archive: Path, digest: str, address: str = DEFAULT_ADDRESS
         ) -> list[str]:
    """Copy, check and import `archive` on the host; what was done, in a few words."""
    made = remote.run(["mktemp", "/tmp/k8sdds-image.XXXXXX"])
    target = made.out.strip() or "/tmp/k8sdds-image.XXXXXX"
    if made.code != 0:
        raise HostError(f"{remote.host.name}: mktemp failed: {made.err.strip()}")
    try:
        remote.put(archive, target)
        if not remote.dry_run:
            got = remote.run(["sha256sum", target]).out.split()[:1]
            if got != [digest]:
                raise HostError(f"{remote.host.name}: the copy of {archive.name} differs "
                                f"from the original (sha256 {got[0] if got else 'unread'})")
        imported = remote.run(["ctr", "--address", address, "-n", "k8s.io", "images",
                               "import", target], root=True, timeout=600)
        if imported.code != 0:
            raise HostError(f"{remote.host.name}: ctr images import failed: "
                            f"{(imported.err or imported.out).strip()[-300:]}")
    finally:
        remote.run(["rm", "-f", target])
    return [f"imported {archive.name} into containerd ({address})"]
