"""A kubeadm cluster's images for a Raspberry Pi (arm64), built here as `k8sdds cluster images
--build` builds them for a host whose inventory says `arch: arm64`: Go binaries cross-compiled
by .ci/k8s-cross-binaries, Debian's arm64 packages unpacked (never run), the links their
maintainer scripts would have made (update-alternatives) made here. Proof that they work:
their binaries run under Debian's qemu-user-static, from the image's own files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from k8sdds.errors import UserError
from k8sdds.images import foreign

from .builds import needs
from .emulated_support import host_mounts

QEMU = "qemu-aarch64-static"  # run directly: no binfmt handler is registered for it
EM_AARCH64 = 0xB7
COREDNS = "registry.k8s.io/coredns/coredns:v1.12.1"
FLANNEL = "ghcr.io/flannel-io/flannel:v0.28.9"
PAUSE = "registry.k8s.io/pause:3.10.1"

# iptables' own postinst (Debian 1.8.9-2), as update-alternatives reads it
IPTABLES_POSTINST = r"""#!/bin/sh
set -e
if [ "$1" = "configure" ]; then
    update-alternatives \
      --install /usr/sbin/iptables iptables /usr/sbin/iptables-legacy 10 \
      --slave /usr/sbin/iptables-restore iptables-restore /usr/sbin/iptables-legacy-restore \
      --slave /usr/sbin/iptables-save iptables-save /usr/sbin/iptables-legacy-save
        update-alternatives \
          --install /usr/sbin/iptables iptables /usr/sbin/iptables-nft 20 \
          --slave /usr/sbin/iptables-restore iptables-restore /usr/sbin/iptables-nft-restore \
          --slave /usr/sbin/iptables-save iptables-save /usr/sbin/iptables-nft-save
        update-alternatives --install "$DPKG_ROOT/usr/bin/x" x "$x" 30
