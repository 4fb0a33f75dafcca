"""One tag for several architectures: image archives of the same name, one per architecture,
combined into one OCI archive whose tag points at an OCI image index (a manifest per
platform). containerd imports from it the platform it is asked for (`ctr images import
--platform`), so one archive and one tag serve a hybrid cluster's amd64 and ARM hosts.

Each per-architecture archive (docker-archive) is turned into OCI form by skopeo; the index
and the layout's index.json are written here, as the OCI image spec lays them out."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import tarfile
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from k8sdds.errors import UserError
from k8sdds.images.build import run_tool

INDEX_TYPE = "application/vnd.oci.image.index.v1+json"
MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
# the variant a Raspberry Pi's containerd asks for (umoci writes none)
VARIANT = {"arm": "v7", "arm64": "v8"}


@dataclass(frozen=True)
class Platform:
    """An image's platform, as OCI and kubernetes.io/arch name it."""

    architecture: str
    os: str = "linux"

    @property
    def variant(self) -> str | None:
        return VARIANT.get(self.architecture)

    def spec(self) -> dict:
        """The descriptor's `platform` object."""
        out = {"architecture": self.architecture, "os": self.os}
        return out | ({"variant": self.variant} if self.variant else {})

    def name(self) -> str:
        """containerd's name for it (`ctr images import --platform`)."""
        return "/".join(p for p in (self.os, self.architecture, self.variant) if p)


def one_per_architecture(arches: Sequence[str], what: str = "") -> None:
    """Refuse two images of one architecture (`what` names where they came from). Pure."""
    twice = sorted({a for a in arches if arches.count(a) > 1})
    if twice:
        raise UserError(f"two images of architecture {', '.join(twice)}{what}: one per "
                        "architecture")


def index_document(manifests: Sequence[tuple[dict, Platform]]) -> dict:
    """The OCI image index for per-platform manifest descriptors; one per platform. Pure."""
    one_per_architecture([p.architecture for _, p in manifests])
    return {"schemaVersion": 2, "mediaType": INDEX_TYPE,
            "manifests": [{"mediaType": d.get("mediaType", MANIFEST_TYPE), "digest": d["digest"],
                           "size": d["size"], "platform": p.spec()} for d, p in manifests]}


def layout_index(index_blob: bytes, tag: str) -> dict:
    """The layout's index.json: one entry, the image index, named `tag` as containerd
    (io.containerd.image.name) and the OCI spec (org.opencontainers.image.ref.name) name it.
    Pure."""
    return {"schemaVersion": 2, "mediaType": INDEX_TYPE,
            "manifests": [{"mediaType": INDEX_TYPE, "digest": _digest(index_blob),
                           "size": len(index_blob),
                           "annotations": {"io.containerd.image.name": tag,
                                           "org.opencontainers.image.ref.name": _ref(tag)}}]}


def combine(archives: Sequence[Path], out: Path, tag: str | None = None) -> Path:
    """Write to `out` (atomically) one OCI archive carrying every archive's image under one
    tag (`tag`, or the name they share), an image index choosing among them by platform."""
    if len(archives) < 2:
        raise UserError("an image index combines two archives or more, one per architecture")
    if shutil.which("skopeo") is None:
        raise UserError("an image index needs skopeo (apt-get install skopeo)")
    names: set[str] = set()
    arches: list[str] = []
    for archive in archives:  # all checked before any work
        tags, its = describe(archive)
        if len(its) != 1:
            raise UserError(f"{archive}: already several architectures ({', '.join(its)})")
        arches += its
        names.update(tags)
    one_per_architecture(arches, " (" + ", ".join(map(str, archives)) + ")")
    if tag is None:
        if len(names) != 1:
            raise UserError("the archives' names differ (" + ", ".join(sorted(names))
                            + "): give the one tag with --tag")
        tag = names.pop()
    with tempfile.TemporaryDirectory(prefix="k8sdds-index-", dir=out.parent) as work:
        layout = Path(work) / "oci"
        manifests = []
        for n, archive in enumerate(archives):
            run_tool(["skopeo", "copy", "--quiet", f"docker-archive:{archive}",
                      f"oci:{layout}:image{n}"], "skopeo copy")
            manifests.append(_descriptor(layout, f"image{n}"))
        blob = _canonical(index_document(manifests))
        _put_blob(layout, blob)
        (layout / "index.json").write_bytes(_canonical(layout_index(blob, tag)))
        partial = out.with_name(out.name + ".part")
        with tarfile.open(partial, "w") as tf:
            for entry in ("oci-layout", "index.json", "blobs"):
                tf.add(layout / entry, arcname=entry)
        os.replace(partial, out)
    return out


