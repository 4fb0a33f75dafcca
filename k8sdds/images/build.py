"""`k8sdds image build`: the engine image from docker/Dockerfile with no Docker and no
registry. A Debian base from debootstrap (cached per suite and architecture), each RUN step in
a chroot inside its own mount and PID namespaces (nothing is mounted on the host), packed as
an OCI image by umoci and written as an image archive by skopeo, which `ctr images import`
(containerd) and `docker load` read. The archive is cached by the Dockerfile's content."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from k8sdds import caches, engines
from k8sdds.errors import UserError
from k8sdds.images import DEFAULT_IMAGE, foreign
from k8sdds.images.dockerfile import Recipe, parse
from k8sdds.model import HOST_ARCH
from k8sdds.results.files import sha256

DEFAULT_MIRROR = "http://deb.debian.org/debian"
TOOLS = {"debootstrap": "debootstrap", "umoci": "umoci", "skopeo": "skopeo",
         "unshare": "util-linux", "chroot": "coreutils"}
# how a RUN step sees the world: no services start in a chroot (policy-rc.d), no questions
STEP_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "DEBIAN_FRONTEND": "noninteractive", "LANG": "C.UTF-8", "HOME": "/root"}


def cache_dir() -> Path:
    return caches.images()


@contextlib.contextmanager
def one_builder(archive: Path):
    """Hold the archive's lock while it is built: a second build of the same archive (another
    command, another user) waits, then finds it in the cache instead of writing the same
    files at the same time."""
    with open(archive.with_name(archive.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


@dataclass(frozen=True)
class BuildOptions:
    dockerfile: Path
    out: Path | None  # None: the cached archive itself
    tag: str = DEFAULT_IMAGE
    mirror: str = DEFAULT_MIRROR
    arch: str = HOST_ARCH  # Debian's name (amd64, arm64, armhf)
    cache: Path | None = None  # [cache_dir()]


def missing_tools() -> list[str]:
    """The Debian packages the build needs and this machine lacks."""
    return sorted({pkg for tool, pkg in TOOLS.items() if shutil.which(tool) is None})


def step_argv(rootfs: Path, command: str) -> list[str]:
    """One RUN step: a shell in the chroot, with its own /proc in private mount and PID
    namespaces (they end with it, so nothing stays mounted)."""
    return ["unshare", "--mount", "--pid", "--fork", "--propagation", "private",
            f"--mount-proc={rootfs / 'proc'}", "chroot", str(rootfs), "/bin/sh", "-ec", command]


# what every image leaves out (see slim); a new value rebuilds the cached archives
SLIM = "slim-2"


def key(recipe: Recipe, text: str, options: BuildOptions) -> str:
    """What makes an archive: the Dockerfile, the base, the tag, the architecture and what
    the build leaves out."""
    seed = "\n".join([text, recipe.suite, options.arch, options.mirror, options.tag, SLIM])
    return hashlib.sha256(seed.encode()).hexdigest()[:16]


def build(options: BuildOptions, say: Callable[[str], None] = lambda _: None,
          files: Mapping[str, Path] | None = None) -> Path:
    """Build (or take from the cache) the image archive, with `files` (path in the image ->
    file here) added; copy it to `options.out` (or return the cached one)."""
    if os.geteuid() != 0:
        raise UserError("k8sdds image build needs root (debootstrap and chroot)")
    lacking = missing_tools()
    if lacking:
        raise UserError(f"k8sdds image build needs {', '.join(lacking)} "
                        f"(apt-get install {' '.join(lacking)})")
    try:
        text = Path(options.dockerfile).read_text()
    except OSError as exc:
        raise UserError(f"{options.dockerfile}: cannot read it ({exc.strerror})") from None
    recipe = parse(text, str(options.dockerfile))
    archive = assemble(recipe, text, options, say, files)
    if options.out is None:
        return archive
    Path(options.out).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(archive, options.out)
    return Path(options.out)


DOCKERFILE = Path(__file__).resolve().parents[2] / "docker" / "Dockerfile"


# the engines k8sdds builds itself (engines/build), which the engine image carries, as the
# engine records say
OWN_ENGINES = engines.programs()


def built_engine(name: str, arch: str) -> Path:
    """Where engines/build puts program `name` for Debian architecture `arch`: NAME for this
    machine's, NAME-ARCH for another's (in $K8SDDS_ENGINE_BIN)."""
    from k8sdds.engines.base import engine_bin

    return engine_bin() / (name if arch == HOST_ARCH else f"{name}-{arch}")


def built_for(engine: engines.Engine, arch: str) -> bool:
    """Whether every program of `engine` (k8sdds builds them) is built here for Debian
    architecture `arch`."""
    return all(built_engine(p, arch).exists() for p in engine.programs)


def not_built(arch: str) -> list[str]:
    """Each program of k8sdds' own engines not built here for Debian architecture `arch`,
    with how to build it, or the architectures its engine runs on."""
    out = []
    for engine in engines.registry().values():
        if not engine.programs or built_for(engine, arch):
            continue
        why = (f"runs on {', '.join(engine.arches)} only"
               if engine.arches and arch not in engine.arches
               else f"not built for {arch}: {engine.how_to_build([arch])}")
        out += [f"{program} ({why})" for program in engine.programs
                if not built_engine(program, arch).exists()]
    return out


def own_engines(arch: str, say: Callable[[str], None] = lambda _: None) -> dict[str, Path]:
    """/usr/local/bin/NAME -> the built binary, for each of OWN_ENGINES built for Debian
    architecture `arch` (in $K8SDDS_ENGINE_BIN); one not built is said and left out."""
    out = {}
    for name in OWN_ENGINES:
        path = built_engine(name, arch)
        if path.exists():
            out[f"/usr/local/bin/{name}"] = path.resolve()
        else:
            say(f"{name} for {arch} is not built (`k8sdds engines` says how): this image "
                "cannot run its engine")
    return out


def engine_image(say: Callable[[str], None] = lambda _: None, arch: str = HOST_ARCH
                 ) -> Path:
    """The engine image of docker/Dockerfile for Debian architecture `arch`, with the
    engines k8sdds builds (own_engines) in /usr/local/bin (built once, then cached): what the
    kubernetes backend's pods run by default."""
    if not DOCKERFILE.exists():
        raise UserError(f"no {DOCKERFILE} (k8sdds installed without its source tree): give "
                        "the engine image archive with --image-archive/--archive")
    return build(BuildOptions(DOCKERFILE, None, arch=arch), say, own_engines(arch, say))