fi
"""


def test_alternatives_are_read_from_a_postinst_and_the_highest_priority_chosen():
    found = foreign.alternatives(IPTABLES_POSTINST)
    assert {a.link for a in found} == {"/usr/sbin/iptables", "/usr/sbin/iptables-restore",
                                       "/usr/sbin/iptables-save"}  # the $-named one left out
    assert foreign.choose(found) == {
        "/usr/sbin/iptables": "/usr/sbin/iptables-nft",
        "/usr/sbin/iptables-restore": "/usr/sbin/iptables-nft-restore",
        "/usr/sbin/iptables-save": "/usr/sbin/iptables-nft-save"}


def test_alternatives_link_only_what_the_image_has(tmp_path):
    (tmp_path / "usr/sbin").mkdir(parents=True)
    (tmp_path / "usr/sbin/iptables-nft").write_text("")
    made = foreign.link_alternatives(tmp_path, foreign.alternatives(IPTABLES_POSTINST))
    assert made == ["/usr/sbin/iptables"]  # its -save and -restore targets are absent
    assert os.readlink(tmp_path / "usr/sbin/iptables") == "/usr/sbin/iptables-nft"


def test_an_architecture_with_no_binaries_names_the_script_that_builds_them(tmp_path,
                                                                           monkeypatch):
    from k8sdds.images.kubernetes import build

    monkeypatch.setenv("K8SDDS_K8S_BIN", str(tmp_path))
    with pytest.raises(UserError, match=r"coredns is not built for arm in "
                       rf"{tmp_path}/linux-arm \(run \.ci/k8s-cross-binaries arm, or give "
                       r"--from\)"):
        build(COREDNS, arch="arm")
    with pytest.raises(UserError, match="no image is built for the architecture 'riscv64'"):
        build(COREDNS, arch="riscv64")


def _reason() -> str | None:
    from k8sdds.images.kubernetes import arch_binaries

    if os.geteuid() != 0:
        return "needs root (debootstrap)"
    lacking = [t for t in ("debootstrap", "umoci", "skopeo", QEMU) if shutil.which(t) is None]
    if lacking:
        return f"needs {', '.join(lacking)} (make test installs them)"
    cache = arch_binaries("arm64")
    absent = [b for b in ("coredns", "flanneld", "flannel-install-conf")
              if not (cache / b).exists()]
    return (f"no arm64 {', '.join(absent)} in {cache} (.ci/k8s-cross-binaries arm64 coredns "
            "flannel; make test runs it)") if absent else None


def _unpack(archive: Path, rootfs: Path) -> dict:
    with tarfile.open(archive) as tf:
        [entry] = json.load(tf.extractfile("manifest.json"))
        config = json.load(tf.extractfile(entry["Config"]))
        rootfs.mkdir()
        for layer in entry["Layers"]:
            with tarfile.open(fileobj=tf.extractfile(layer)) as lt:
                lt.extractall(rootfs, filter="fully_trusted")
    return {**config, "tags": entry["RepoTags"]}


def _arm(binary: Path) -> bool:
    head = binary.read_bytes()[:20]
    return head[:4] == b"\x7fELF" and head[18] == EM_AARCH64


def _qemu(rootfs: Path, path: str, *args: str) -> str:
    """Run the image's `path` (an arm64 binary) with its own libraries, under qemu-user."""
    done = subprocess.run([QEMU, "-L", str(rootfs), str(rootfs / path.lstrip("/")), *args],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """The three kinds of image `cluster images --build` makes, for arm64: busybox with a Go
    binary (CoreDNS, as the control plane's), Debian with packages and Go binaries (flannel,
    as kube-proxy's and every CNI's), and pause (busybox alone)."""
    from k8sdds.images.kubernetes import build

    before = host_mounts()
    said: list[str] = []
    out = {}
    for ref in (COREDNS, FLANNEL, PAUSE):
        rootfs = tmp_path_factory.mktemp("arm") / "rootfs"
        out[ref] = (rootfs, _unpack(build(ref, said.append, arch="arm64"), rootfs))
    assert host_mounts() == before  # nothing mounted, nothing left
    return out, said


@pytest.mark.image
@needs("k8s-arm64", why=_reason)
def test_coredns_for_arm64_is_an_arm_binary_that_runs(built):
    images, said = built
    rootfs, config = images[COREDNS]
    assert config["architecture"] == "arm64" and config["tags"] == [COREDNS]
    assert config["config"]["Entrypoint"] == ["/coredns"]
    assert _arm(rootfs / "coredns") and _arm(rootfs / "bin/busybox")
    assert "CoreDNS-1.12.1" in _qemu(rootfs, "/coredns", "-version")
    assert f"building {COREDNS} (arm64)" in said


@pytest.mark.image
@needs("k8s-arm64", why=_reason)
def test_flannel_for_arm64_has_debian_s_arm_iptables_as_its_postinst_would_link_it(built):
    images, _ = built
    rootfs, config = images[FLANNEL]
    assert config["architecture"] == "arm64"
    assert _arm(rootfs / "opt/bin/flanneld") and _arm(rootfs / "usr/sbin/xtables-nft-multi")
    assert "v0.28.9" in _qemu(rootfs, "/opt/bin/flanneld", "--version")
    # update-alternatives' choice, made without running iptables' postinst
    assert os.readlink(rootfs / "usr/sbin/iptables") == "/usr/sbin/iptables-nft"
    assert os.readlink(rootfs / "usr/sbin/iptables-nft") == "xtables-nft-multi"
    # qemu-user has no nf_tables netlink: the legacy tool shows the ARM xtables libraries load
    assert "iptables v1.8.9 (legacy)" in _qemu(rootfs, "/usr/sbin/iptables-legacy",
                                               "--version")
    assert "iproute2" in _qemu(rootfs, "/usr/bin/ip", "-V")


@pytest.mark.image
@needs("k8s-arm64", why=_reason)
def test_pause_for_arm64_is_debian_s_arm_busybox(built):
    images, _ = built
    rootfs, config = images[PAUSE]
    assert config["architecture"] == "arm64" and config["config"]["User"] == "65535:65535"
    assert config["config"]["Entrypoint"] == ["/bin/busybox"]
    assert _arm(rootfs / "bin/busybox")
    assert _qemu(rootfs, "/bin/busybox", "echo", "paused").strip() == "paused"
