"""Images of a kubeadm cluster built here, without a registry: the control plane, kube-proxy,
etcd, CoreDNS, pause and flannel, each from the binary built from its Go module
(.ci/k8s-test-binaries keeps them in /var/cache/k8sdds/bin), named as kubeadm and the pinned
manifests name them, so that both run as published.

A builder is chosen by the image's repository (a registry, not a chain of ifs); the binary's
version must be the tag's, or the image is not built (a cluster would run something other
than what it names). The one exception is said where it is: flannel's CNI plugin comes from
containernetworking/plugins, its last home on the Go module proxy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from k8sdds.errors import UserError
from k8sdds.testbed.kube.cluster import binaries  # the one cache of Go-built binaries


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


def version(name: str) -> str | None:
    """The version a cached binary was built at, or None when it is not built."""
    from k8sdds.testbed.kube import flannel

    return flannel.version(binaries(), name) if (binaries() / name).exists() else None


@dataclass(frozen=True)
class Builder:
    binary: str  # in the binaries cache
    tag_of: Callable[[str], str]  # the binary's version -> the tag it may carry (None: any)
    make: Callable[[str, Path], Path]  # (image name, binary) -> archive
    note: str = ""


def _busybox(dest: str, entrypoint: bool = False) -> Callable[[str, Path], Path]:
    def make(ref: str, binary: Path) -> Path:
        from k8sdds.images.build import busybox_image

        config = [f"--config.entrypoint={dest}"] if entrypoint else []
        return busybox_image(ref, {dest: binary}, config, split(ref)[0].rsplit("/", 1)[-1],
                             path="/usr/local/bin:/bin")
    return make


KUBE_PROXY_APT = ("apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y "
                  "--no-install-recommends iptables conntrack ipset kmod "
                  "&& rm -rf /var/lib/apt/lists/*")


def _kube_proxy(ref: str, binary: Path) -> Path:
    """Debian with iptables, conntrack and ipset, as upstream's distroless-iptables."""
    from k8sdds.images.build import BuildOptions, assemble
    from k8sdds.images.dockerfile import Recipe

    return assemble(Recipe("bookworm", (KUBE_PROXY_APT,)), f"kube-proxy {KUBE_PROXY_APT}",
                    BuildOptions(Path("-"), None, tag=ref), files={
                        "/usr/local/bin/kube-proxy": binary}, name="kube-proxy")


def _flannel(ref: str, binary: Path) -> Path:
    from k8sdds.testbed.kube import flannel

    return flannel.flannel_image(ref, binaries())


def _pause(ref: str, binary: Path) -> Path:
    from k8sdds.images.build import pause

    return pause(ref)


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
    "registry.k8s.io/pause": Builder("kubelet", lambda v: "", _pause),
    "ghcr.io/flannel-io/flannel": Builder("flanneld", lambda v: v, _flannel),
    "ghcr.io/flannel-io/flannel-cni-plugin": Builder(
        "flannel-cni", lambda v: "", _busybox("/flannel"),
        note="flannel's CNI plugin from containernetworking/plugins (the version the Go "
             "module proxy has), under the manifest's name"),
}


def buildable(ref: str) -> bool:
    return split(ref)[0] in BUILDERS


def build(ref: str, say: Callable[[str], None] = lambda _: None) -> Path:
    """The archive of `ref`, built here from its binary (cached); a clear error when it
    cannot be."""
    repo, tag = split(ref)
    builder = BUILDERS.get(repo)
    if builder is None:
        raise UserError(f"{ref} cannot be built here (k8sdds builds {', '.join(BUILDERS)}); "
                        "give a directory of image archives with --from")
    have = version(builder.binary)
    if have is None:
        raise UserError(f"{ref}: {builder.binary} is not built in {binaries()} (run "
                        ".ci/k8s-test-binaries, or give --from)")
    wanted = builder.tag_of(have)
    if wanted and wanted != tag:
        raise UserError(f"{ref}: the {builder.binary} here is {have}, which makes the tag "
                        f"{wanted}, not {tag}; build the hosts' version or give --from")
    say(f"building {ref}" + (f" ({builder.note})" if builder.note else ""))
    return builder.make(ref, binaries() / builder.binary)
