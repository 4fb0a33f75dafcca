"""The engine image without Docker or a registry: the Dockerfile as a recipe (pure), and a
real build (debootstrap, chroot, umoci, skopeo) whose archive holds the engines and runs
them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from k8sdds.images.dockerfile import DockerfileError, parse

from . import builds
from .builds import needs
from .emulated_support import cli, host_mounts

ROOT = Path(__file__).parent.parent
ENGINES = ("ddsperf", "iperf3", "qperf", "ping", "ab")


def test_the_engine_dockerfile_is_a_recipe():
    recipe = parse((ROOT / "docker" / "Dockerfile").read_text())
    assert recipe.suite == "bookworm" and recipe.user == "65532:65532"
    assert recipe.workdir == "/tmp" and len(recipe.runs) == 1
    assert "cyclonedds-tools" in recipe.runs[0] and "\\" not in recipe.runs[0]


@pytest.mark.parametrize("text, message", [
    ("FROM alpine:3\n", "Debian bases only"),
    ("RUN true\n", "line 1: RUN before FROM"),
    ("FROM debian:bookworm\nCOPY a /b\n", "line 2: COPY is not one of"),
    ("FROM debian:bookworm\nRUN [\"true\"]\n", "exec form"),
    ("FROM debian:bookworm\nENV A\n", "KEY=VALUE"),
    ("# nothing\n", "no FROM line"),
])
def test_what_the_builder_cannot_do_is_named(text, message):
    with pytest.raises(DockerfileError, match=message):
        parse(text, "Dockerfile")


def test_continuations_comments_and_env():
    recipe = parse("FROM debian:12-slim\n# a comment\nRUN a \\\n  # inside\n  && b\n"
                   "ENV X=1 Y=\"two words\"\n")
    assert recipe.runs == ("a && b",) and recipe.env == (("X", "1"), ("Y", "two words"))


def _build_reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (debootstrap, chroot)"
    lacking = [t for t in ("debootstrap", "umoci", "skopeo") if shutil.which(t) is None]
    return f"needs {', '.join(lacking)} (make test installs them)" if lacking else None


@pytest.mark.image
@needs(*builds.ENGINES, why=_build_reason)
def test_the_built_image_holds_the_engines_and_they_run(tmp_path):
    before = host_mounts()
    out = tmp_path / "engines.tar"
    done = cli("image", "build", "--out", str(out), cwd=ROOT, timeout=1800,
               env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    assert host_mounts() == before  # every RUN step's /proc went with its namespace
    with tarfile.open(out) as tf:
        [entry] = json.load(tf.extractfile("manifest.json"))
        assert entry["RepoTags"] == ["ghcr.io/k8sdds/engines:0.1"]
        config = json.load(tf.extractfile(entry["Config"]))
        assert config["config"]["User"] == "65532:65532"
        assert config["config"]["WorkingDir"] == "/tmp"
        rootfs = tmp_path / "rootfs"
        rootfs.mkdir()
        for layer in entry["Layers"]:
            with tarfile.open(fileobj=tf.extractfile(layer)) as lt:
                lt.extractall(rootfs, filter="fully_trusted")
    for engine in ENGINES:
        assert (rootfs / "usr/bin" / engine).exists(), engine
    assert not list((rootfs / "var/lib/apt/lists").glob("*_Packages"))  # no apt lists kept
    # nor apt's caches, translations or manuals; each package's copyright stays
    assert not list((rootfs / "var/cache/apt").glob("*.bin"))
    assert not [p for p in (rootfs / "usr/share/locale").iterdir() if p.is_dir()]
    assert not list((rootfs / "usr/share/man").iterdir())
    assert (rootfs / "usr/share/doc/iperf3/copyright").exists()
    assert not [p for p in (rootfs / "usr/share/doc").rglob("*")
                if p.is_file() and p.name != "copyright"]
    # the engines run in it: iperf3 and ddsperf, as the pod's user
    for argv, says in ((["iperf3", "--version"], "iperf 3."),
                       (["ddsperf", "-h"], "ddsperf [OPTIONS] MODE")):
        run = subprocess.run(["chroot", "--userspec=65532:65532", str(rootfs), *argv],
                             capture_output=True, text=True, timeout=60)
        assert run.returncode not in (126, 127) and says in run.stdout + run.stderr, argv
    # a second build is the cached archive, unchanged
    again = cli("image", "build", "--out", str(tmp_path / "again.tar"), cwd=ROOT,
                env={**os.environ, "COLUMNS": "200"})
    assert again.returncode == 0 and "cached:" in again.stderr
    assert (tmp_path / "again.tar").read_bytes() == out.read_bytes()


def test_two_builds_of_one_archive_at_once_build_it_once(tmp_path, monkeypatch):
    """The second waits on the archive's lock, then takes it from the cache."""
    import threading
    import time
    from concurrent.futures import ThreadPoolExecutor

    from k8sdds.images import build

    inside, most, packs = [0], [0], []
    guard = threading.Lock()

    def pack(work, rootfs, tag, archive, config):
        with guard:
            inside[0] += 1
            most[0] = max(most[0], inside[0])
        time.sleep(0.3)  # long enough for the other thread to arrive
        archive.write_bytes(b"archive")
        packs.append(archive)
        with guard:
            inside[0] -= 1

    monkeypatch.setattr(build, "_pack", pack)
    with ThreadPoolExecutor(2) as pool:
        got = list(pool.map(lambda _: build.pause("k8sdds/pause:test", tmp_path), range(2)))
    assert got[0] == got[1] and got[0].read_bytes() == b"archive"
    assert most[0] == 1 and len(packs) == 1


def test_slim_leaves_out_caches_translations_and_manuals_and_keeps_copyrights(tmp_path):
    from k8sdds.images.build import slim

    files = ["var/cache/apt/pkgcache.bin", "var/lib/apt/lists/x_Packages",
             "usr/share/locale/de/LC_MESSAGES/apt.mo", "usr/share/locale/locale.alias",
             "usr/share/man/man1/ls.1.gz", "usr/share/doc/apt/changelog.gz",
             "usr/share/doc/apt/copyright", "usr/share/doc/gone/README", "usr/bin/ddsperf"]
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text(f)
    (tmp_path / "usr/share/doc/libapt").symlink_to("apt")  # Debian links some docs
    slim(tmp_path)
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert left == ["usr/bin/ddsperf", "usr/share/doc/apt/copyright",
                    "usr/share/locale/locale.alias"]
    for kept in ("var/lib/apt/lists/partial", "var/cache/apt/archives/partial",
                 "usr/share/man"):
        assert (tmp_path / kept).is_dir()  # apt and man find their directories
    assert not (tmp_path / "usr/share/doc/gone").exists()
    assert not (tmp_path / "usr/share/doc/libapt").is_symlink()
