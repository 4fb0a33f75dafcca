"""`k8sdds image`: the engine image, built here with no Docker and no registry."""

from __future__ import annotations

from pathlib import Path

import typer

from k8sdds.cli.common import err_console, out_console
from k8sdds.errors import UserError

image_app = typer.Typer(no_args_is_help=True, help="The engine image of the kubernetes "
                        "backend, without Docker or a registry.")


def image_build(
    dockerfile: Path = typer.Option(Path("docker/Dockerfile"), "--dockerfile",
                                    help="The Dockerfile (FROM debian:..., RUN, USER, "
                                    "WORKDIR, ENV)."),
    out: Path = typer.Option(Path("engines.tar"), "--out", help="The image archive to write "
                             "(docker-archive: `ctr -n k8s.io images import` and `docker "
                             "load` read it)."),
    tag: str | None = typer.Option(None, "--tag", help="The image's name [the kubernetes "
                                   "backend's default --image, ghcr.io/k8sdds/engines:0.1]."),
    mirror: str | None = typer.Option(None, "--mirror", help="Debian mirror for the base "
                                      "and the packages [http://deb.debian.org/debian]."),
    arch: str | None = typer.Option(None, "--arch", help="The image's architecture: amd64, "
                                    "arm64 (Raspberry Pi OS 64-bit) or arm (32-bit, ARMv7) "
                                    "[this machine's]. Another architecture's image is "
                                    "unpacked from Debian's packages, never run: its "
                                    "Dockerfile may only install packages."),
) -> None:
    """Build the engine image: a Debian base (debootstrap), the Dockerfile's steps in a
    chroot (for another architecture: its packages unpacked), packed by umoci and skopeo;
    cached by the Dockerfile's content under /var/cache/k8sdds/images ($K8SDDS_CACHE)."""
    from k8sdds.images.build import BuildOptions, build
    from k8sdds.images.foreign import DEBIAN

    if arch is not None and arch not in DEBIAN:
        raise typer.BadParameter(f"{arch!r}: use one of {', '.join(DEBIAN)}",
                                 param_hint="--arch")
    given = {k: v for k, v in (("tag", tag), ("mirror", mirror),
                               ("arch", DEBIAN.get(arch or ""))) if v is not None}
    path = build(BuildOptions(dockerfile, out, **given),
                 say=lambda line: err_console.print(line, markup=False, highlight=False))
    out_console.print(f"image: {path}")


def image_load(
    name: str = typer.Option("k8sdds", "--name", help="The testbed whose cluster gets it."),
    archives: list[Path] = typer.Option(None, "--archive", help="Image archive(s) "
                                        "(docker-archive) [the engine image, built by `k8sdds "
                                        "image build`, cached]."),
) -> None:
    """Put images into every node of a testbed cluster (`testbed up --kubernetes`): each
    worker's containerd imports them; pods find them with imagePullPolicy IfNotPresent."""
    from k8sdds.cluster.images import describe
    from k8sdds.testbed.kube.cluster import KubeCluster
    from k8sdds.testbed.lock import TestbedLock
    from k8sdds.testbed.testbed import Testbed

    tb = Testbed.existing(name)
    if tb is None:
        raise UserError(f"testbed {name} is down (k8sdds testbed up --kubernetes)")
    if not archives:
        from k8sdds.images.build import engine_image

        archives = [engine_image(say=lambda line: err_console.print(line, markup=False,
                                                                    highlight=False))]
    for archive in archives:
        if not Path(archive).is_file():
            raise typer.BadParameter(f"{archive}: no such file", param_hint="--archive")
        tags, arch = describe(archive)
        err_console.print(f"{archive}: {', '.join(tags) or 'no tag'} ({arch})",
                          markup=False, highlight=False)
    lock = TestbedLock(name)
    lock.acquire()
    try:
        nodes = KubeCluster(tb).load(list(archives))
    finally:
        lock.release()
    out_console.print(f"loaded into {', '.join(nodes)}")


def register(app: typer.Typer) -> None:
    image_app.command("build")(image_build)
    image_app.command("load")(image_load)
    app.add_typer(image_app, name="image")