def assemble(recipe: Recipe, text: str, options: BuildOptions,
             say: Callable[[str], None] = lambda _: None,
             files: Mapping[str, Path] | None = None, entrypoint: Sequence[str] = (),
             name: str = "engines") -> Path:
    """The cached archive of `recipe` (`text` is what it was read from) with `files` (path in
    the image -> file here) added after its steps: built when absent."""
    files = dict(files or {})
    if foreign.foreign(options.arch):  # refused before anything is fetched
        foreign.packages(recipe, options.arch)
    cache = Path(options.cache or cache_dir())
    cache.mkdir(parents=True, exist_ok=True)
    digests = [f"{dest}={_digest(Path(src))}" for dest, src in sorted(files.items())]
    seed = "\n".join([text, *digests, *entrypoint])
    archive = cache / f"{name}-{key(recipe, seed, options)}.tar"
    with one_builder(archive):
        if archive.exists():
            say(f"cached: {archive}")
            return archive
        base = _base(recipe.suite, options, cache, say)
        with tempfile.TemporaryDirectory(prefix="build-", dir=cache) as work:
            _image(Path(work), base, recipe, options, say, archive, files, entrypoint)
    return archive


def _digest(src: Path) -> str:
    """A file's SHA-256, or a folder's: of each file's path and SHA-256, in order."""
    if not src.is_dir():
        return sha256(src)
    h = hashlib.sha256()
    for path in sorted(p for p in src.rglob("*") if p.is_file()):
        h.update(f"{path.relative_to(src)}={sha256(path)}\n".encode())
    return h.hexdigest()


