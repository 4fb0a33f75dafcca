"""`k8sdds cluster` commands that put what a node needs onto the hosts over SSH, for hosts
with no registry and no repository: kubeadm's and the CNI's images (`images`), the engine
image (`load-image`), the engines a bare-host run starts (`engines`)."""

from __future__ import annotations

from pathlib import Path

import typer

from k8sdds.cli.common import choice, err_console, out_console, url
from k8sdds.cli.hosts import (
    CNI,
    CONTAINERD,
    DRY_RUN,
    HOST_LOGS,
    INVENTORY,
    KNOWN_HOSTS,
    dry_run_listing,
    hosts,
    logs_of,
    per_host,
    report,
)


def cluster_load_image(
    inventory: Path = INVENTORY,
    archives: list[Path] = typer.Option(None, "--archive", help="An image archive "
                                        "(docker-archive); give one per architecture of a "
                                        "hybrid cluster, or one multi-architecture archive "
                                        "(`k8sdds image build --arch amd64,arm64`) [the "
                                        "engine image for each "
                                        "architecture the inventory names, built by `k8sdds "
                                        "image build --arch`, cached]."),
    address: str = CONTAINERD,
    known_hosts: Path | None = KNOWN_HOSTS, dry_run: bool = DRY_RUN,
    log_dir: Path = HOST_LOGS,
) -> None:
    """Put an image into every host's containerd over SSH (`ctr -n k8s.io images import`),
    for clusters with no registry: copied by SFTP, checked by SHA-256, imported, removed.
    Pods then find it with imagePullPolicy IfNotPresent. Each host gets the archive of its
    own architecture (the inventory's `arch`; a multi-architecture archive is cut per
    platform first, so a host is sent its own layers only); a host no archive fits is
    refused by name."""
    from k8sdds.cluster import images
    from k8sdds.cluster.remote import HostError

    loaded, known = hosts(inventory, known_hosts)
    if not archives:
        archives = [images.engine_archive([h.arch for h in loaded.hosts], lambda line:
                                          err_console.print(line, markup=False,
                                                            highlight=False))]
    for archive in archives:
        if not Path(archive).is_file():
            raise typer.BadParameter(f"{archive}: no such file", param_hint="--archive")
    import tempfile

    with tempfile.TemporaryDirectory(prefix="k8sdds-load-image-") as cut:
        by_arch = images.by_architecture(archives, lambda line: out_console.print(line),
                                         {h.arch for h in loaded.hosts},
                                         None if dry_run else Path(cut))

        def one(remote):
            if remote.host.arch not in by_arch:
                raise HostError(f"{remote.host.name} is {remote.host.arch}; the image is "
                                f"{' and '.join(by_arch)} (give its --archive too)")
            archive, digest, several = by_arch[remote.host.arch]
            return images.load(remote, archive, digest, address, several=several)

        results, folder = per_host(loaded, known, dry_run, log_dir, one)
    if dry_run:
        dry_run_listing(folder, loaded.hosts, results)
        return
    report(results, "load-image", folder)


def cluster_images(
    inventory: Path = INVENTORY, cni: str = CNI,
    source: Path | None = typer.Option(None, "--from", help="A directory of image archives "
                                       "(docker-archive .tar, as `docker save` or `ctr images "
                                       "export` write), found by the names they carry."),
    build: bool = typer.Option(False, "--build", help="Build the images here, for each "
                               "host's architecture (the inventory's arch), from the Go "
                               "binaries .ci/k8s-test-binaries (amd64) and "
                               ".ci/k8s-cross-binaries ARCH (arm64, arm) make: control "
                               "plane, kube-proxy, etcd, CoreDNS, pause, the CNI's."),
    address: str = CONTAINERD,
    known_hosts: Path | None = KNOWN_HOSTS, dry_run: bool = DRY_RUN,
    log_dir: Path = HOST_LOGS,
) -> None:
    """Load what kubeadm and the CNI need onto every host over SSH, before init and join,
    for hosts with no registry: each host's kubeadm says what its version needs (all of it on
    the control plane; kube-proxy, pause and CoreDNS on workers), the CNI's pinned manifest
    the rest, each of the host's own architecture. Images a host has are skipped. Give --from
    DIR (the same names may be there for several architectures) or --build."""
    from k8sdds import cni as cnis
    from k8sdds.cluster import images
    from k8sdds.cni.manifests import images as cni_images_of
    from k8sdds.images.kubernetes import buildable

    if (source is None) == (not build):
        raise typer.BadParameter("give exactly one of --from DIR and --build",
                                 param_hint="--from/--build")
    plan = cnis.PLANS[choice(cni, list(cnis.PLANS), "--cni")]
    cni_images = cni_images_of(plan)
    if build and (plan.manifest is None or not all(map(buildable, cni_images))):
        raise typer.BadParameter(f"{plan.name}'s images cannot be built here; give --from",
                                 param_hint="--build")
    found = images.from_directory(source) if source is not None else None
    loaded, known = hosts(inventory, known_hosts)
    folder = logs_of(log_dir, loaded.hosts)
    results = images.load_all(loaded, known, dry_run, folder.folder, cni_images, found,
                              address, lambda line: err_console.print(
                                  line, markup=False, highlight=False))
    if dry_run:
        dry_run_listing(folder, loaded.hosts, results)
        return
    report(results, f"images for kubeadm and {plan.name}", folder.folder)


