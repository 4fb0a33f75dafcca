"""One tag for a hybrid cluster: per-architecture image archives combined into one OCI archive
with an image index (k8sdds/images/index.py), and a real containerd taking from it the
platform it is asked for."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from k8sdds.errors import UserError
from k8sdds.images.index import Platform, index_document, layout_index

from .containerd_support import collect_garbage

ROOT = Path(__file__).parent.parent
TAG = "localhost/k8sdds/index-test:1"


def test_a_platform_carries_the_variant_a_pi_s_containerd_asks_for():
    assert Platform("arm").name() == "linux/arm/v7"
    assert Platform("arm64").spec() == {"architecture": "arm64", "os": "linux", "variant": "v8"}
    assert Platform("amd64").name() == "linux/amd64"


def test_the_index_names_one_manifest_per_platform_and_the_tag_twice():
    desc = {"digest": "sha256:" + "a" * 64, "size": 9}
    doc = index_document([(desc, Platform("amd64")),
                          ({**desc, "digest": "sha256:" + "b" * 64}, Platform("arm"))])
    assert doc["mediaType"] == "application/vnd.oci.image.index.v1+json"
    assert [m["platform"]["architecture"] for m in doc["manifests"]] == ["amd64", "arm"]
    with pytest.raises(UserError, match="two images of architecture amd64"):
        index_document([(desc, Platform("amd64")), (desc, Platform("amd64"))])
    top = layout_index(b"{}", "ghcr.io/k8sdds/engines:0.1")
    [entry] = top["manifests"]
    assert entry["annotations"] == {"io.containerd.image.name": "ghcr.io/k8sdds/engines:0.1",
                                    "org.opencontainers.image.ref.name": "0.1"}
    assert entry["size"] == 2


def _reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (umoci, containerd)"
    lacking = [t for t in ("umoci", "skopeo", "containerd", "ctr") if shutil.which(t) is None]
    return f"needs {', '.join(lacking)} (make test installs them)" if lacking else None


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "k8sdds", *args], capture_output=True,
                          text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "250", "PYTHONPATH": str(ROOT)})


def _containerd(where: Path) -> tuple[subprocess.Popen, str]:
    """A real containerd with its own root, state and socket under `where`."""
    where.mkdir()
    sock = where / "c.sock"
    (where / "config.toml").write_text(
        f'version = 2\nroot = "{where / "root"}"\nstate = "{where / "state"}"\n'
        'disabled_plugins = ["io.containerd.grpc.v1.cri"]\n'
        f'[grpc]\n  address = "{sock}"\n[ttrpc]\n  address = "{where / "t.sock"}"\n'
        f'[plugins."io.containerd.internal.v1.opt"]\n  path = "{where / "opt"}"\n')
    proc = subprocess.Popen(["containerd", "--config", str(where / "config.toml")],
                            stdout=subprocess.DEVNULL, stderr=open(where / "log", "wb"))
    deadline = time.monotonic() + 20
    while not sock.exists():
        assert proc.poll() is None and time.monotonic() < deadline, (where / "log").read_text()
        time.sleep(0.05)  # a socket appearing: nothing else to wait on
    return proc, str(sock)


def _ctr(sock: str, namespace: str, *args: str) -> str:
    return subprocess.run(["ctr", "--address", sock, "-n", namespace, *args],
                          capture_output=True, text=True, check=True).stdout


@pytest.mark.image
@pytest.mark.skipif(_reason() is not None, reason=_reason() or "")
def test_one_archive_gives_each_platform_its_own_image(tmp_path):
    from k8sdds.images.build import busybox_image

    cache = tmp_path / "cache"
    # the same name for two architectures: this machine's busybox and Debian's arm64 one
    amd = busybox_image(TAG, {}, [], "index-test", cache=cache)
    arm = busybox_image(TAG, {}, [], "index-test", cache=cache, arch="arm64")
    out = tmp_path / "multi.tar"
    done = _cli("image", "index", str(amd), str(arm), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert f"({TAG}: amd64, arm64)" in done.stdout
    assert not list(tmp_path.glob("*.part")) and not list(tmp_path.glob("k8sdds-index-*"))

    with tarfile.open(out) as tf:
        top = json.load(tf.extractfile("index.json"))
        [entry] = top["manifests"]
        index = json.load(tf.extractfile("blobs/sha256/" + entry["digest"].split(":")[1]))
    by_arch = {m["platform"]["architecture"]: m["digest"] for m in index["manifests"]}
    assert set(by_arch) == {"amd64", "arm64"}

    # cut to one platform (what `cluster load-image` sends a host): the same tag, only the
    # arm64 image's blobs
    from k8sdds.images.index import describe, one_platform

    cut = one_platform(out, "arm64", tmp_path / "arm64.tar")
    assert describe(cut) == ([TAG], ("arm64",))
    with tarfile.open(cut) as tf, tarfile.open(out) as whole:
        blobs = {n for n in tf.getnames() if n.startswith("blobs/")}
        amd_manifest = json.load(whole.extractfile("blobs/sha256/" + by_arch["amd64"][7:]))
    assert "blobs/sha256/" + by_arch["arm64"][7:] in blobs
    assert not {"blobs/sha256/" + d["digest"][7:] for d in amd_manifest["layers"]} & blobs
    assert cut.stat().st_size < out.stat().st_size
    with pytest.raises(UserError, match="no image for arm "):
        one_platform(out, "arm", tmp_path / "arm.tar")

    proc, sock = _containerd(tmp_path / "containerd")
    try:
        for namespace, platform in (("amd", "linux/amd64"), ("pi", "linux/arm64/v8")):
            _ctr(sock, namespace, "images", "import", "--platform", platform, str(out))
            assert TAG in _ctr(sock, namespace, "images", "ls", "-q").split()
        _ctr(sock, "cut", "images", "import", "--platform", "linux/arm64/v8", str(cut))
        assert TAG in _ctr(sock, "cut", "images", "ls", "-q").split()
        # each namespace keeps its own platform's manifest, and not the other's once
        # containerd has collected what no image refers to
        for namespace, own, other in (("amd", "amd64", "arm64"), ("pi", "arm64", "amd64")):
            collect_garbage(["ctr", "--address", sock, "-n", namespace], TAG)
            content = _ctr(sock, namespace, "content", "ls", "-q").split()
            assert by_arch[own] in content and by_arch[other] not in content, namespace
    finally:
        proc.terminate()
        proc.wait(timeout=10)

    # two archives of one architecture, or of different names without --tag: refused
    twice = _cli("image", "index", str(amd), str(amd), "--out", str(tmp_path / "x.tar"))
    assert twice.returncode == 2 and "two images of architecture amd64" in twice.stderr
    other = busybox_image("localhost/k8sdds/other:1", {}, [], "index-test", cache=cache,
                          arch="arm64")
    named = _cli("image", "index", str(amd), str(other), "--out", str(tmp_path / "x.tar"))
    assert named.returncode == 2 and "give the one tag with --tag" in named.stderr
    assert "Traceback" not in twice.stderr + named.stderr
    assert not (tmp_path / "x.tar").exists()