def run_tool(argv: Sequence[str], what: str, env: dict | None = None) -> None:
    proc = subprocess.run(list(argv), capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise UserError(f"image build: {what} failed (exit {proc.returncode}): "
                        + " | ".join(tail))


def _base(suite: str, options: BuildOptions, cache: Path, say) -> Path:
    """A minimal Debian root file system as a tar, made once per suite and architecture."""
    tar = cache / f"debian-{suite}-minbase-{options.arch}.tar"
    with one_builder(tar):
        if not tar.exists():
            _debootstrap(suite, options, cache, tar, say)
    return tar


def _debootstrap(suite: str, options: BuildOptions, cache: Path, tar: Path, say) -> None:
    """Another architecture's base is debootstrap's first stage only: unpacked, not run."""
    stage = ["--foreign"] if foreign.foreign(options.arch) else []
    say(f"debootstrap {suite} ({options.arch}{', unpacked only' if stage else ''}) from "
        f"{options.mirror} (about a minute, once)")
    with tempfile.TemporaryDirectory(prefix="base-", dir=cache) as work:
        rootfs = Path(work) / "rootfs"
        run_tool(["debootstrap", "--variant=minbase", *stage, f"--arch={options.arch}", suite,
                  str(rootfs), options.mirror], f"debootstrap {suite}")
        shutil.rmtree(rootfs / "debootstrap", ignore_errors=True)  # the second stage's kit
        partial = tar.with_suffix(".tar.part")
        run_tool(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(partial), "."],
                 "packing the base")
        os.replace(partial, tar)


def _image(work: Path, base: Path, recipe: Recipe, options: BuildOptions, say,
           archive: Path, files: Mapping[str, Path], entrypoint: Sequence[str]) -> None:
    rootfs = work / "rootfs"
    rootfs.mkdir()
    with tarfile.open(base) as tf:
        tf.extractall(rootfs, filter="fully_trusted")  # our own debootstrap output
    policy = rootfs / "usr/sbin/policy-rc.d"
    policy.write_text("#!/bin/sh\nexit 101\n")
    policy.chmod(0o755)
    resolv = rootfs / "etc/resolv.conf"
    resolv.unlink(missing_ok=True)
    shutil.copyfile("/etc/resolv.conf", resolv)
    env = {**STEP_ENV, **dict(recipe.env)}
    if foreign.foreign(options.arch):  # its packages unpacked, not run
        foreign.unpack(rootfs, foreign.packages(recipe, options.arch), options.arch,
                       recipe.suite, options.mirror, work / "apt", run_tool, say)
    else:
        for i, command in enumerate(recipe.runs, start=1):
            say(f"RUN {i}/{len(recipe.runs)}: {command[:70]}")
            run_tool(step_argv(rootfs, command), f"RUN step {i}", env=env)
    policy.unlink()
    resolv.write_text("")
    slim(rootfs)
    _add(rootfs, files)
    say("packing the image (umoci, skopeo)")
    env = [("PATH", STEP_ENV["PATH"]), ("LANG", STEP_ENV["LANG"]), *recipe.env]
    _pack(work, rootfs, options.tag, archive,
          [*(f"--config.entrypoint={part}" for part in entrypoint),
           f"--config.user={recipe.user}", f"--config.workingdir={recipe.workdir}",
           *platform_flags(options.arch), *(f"--config.env={k}={v}" for k, v in env)])


def slim(rootfs: Path) -> None:
    """Leave out what no container reads: apt's package lists, caches and downloads (apt
    remakes them), translations, manuals and documentation (each package's copyright file
    stays). About 120 MiB of every Debian-based image: half of what `cluster images` copies
    to each host."""
    for emptied in ("var/lib/apt/lists", "var/cache/apt", "usr/share/man", "usr/share/info"):
        shutil.rmtree(rootfs / emptied, ignore_errors=True)
        (rootfs / emptied).mkdir(parents=True, exist_ok=True)
    for kept in ("var/lib/apt/lists/partial", "var/cache/apt/archives/partial"):
        (rootfs / kept).mkdir(parents=True, exist_ok=True)
    locale = rootfs / "usr/share/locale"
    for entry in locale.iterdir() if locale.is_dir() else ():
        if entry.is_dir() and not entry.is_symlink():  # a language's messages; not
            shutil.rmtree(entry)                      # locale.alias
    doc = rootfs / "usr/share/doc"
    for path in sorted(doc.rglob("*"), reverse=True) if doc.is_dir() else ():
        if path.is_symlink() or path.is_file():
            if path.name != "copyright":
                path.unlink()
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()


def platform_flags(arch: str) -> list[str]:
    """umoci's flags naming the image's platform (OCI's name) for Debian architecture `arch`.
    No variant (umoci 0.4 sets none): containerd reads arm as arm/v7 and arm64 as
    arm64/v8, a Raspberry Pi's."""
    return [f"--architecture={foreign.OCI.get(arch, arch)}"]


def _add(rootfs: Path, files: Mapping[str, Path]) -> None:
    """Copy each file (or folder) into the image's root at its path (modes kept)."""
    for dest, src in files.items():
        target = rootfs / dest.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        if Path(src).is_dir():
            shutil.copytree(src, target, dirs_exist_ok=True)
        else:
            shutil.copy2(src, target)