def cluster_engines(inventory: Path = INVENTORY,
                    debian: str = typer.Option(
                        "missing", "--debian", help="When to copy the Debian engines "
                        "(ddsperf, mosquitto, with their libraries, downloaded here once for "
                        "each architecture): missing (to a host that lacks them, or holds "
                        "k8sdds' copy), always, never."),
                    mirror: str | None = typer.Option(
                        None, "--mirror", callback=url, help="Debian mirror the Debian engines are "
                        "downloaded from [http://deb.debian.org/debian]."),
                    known_hosts: Path | None = KNOWN_HOSTS,
                    dry_run: bool = DRY_RUN, log_dir: Path = HOST_LOGS) -> None:
    """Copy the engines a `--backend ssh` run starts into each host's engine_bin over SSH
    (checked by SHA-256): those k8sdds builds (k8sdds-mqtt, k8sdds-zenoh, k8sdds-discovery:
    `make engines`;
    perftest_cpp, RTI Perftest on Cyclone DDS: `make perftest`; each for every architecture)
    and Debian's ddsperf and mosquitto with their libraries (glibc is the host's), for hosts
    with no package repository and no toolchain, such as an air-gapped Pi. What is not built
    here is skipped and said, with how to build it. `cluster check` says what each host still
    lacks."""
    from k8sdds.cluster.engines import DEBIAN_WHEN, deliver
    from k8sdds.images.build import DEFAULT_MIRROR, not_built, own_engines
    from k8sdds.images.debian_engines import bundle

    when = choice(debian, list(DEBIAN_WHEN), "--debian")

    def built(arch: str) -> dict[str, Path]:
        return {Path(k).name: v for k, v in own_engines(arch).items()}

    def debian_tar(arch: str) -> Path:
        return bundle(arch, mirror or DEFAULT_MIRROR, say=lambda line: err_console.print(
            line, markup=False, highlight=False))

    loaded, known = hosts(inventory, known_hosts)
    results, folder = per_host(loaded, known, dry_run, log_dir,
                               lambda r: deliver(r, built, debian_tar, when, not_built))
    if dry_run:
        dry_run_listing(folder, loaded.hosts, results)
        for host, said in results.items():  # what the real command would skip, and why
            for line in (x for x in said if x.startswith("skipped: ")):
                err_console.print(f"{host}: {line}", markup=False, highlight=False)
        return
    report(results, "engines", folder)


def cluster_install(inventory: Path = INVENTORY,
                    only: list[str] = typer.Option(None, "--host", help="Only this host of "
                                                   "the inventory (give it again for "
                                                   "more) [every host]."),
                    mirror: str | None = typer.Option(
                        None, "--mirror", callback=url, help="Debian mirror containerd, "
                        "runc and the CNI "
                        "plugins are downloaded from, here, once per architecture "
                        "[http://deb.debian.org/debian]."),
                    known_hosts: Path | None = KNOWN_HOSTS,
                    dry_run: bool = DRY_RUN, log_dir: Path = HOST_LOGS) -> None:
    """Make bare Debian hosts (Raspberry Pi OS, Debian 12) kubeadm nodes over SSH, with no
    package repository on them: kubelet and kubeadm (kubectl on the control plane), k8sdds'
    builds of the pinned version for each host's architecture, in /usr/local/bin; Debian's
    containerd, runc and CNI plugins where the host lacks them (installed by its dpkg); the
    kubelet's systemd unit and kubeadm's drop-in, containerd's configuration (systemd
    cgroups), the kernel modules and sysctls kubeadm needs. Every file is checked by SHA-256
    on the host; what is in place is left alone; what the host had is recorded on it, and
    `k8sdds cluster reset --purge` puts it back."""
    from dataclasses import replace

    from k8sdds.cluster.install import bundle, install, plan_text

    loaded, known = hosts(inventory, known_hosts)
    if only:
        names = [h.name for h in loaded.hosts]
        unknown = [n for n in only if n not in names]
        if unknown:
            raise typer.BadParameter(f"{', '.join(unknown)}: not in {inventory} (its hosts: "
                                     f"{', '.join(names)})", param_hint="--host")
        loaded = replace(loaded, hosts=tuple(h for h in loaded.hosts if h.name in only))
    say = lambda line: err_console.print(line, markup=False, highlight=False)  # noqa: E731
    parts = {arch: bundle(arch, say, mirror) for arch in dict.fromkeys(h.arch for h in
                                                                        loaded.hosts)}
    for line in plan_text(parts):
        say(line)
    results, folder = per_host(loaded, known, dry_run, log_dir,
                               lambda r: install(r, parts[r.host.arch]))
    if dry_run:
        dry_run_listing(folder, loaded.hosts, results)
        return
    report(results, "install", folder)