def one_platform(archive: Path, arch: str, out: Path) -> Path:
    """Write to `out` (atomically) the OCI archive of `archive`'s image index cut to the
    platform of `arch` (the inventory's name): its manifest, configuration and layers under
    the same tag, in an index of one. What a host of that architecture imports, without
    copying the others' layers to it (a Pi on a 100 Mbit/s link, a third of the bytes)."""
    want = Platform(arch).architecture
    with tarfile.open(archive) as tf:
        top = json.loads(tf.extractfile("index.json").read())
        [entry] = top["manifests"]
        tag = (entry.get("annotations") or {})["io.containerd.image.name"]
        index = json.loads(tf.extractfile(_blob_path(entry["digest"])).read())
        mine = [m for m in index["manifests"] if m["platform"]["architecture"] == want]
        if len(mine) != 1:
            raise UserError(f"{archive}: no image for {arch} (it has "
                            + ", ".join(m["platform"]["architecture"]
                                        for m in index["manifests"]) + ")")
        manifest_blob = tf.extractfile(_blob_path(mine[0]["digest"])).read()
        manifest = json.loads(manifest_blob)
        blob = _canonical({**index, "manifests": mine})
        partial = out.with_name(out.name + ".part")
        with tarfile.open(partial, "w") as tw:
            def put(name: str, data: bytes) -> None:
                info = tarfile.TarInfo(name)
                info.size, info.mode = len(data), 0o644
                tw.addfile(info, io.BytesIO(data))

            put("oci-layout", tf.extractfile("oci-layout").read())
            put("index.json", _canonical(layout_index(blob, tag)))
            put(_blob_path(_digest(blob)), blob)
            put(_blob_path(mine[0]["digest"]), manifest_blob)
            for desc in (manifest["config"], *manifest["layers"]):
                member = tf.getmember(_blob_path(desc["digest"]))
                tw.addfile(member, tf.extractfile(member))
    os.replace(partial, out)
    return out


def describe(archive: Path) -> tuple[list[str], tuple[str, ...]]:
    """The image names an archive carries and its architectures (the inventory's names): a
    docker-archive (`k8sdds image build`, `docker save`) has one, an OCI archive with an
    image index one per platform; a clear error when the file is neither."""
    try:
        with tarfile.open(archive) as tf:
            names = tf.getnames()
            if "index.json" in names and "manifest.json" not in names:
                tags, arches = _oci(tf)
            else:
                manifest = json.loads(tf.extractfile("manifest.json").read())
                config = json.loads(tf.extractfile(manifest[0]["Config"]).read())
                tags = [tag for entry in manifest for tag in (entry.get("RepoTags") or [])]
                arches = (str(config.get("architecture", "unknown")),)
    except (OSError, tarfile.TarError, KeyError, IndexError, TypeError, AttributeError,
            ValueError) as exc:
        raise UserError(f"{archive}: not an image archive (a docker-archive, as `k8sdds image "
                        f"build` and `docker save` write, or an OCI archive): {exc}") from None
    return tags, tuple({"armhf": "arm"}.get(a, a) for a in arches)


def _oci(tf: tarfile.TarFile) -> tuple[list[str], tuple[str, ...]]:
    """An OCI archive's tags and the architectures its index offers."""
    top = json.loads(tf.extractfile("index.json").read())
    tags, arches = [], []
    for entry in top.get("manifests", []):
        name = (entry.get("annotations") or {}).get("io.containerd.image.name")
        if name:
            tags.append(name)
        blob = json.loads(tf.extractfile(_blob_path(entry["digest"])).read())
        if entry.get("mediaType") == INDEX_TYPE or "manifests" in blob:
            arches += [m["platform"]["architecture"] for m in blob["manifests"]]
        else:
            config = json.loads(tf.extractfile(_blob_path(blob["config"]["digest"])).read())
            arches.append(config.get("architecture", "unknown"))
    return tags, tuple(dict.fromkeys(arches))


# ---- the layout on disk -----------------------------------------------------------------

def _descriptor(layout: Path, ref: str) -> tuple[dict, Platform]:
    top = json.loads((layout / "index.json").read_text())
    [desc] = [m for m in top["manifests"]
              if (m.get("annotations") or {}).get("org.opencontainers.image.ref.name") == ref]
    manifest = json.loads((layout / _blob_path(desc["digest"])).read_text())
    config = json.loads((layout / _blob_path(manifest["config"]["digest"])).read_text())
    arch = config.get("architecture")
    if not arch:
        raise UserError(f"image {ref}: its configuration names no architecture")
    return ({"mediaType": desc.get("mediaType", MANIFEST_TYPE), "digest": desc["digest"],
             "size": desc["size"]}, Platform(arch, config.get("os", "linux")))


def _put_blob(layout: Path, blob: bytes) -> None:
    path = layout / _blob_path(_digest(blob))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(blob)


def _blob_path(digest: str) -> str:
    algorithm, _, hexa = digest.partition(":")
    return f"blobs/{algorithm}/{hexa}"


def _digest(blob: bytes) -> str:
    return "sha256:" + hashlib.sha256(blob).hexdigest()


def _canonical(doc: dict) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def _ref(tag: str) -> str:
    """The tag part of an image name (after the last ':' of its last path element)."""
    last = tag.rsplit("/", 1)[-1]
    return last.rsplit(":", 1)[1] if ":" in last else "latest"