def _pack(work: Path, rootfs: Path, tag: str, archive: Path, config: Sequence[str]) -> None:
    """`rootfs` as a one-layer OCI image (umoci) with `config`, written as a docker-archive
    named `tag` (skopeo) to `archive`, atomically."""
    layout, bundle = f"{work / 'oci'}:k8sdds", work / "bundle"
    run_tool(["umoci", "init", "--layout", str(work / "oci")], "umoci init")
    run_tool(["umoci", "new", "--image", layout], "umoci new")
    run_tool(["umoci", "unpack", "--image", layout, str(bundle)], "umoci unpack")
    shutil.rmtree(bundle / "rootfs")
    os.replace(rootfs, bundle / "rootfs")
    run_tool(["umoci", "repack", "--image", layout, str(bundle)], "umoci repack")
    run_tool(["umoci", "config", "--image", layout, "--os=linux", *config], "umoci config")
    partial = archive.with_suffix(".tar.part")
    partial.unlink(missing_ok=True)
    run_tool(["skopeo", "copy", "--quiet", f"oci:{layout}", f"docker-archive:{partial}:{tag}"],
             "skopeo copy")
    os.replace(partial, archive)


def pause(tag: str, cache: Path | None = None, arch: str = HOST_ARCH) -> Path:
    """The sandbox ("pause") image containerd starts first in every pod: a static busybox
    that sleeps (Debian's busybox-static for Debian architecture `arch`), as an image
    archive; cached."""
    return busybox_image(tag, {}, ["--config.entrypoint=/bin/busybox", "--config.cmd=sleep",
                                   "--config.cmd=2147483647", "--config.user=65535:65535"],
                         "pause", cache, arch=arch)


def busybox(arch: str, cache: Path | None = None) -> Path:
    """Debian's static busybox for Debian architecture `arch`: this machine's own, or the
    package of `arch` downloaded and unpacked (never run), cached."""
    if not foreign.foreign(arch):
        found = Path("/bin/busybox")
        if not found.exists():
            raise UserError("a busybox image needs Debian's busybox-static "
                            "(apt-get install busybox-static)")
        return found
    cache = Path(cache or cache_dir())
    cache.mkdir(parents=True, exist_ok=True)
    kept = cache / f"busybox-static-{arch}"
    with one_builder(kept):
        if not kept.exists():
            with tempfile.TemporaryDirectory(prefix="busybox-", dir=cache) as work:
                rootfs = Path(work) / "rootfs"
                rootfs.mkdir()
                foreign.unpack(rootfs, ("busybox-static",), arch, "bookworm", DEFAULT_MIRROR,
                               Path(work) / "apt", run_tool, lambda _: None)
                partial = kept.with_name(kept.name + ".part")
                shutil.copy2(rootfs / "bin/busybox", partial)
                os.replace(partial, kept)
    return kept


def busybox_image(tag: str, files: Mapping[str, Path], config: Sequence[str], name: str,
                  cache: Path | None = None, path: str = "/bin",
                  arch: str = HOST_ARCH) -> Path:
    """A tiny image of Debian architecture `arch`: Debian's static busybox (its shell tools on
    PATH) and `files`; cached by content."""
    cache = Path(cache or cache_dir())
    cache.mkdir(parents=True, exist_ok=True)
    tool = busybox(arch, cache)
    h = hashlib.sha256(tool.read_bytes() + tag.encode() + "\0".join(config).encode()
                       + path.encode())
    for dest, src in sorted(files.items()):
        h.update(dest.encode() + sha256(src).encode())
    archive = cache / f"{name}-{h.hexdigest()[:16]}.tar"
    with one_builder(archive):
        if archive.exists():
            return archive
        with tempfile.TemporaryDirectory(prefix=f"{name}-", dir=cache) as work:
            rootfs = Path(work) / "rootfs"
            (rootfs / "bin").mkdir(parents=True)
            shutil.copy2(tool, rootfs / "bin" / "busybox")
            for applet in ("sh", "cp", "ls", "cat"):
                (rootfs / "bin" / applet).symlink_to("busybox")
            _add(rootfs, files)
            _pack(Path(work), rootfs, tag, archive,
                  [f"--config.env=PATH={path}", *config, *platform_flags(arch)])
    return archive
