"""Images onto bare hosts with no registry: `k8sdds cluster load-image` (one archive into
each host's containerd over SSH: copied by SFTP, checked by its SHA-256 on the host, imported
with `ctr -n k8s.io images import`, then removed) and `k8sdds cluster images` (what kubeadm
and a CNI need, on every host, before init and join; `cluster check --cni` reports what is
missing)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from k8sdds.cluster.remote import HostError, Remote, remote_copy
from k8sdds.errors import UserError
from k8sdds.images.index import Platform, describe

DEFAULT_ADDRESS = "/run/containerd/containerd.sock"


# a Pi 3 unpacks an image's layers slowly: an emulated Cortex-A7 (two cores under TCG on a
# busy 2-core machine, 2026-12-03) took over 600 s to import the engines' image
IMPORT_TIMEOUT_S = 1800.0


def load(remote: Remote, archive: Path, digest: str, address: str = DEFAULT_ADDRESS,
         several: bool = False) -> list[str]:
    """Copy, check and import `archive` on the host; what was done, in a few words. An
    archive of `several` architectures (an image index) gives the host its own platform's
    image (the inventory's arch), whatever its containerd would take by default."""
    with remote_copy(remote, archive, "image", digest) as target:
        platform = (["--platform", Platform(remote.host.arch).name()] if several else [])
        imported = remote.run(["ctr", "--address", address, "-n", "k8s.io", "images",
                               "import", *platform, target], root=True,
                              timeout=IMPORT_TIMEOUT_S)
        if imported.code != 0:
            raise HostError(f"{remote.host.name}: ctr images import failed: "
                            f"{(imported.err or imported.out).strip()[-300:]}")
    return [f"imported {archive.name} into containerd ({address})"]


def engine_archive(arches: list[str], say: Callable[[str], None]) -> Path:
    """The engine image for the architectures `arches` (the inventory's names), built or
    cached; one multi-architecture archive (an image index) when there are several."""
    from k8sdds.images.build import engine_image, one_builder
    from k8sdds.images.foreign import DEBIAN
    from k8sdds.images.index import combine

    built = [engine_image(say=say, arch=DEBIAN[arch]) for arch in sorted(set(arches))]
    if len(built) == 1:
        return built[0]
    # named by its parts, which are named by their content: made once, then taken as it is
    combined = built[0].with_name("-".join(p.stem for p in built) + ".index.tar")
    with one_builder(combined):
        if not combined.exists():
            combine(built, combined)
    return combined


def by_architecture(archives: list[Path], say: Callable[[str], None],
                    wanted: set[str] | None = None, cut: Path | None = None
                    ) -> dict[str, tuple[Path, str, bool]]:
    """Each architecture -> the archive that carries it, its SHA-256, and whether it carries
    an image index; an architecture two archives carry is an error. With `cut` (a
    directory), a multi-architecture archive is cut there into one archive per architecture
    of `wanted` (index.one_platform): each host is sent its own platform's layers only."""
    from k8sdds.images.index import one_platform
    from k8sdds.results.files import sha256

    found: dict[str, tuple[Path, str, bool]] = {}
    for archive in archives:
        tags, arches = describe(archive)
        digest = sha256(archive)
        for arch in arches:
            if arch in found:
                raise UserError(f"--archive: {archive} and {found[arch][0]} are both {arch}")
            found[arch] = (Path(archive), digest, len(arches) > 1)
            if cut is not None and len(arches) > 1 and arch in (wanted or set()):
                own = one_platform(Path(archive), arch, cut / f"{arch}.tar")
                found[arch] = (own, sha256(own), True)
        say(f"{archive}: {', '.join(tags) or 'no tag'} ({', '.join(arches)})")
    return found


# ---- what kubeadm and a CNI need on each host (`cluster images`, `cluster check --cni`) ----
WORKER_IMAGES = ("registry.k8s.io/kube-proxy", "registry.k8s.io/pause",
                 "registry.k8s.io/coredns/coredns")  # what a worker runs of kubeadm's


@dataclass(frozen=True)
class HostImages:
    """One host's view: the images it needs (kubeadm's for its role, the CNI's) and has."""

    version: str
    needed: tuple[str, ...]
    present: frozenset[str]

    @property
    def missing(self) -> tuple[str, ...]:
        from k8sdds.images.kubernetes import normalize

        return tuple(r for r in self.needed if normalize(r) not in self.present)


def needed(kubeadm_list: list[str], control_plane: bool, cni_images: list[str]) -> list[str]:
    """The images a host needs: all of kubeadm's on the control plane, kube-proxy, pause and
    CoreDNS on a worker; the CNI's on every host. Pure."""
    from k8sdds.images.kubernetes import split

    mine = [r for r in kubeadm_list if control_plane or split(r)[0] in WORKER_IMAGES]
    return list(dict.fromkeys([*mine, *cni_images]))


def survey(remote: Remote, control_plane: bool, cni_images: list[str],
           address: str = DEFAULT_ADDRESS) -> HostImages:
    """Ask the host's kubeadm what it needs and its containerd what it has."""
    from k8sdds.cluster.kubeadm import host_version

    version = host_version(remote)
    listed = remote.run(["kubeadm", "config", "images", "list", "--kubernetes-version",
                         version])
    if listed.code != 0 and not remote.dry_run:
        raise HostError(f"kubeadm config images list: {(listed.err or listed.out).strip()[-200:]}")
    have = remote.run(["ctr", "--address", address, "-n", "k8s.io", "images", "ls", "-q"],
                      root=True)
    if have.code != 0 and not remote.dry_run:
        raise HostError(f"containerd ({address}) did not answer: "
                        f"{(have.err or have.out).strip()[-200:]}")
    refs = [line.strip() for line in listed.out.splitlines() if line.strip()]
    return HostImages(version, tuple(needed(refs, control_plane, cni_images)),
                      frozenset(have.out.split()))


def from_directory(folder: Path) -> dict[tuple[str, str], Path]:
    """Every (image name, architecture) the archives in `folder` carry -> its archive: one
    folder may hold the same names for amd64 and arm64."""
    from k8sdds.images.kubernetes import normalize

    if not folder.is_dir():
        raise UserError(f"{folder}: not a directory of image archives")
    found: dict[tuple[str, str], Path] = {}
    for archive in sorted(folder.iterdir()):
        if archive.is_file() and archive.name.endswith(".tar"):
            tags, arches = describe(archive)
            for tag in tags:
                for arch in arches:
                    found.setdefault((normalize(tag), arch), archive)
    return found


def load_all(loaded, known: str, dry_run: bool, folder: Path, cni_images: list[str],
             found: dict[tuple[str, str], Path] | None, address: str,
             say: Callable[[str], None]) -> dict[str, list[str] | HostError]:
    """`cluster images`: every host surveyed at once; what any lacks, for each host's own
    architecture (the inventory's `arch`), built here (`found` None) or taken from the
    archives `found`, all before any host is changed; then each host's missing images
    loaded."""
    from k8sdds.cluster.remote import on_hosts
    from k8sdds.images.kubernetes import build, normalize
    from k8sdds.results.files import sha256

    control = loaded.control_plane().name
    arch_of = {h.name: h.arch for h in loaded.hosts}
    surveys = on_hosts(loaded.hosts, known, dry_run, folder, lambda r: survey(
        r, r.host.name == control, cni_images, address))
    wanted = list(dict.fromkeys((ref, arch_of[name]) for name, s in surveys.items()
                                if not isinstance(s, HostError) for ref in s.missing))
    if found is not None:
        absent = [f"{ref} ({arch})" for ref, arch in wanted
                  if (normalize(ref), arch) not in found]
        if absent:
            raise UserError(f"the archives given have no {', '.join(absent)} (the hosts need "
                            "them; no host was changed)")
    # (ref, arch) -> (archive, its sha256, whether it carries several architectures)
    archives: dict[tuple[str, str], tuple[Path, str, bool]] = {}
    for ref, arch in wanted:
        archive = build(ref, say, arch) if found is None else found[(normalize(ref), arch)]
        got = describe(archive)[1]
        if arch not in got:  # a builder's or a folder's mistake, caught before any host
            raise UserError(f"{archive}: {ref} is {' and '.join(got)}, not {arch}; no host was "
                            "changed")
        archives[(ref, arch)] = (archive, sha256(archive), len(got) > 1)

    def one(remote: Remote) -> list[str]:
        host = surveys[remote.host.name]
        if isinstance(host, HostError):
            raise host
        done: list[Path] = []
        for ref in host.missing:
            archive, digest, several = archives[(ref, remote.host.arch)]
            if archive not in done:
                load(remote, archive, digest, address, several=several)
                done.append(archive)
        kept = len(host.needed) - len(host.missing)
        return [f"kubeadm {host.version} ({remote.host.arch}): {len(host.missing)} loaded"
                + (f" ({', '.join(host.missing)})" if host.missing else "")
                + f", {kept} already there"]

    return on_hosts(loaded.hosts, known, dry_run, folder, one)
