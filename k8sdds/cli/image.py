"""`k8sdds image`: the engine image, built here with no Docker and no registry."""

from __future__ import annotations

from pathlib import Path

import typer

from k8sdds.cli.common import err_console, one_of, out_console, url
from k8sdds.errors import UserError

image_app = typer.Typer(no_args_is_help=True, help="The engine image of the kubernetes "
                        "backend, without Docker or a registry.")


def image_build(
    dockerfile: Path = typer.Option(Path("docker/Dockerfile"), "--dockerfile",
                                    help="The Dockerfile (FROM debian:..., RUN, USER, "
                                    "WORKDIR, ENV)."),
    out: Path = typer.Option(Path("engines.tar"), "--out", help="The image archive to write "
                             "(docker-archive: `ctr -n k8s.io images import` and `docker "
                             "load` read it; for several architectures an OCI archive with "
                             "an image index, which ctr reads)."),
    tag: str | None = typer.Option(None, "--tag", help="The image's name [the kubernetes "
                                   "backend's default --image, ghcr.io/k8sdds/engines:0.1]."),
    mirror: str | None = typer.Option(None, "--mirror", callback=url, help="Debian mirror "
                                      "for the base "
                                      "and the packages [http://deb.debian.org/debian]."),
    arch: str | None = typer.Option(None, "--arch", help="The image's architecture: amd64, "
                                    "arm64 (Raspberry Pi OS 64-bit) or arm (32-bit, ARMv7) "
                                    "[this machine's]; several, comma-separated, make one "
                                    "multi-architecture archive (one tag, an OCI image "
                                    "index) for a hybrid cluster. Another architecture's "
                                    "image is unpacked from Debian's packages, never run: "
                                    "its Dockerfile may only install packages."),
) -> None:
    """Build the engine image: a Debian base (debootstrap), the Dockerfile's steps in a
    chroot (for another architecture: its packages unpacked), packed by umoci and skopeo;
    cached by the Dockerfile's content under /var/cache/k8sdds/images ($K8SDDS_CACHE). From
    docker/Dockerfile, the engines k8sdds builds (`make engines`: k8sdds-mqtt,
    k8sdds-zenoh) for that architecture are added in /usr/local/bin."""
    from k8sdds.images.build import DOCKERFILE, BuildOptions, build, own_engines
    from k8sdds.images.foreign import DEBIAN
    from k8sdds.images.index import combine
    from k8sdds.model import HOST_ARCH

    arches = [a.strip() for a in (arch or "").split(",") if a.strip()] or [None]
    for one in arches:
        if one is not None and one not in DEBIAN:
            raise typer.BadParameter(f"{one!r}: use one of {', '.join(DEBIAN)} (several "
                                     "comma-separated)", param_hint="--arch")
    if len(set(arches)) != len(arches):
        raise typer.BadParameter(f"{arch!r} names an architecture twice", param_hint="--arch")
    def say(line: str) -> None:
        err_console.print(line, markup=False, highlight=False)

    built = []
    for one in arches:
        given = {k: v for k, v in (("tag", tag), ("mirror", mirror),
                                   ("arch", DEBIAN.get(one or ""))) if v is not None}
        files = (own_engines(DEBIAN.get(one or "", HOST_ARCH), say)
                 if dockerfile.resolve() == DOCKERFILE else None)
        built.append(build(BuildOptions(dockerfile, out if len(arches) == 1 else None,
                                        **given), say=say, files=files))
    if len(built) > 1:
        out.parent.mkdir(parents=True, exist_ok=True)
        built = [combine(built, out)]
        say(f"one tag for {', '.join(arches)}: an OCI image index")
    out_console.print(f"image: {built[0]}")


def image_index(
    archives: list[Path] = typer.Argument(..., help="Image archives of one name, one per "
                                          "architecture (docker-archive)."),
    out: Path = typer.Option(..., "--out", help="The OCI archive to write."),
    tag: str | None = typer.Option(None, "--tag", help="The name it carries [the name the "
                                   "archives share]."),
) -> None:
    """Combine per-architecture image archives into one multi-architecture archive: one tag,
    an OCI image index choosing by platform, so one name serves a hybrid cluster (`ctr
    images import --platform`, `k8sdds cluster load-image`)."""
    from k8sdds.images.index import combine, describe

    for archive in archives:
        if not Path(archive).is_file():
            raise typer.BadParameter(f"{archive}: no such file", param_hint="ARCHIVES")
    out.parent.mkdir(parents=True, exist_ok=True)
    path = combine(archives, out, tag)
    tags, arches = describe(path)
    out_console.print(f"image: {path} ({', '.join(tags)}: {', '.join(arches)})")


def image_load(
    name: str | None = typer.Option(None, "--testbed", help="The testbed whose cluster gets "
                                    "it [k8sdds]."),
    old_name: str | None = typer.Option(None, "--name", hidden=True,
                                        help="The old spelling of --testbed."),
    archives: list[Path] = typer.Option(None, "--archive", help="Image archive(s) "
                                        "(docker-archive) [the engine image, built by `k8sdds "
                                        "image build`, cached]."),
) -> None:
    """Put images into every node of a testbed cluster (`testbed up --kubernetes`): each
    worker's containerd imports them; pods find them with imagePullPolicy IfNotPresent."""
    from k8sdds.images.index import describe
    from k8sdds.testbed.kube.kubelets import Kubelets
    from k8sdds.testbed.lock import TestbedLock
    from k8sdds.testbed.spec import DEFAULT_NAME
    from k8sdds.testbed.testbed import Testbed

    name = one_of(name, old_name, "--testbed", "--name") or DEFAULT_NAME
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
        tags, arches = describe(archive)
        err_console.print(f"{archive}: {', '.join(tags) or 'no tag'} ({', '.join(arches)})",
                          markup=False, highlight=False)
    lock = TestbedLock(name)
    lock.acquire()
    try:
        nodes = Kubelets(tb).load(list(archives))
    finally:
        lock.release()
    out_console.print(f"loaded into {', '.join(nodes)}")


def register(app: typer.Typer) -> None:
    image_app.command("build")(image_build)
    image_app.command("load")(image_load)
    image_app.command("index")(image_index)
    app.add_typer(image_app, name="image")
