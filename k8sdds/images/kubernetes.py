"""Images of a kubeadm cluster built here, without a registry: the control plane, kube-proxy,
etcd, CoreDNS, pause and the CNIs' (as their records in k8sdds/cni say), each from the binary
built from its Go module
(.ci/k8s-test-binaries keeps them in /var/cache/k8sdds/bin), named as kubeadm and the pinned
manifests name them, so that both run as published.

A builder is chosen by the image's repository (a registry, not a chain of ifs); the binary's
version must be the tag's, or the image is not built (a cluster would run something other
than what it names). An exception is said where it is (a record's `note`).

Each image is built for one architecture (the inventory's names: amd64, arm64, arm): this
machine's from the binaries cache itself, another's from its `linux-<arch>` directory there
(`.ci/k8s-cross-binaries <arch>` cross-compiles them) and from Debian's packages of that
architecture, unpacked, never run (k8sdds/images/foreign.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from k8sdds import cni
from k8sdds.caches import k8s_bin as binaries  # the one cache of Go-built binaries
from k8sdds.cni.base import Image
from k8sdds.errors import UserError
from k8sdds.images import foreign
from k8sdds.model import HOST_ARCH


def split(ref: str) -> tuple[str, str]:
    """(repository, tag) of an image reference."""
    repo, _, tag = ref.rpartition(":")
    if not repo or "/" in tag:
        return ref, "latest"
    return repo, tag


def normalize(ref: str) -> str:
    """The full name containerd stores an image under (docker.io/library/... filled in)."""
    repo, tag = split(ref)
    first = repo.split("/")[0]
    if "/" not in repo:
        repo = f"docker.io/library/{repo}"
    elif "." not in first and ":" not in first and first != "localhost":
        repo = f"docker.io/{repo}"
    return f"{repo}:{tag}"


def built_version(cache: Path, name: str) -> str:
    """The version a cached binary was built at (its link's target: <name>-<version>)."""
    target = os.readlink(cache / name) if (cache / name).is_symlink() else name
    return target.removeprefix(f"{name}-") if target != name else "unknown"


# this machine's architecture as Go and OCI name it (arm for Debian's armhf), as the
# inventory does, and the Kubernetes binaries' folders are named
HOST_GOARCH = foreign.OCI.get(HOST_ARCH, HOST_ARCH)


def arch_binaries(arch: str = HOST_GOARCH) -> Path:
    """Where the binaries of architecture `arch` (amd64, arm64, arm) are cached."""
    return binaries() if arch == HOST_GOARCH else binaries() / f"linux-{arch}"


def version(name: str, arch: str = HOST_GOARCH) -> str | None:
    """The version a cached binary was built at, or None when it is not built."""
    cache = arch_binaries(arch)
    return built_version(cache, name) if (cache / name).exists() else None


def apt_step(packages: tuple[str, ...]) -> str:
    return ("apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "
            f"--no-install-recommends {' '.join(packages)} && rm -rf /var/lib/apt/lists/*")


def cni_image(image: Image, ref: str, cache: Path,
              say: Callable[[str], None] = lambda _: None, arch: str = HOST_GOARCH) -> Path:
    """A CNI's image as its record says (Debian with its packages, else busybox), its files
    taken from the binaries in `cache`, named `ref`, for architecture `arch`."""
    from k8sdds.images.build import BuildOptions, assemble, busybox_image
    from k8sdds.images.dockerfile import Recipe

    name = split(image.repository)[0].rsplit("/", 1)[-1]
    files: Mapping[str, Path] = {dest: cache / src for dest, src in image.files.items()}
    if image.apt:
        steps = (apt_step(image.apt), *image.run)
        return assemble(Recipe("bookworm", steps), f"{name} {' && '.join(steps)}",
                        BuildOptions(Path("-"), None, tag=ref, arch=foreign.DEBIAN[arch]), say,
                        files=files, entrypoint=list(image.entrypoint), name=name)
    config = [f"--config.entrypoint={e}" for e in image.entrypoint]
    return busybox_image(ref, files, config, name, path="/usr/local/bin:/bin",
                         arch=foreign.DEBIAN[arch])


@dataclass(frozen=True)
class Builder:
    binary: str | None  # in the binaries cache (None: it needs none)
    tag_of: Callable[[str], str]  # the binary's version -> the tag it may carry (None: any)
    make: Callable[[str, Path | None, str], Path]  # (image name, binary, arch) -> archive
    note: str = ""


def _busybox(dest: str, entrypoint: bool = False) -> Callable[[str, Path, str], Path]:
    def make(ref: str, binary: Path, arch: str) -> Path:
        from k8sdds.images.build import busybox_image

        config = [f"--config.entrypoint={dest}"] if entrypoint else []
        return busybox_image(ref, {dest: binary}, config, split(ref)[0].rsplit("/", 1)[-1],
                             path="/usr/local/bin:/bin", arch=foreign.DEBIAN[arch])
    return make


KUBE_PROXY_APT = apt_step(("iptables", "conntrack", "ipset", "kmod"))


def _kube_proxy(ref: str, binary: Path, arch: str) -> Path:
    """Debian with iptables, conntrack and ipset, as upstream's distroless-iptables."""
    from k8sdds.images.build import BuildOptions, assemble
    from k8sdds.images.dockerfile import Recipe

    return assemble(Recipe("bookworm", (KUBE_PROXY_APT,)), f"kube-proxy {KUBE_PROXY_APT}",
                    BuildOptions(Path("-"), None, tag=ref, arch=foreign.DEBIAN[arch]),
                    files={"/usr/local/bin/kube-proxy": binary}, name="kube-proxy")


def _pause(ref: str, binary: Path | None, arch: str) -> Path:
    from k8sdds.images.build import pause

    return pause(ref, arch=foreign.DEBIAN[arch])


def _k8s(v: str) -> str:
    return f"v{v}"


BUILDERS: dict[str, Builder] = {
    **{f"registry.k8s.io/{c}": Builder(c, _k8s, _busybox(f"/usr/local/bin/{c}"))
       for c in ("kube-apiserver", "kube-controller-manager", "kube-scheduler")},
    "registry.k8s.io/kube-proxy": Builder("kube-proxy", _k8s, _kube_proxy),
    "registry.k8s.io/etcd": Builder("etcd", lambda v: f"{v.lstrip('v')}-0",
                                    _busybox("/usr/local/bin/etcd")),
    "registry.k8s.io/coredns/coredns": Builder("coredns", lambda v: v,
                                               _busybox("/coredns", entrypoint=True)),
    "registry.k8s.io/pause": Builder(None, lambda v: "", _pause),  # Debian's busybox
    **{image.repository: Builder(image.binary, image.tag_of,
                                 lambda ref, binary, arch, image=image: cni_image(
                                     image, ref, arch_binaries(arch), arch=arch),
                                 note=image.note)
       for record in cni.CNIS.values() for image in record.images},
}


def buildable(ref: str) -> bool:
    return split(ref)[0] in BUILDERS


def build(ref: str, say: Callable[[str], None] = lambda _: None,
          arch: str = HOST_GOARCH) -> Path:
    """The archive of `ref` for architecture `arch` (amd64, arm64, arm), built here from its
    binary (cached); a clear error when it cannot be."""
    repo, tag = split(ref)
    builder = BUILDERS.get(repo)
    if builder is None:
        raise UserError(f"{ref} cannot be built here (k8sdds builds {', '.join(BUILDERS)}); "
                        "give a directory of image archives with --from")
    if arch not in foreign.DEBIAN:
        raise UserError(f"{ref}: no image is built for the architecture {arch!r} (k8sdds "
                        f"builds {', '.join(foreign.DEBIAN)})")
    if builder.binary is None:
        say(f"building {ref} ({arch})")
        return builder.make(ref, None, arch)
    have = version(builder.binary, arch)
    if have is None:
        script = (".ci/k8s-test-binaries" if arch == HOST_GOARCH
                  else f".ci/k8s-cross-binaries {arch}")
        raise UserError(f"{ref}: {builder.binary} is not built for {arch} in "
                        f"{arch_binaries(arch)} (run {script}, or give --from)")
    wanted = builder.tag_of(have)
    if wanted and wanted != tag:
        raise UserError(f"{ref}: the {builder.binary} here is {have}, which makes the tag "
                        f"{wanted}, not {tag}; build the hosts' version or give --from")
    say(f"building {ref} ({arch})" + (f": {builder.note}" if builder.note else ""))
    return builder.make(ref, arch_binaries(arch) / builder.binary, arch)
