"""`k8sdds image`: the engine image, built here with no Docker and no registry."""

from __future__ import annotations

from pathlib import Path

import typer

from k8sdds.cli.common import err_console, out_console

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
) -> None:
    """Build the engine image: a Debian base (debootstrap), the Dockerfile's steps in a
    chroot, packed by umoci and skopeo; cached by the Dockerfile's content under
    /var/cache/k8sdds/images ($K8SDDS_CACHE)."""
    from k8sdds.images.build import BuildOptions, build

    given = {k: v for k, v in (("tag", tag), ("mirror", mirror)) if v is not None}
    path = build(BuildOptions(dockerfile, out, **given),
                 say=lambda line: err_console.print(line, markup=False, highlight=False))
    out_console.print(f"image: {path}")


def register(app: typer.Typer) -> None:
    image_app.command("build")(image_build)
    app.add_typer(image_app, name="image")
