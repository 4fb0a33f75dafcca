"""An image for another architecture (a Raspberry Pi's arm64 or armhf) built here without
running a single instruction of it: the Debian base from debootstrap's first stage (which only
unpacks), the Dockerfile's packages downloaded by apt for that architecture (its own private
configuration, state and cache: this machine's apt setup is not touched) and unpacked with
dpkg-deb. No maintainer script runs; what an engine needs (its binaries and libraries) is
there, and the dynamic loader finds Debian's multiarch library directories without a cache.

So a foreign build takes only Dockerfile steps that install packages; any other step would
have to run the foreign code, and is refused by name (`packages` is pure). What maintainer
scripts would have set up that an image needs is done here: the links `update-alternatives`
would make (iptables -> iptables-nft, ...), read from the packages' own postinst scripts."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from k8sdds.images.dockerfile import DockerfileError, Recipe
from k8sdds.model import DEBIAN_ARCH, HOST_ARCH

DEBIAN = DEBIAN_ARCH  # the names users give -> Debian's (k8sdds.model), and back
OCI = {debian: name for name, debian in DEBIAN.items()}
KEYRING = "/usr/share/keyrings/debian-archive-keyring.gpg"
# the parts of a RUN step that only prepare or tidy apt, which a foreign build does itself
_TIDY = ("apt-get update", "apt update", "rm -rf /var/lib/apt/lists/*",
         "apt-get clean", "true")


def foreign(arch: str) -> bool:
    """Whether an image of Debian architecture `arch` cannot run here."""
    return arch != HOST_ARCH


def packages(recipe: Recipe, arch: str, path: str = "Dockerfile") -> tuple[str, ...]:
    """The packages the recipe's RUN steps install, in order; a DockerfileError for a step
    that does anything else (it would run `arch` code). Pure."""
    found: list[str] = []
    for number, run in enumerate(recipe.runs, start=1):
        for part in (p.strip() for p in run.split("&&")):
            try:
                words = shlex.split(part)
            except ValueError as exc:
                raise DockerfileError(f"{path}, RUN step {number}: {part!r}: {exc}") from None
            while words and re.fullmatch(r"[A-Za-z_]\w*=.*", words[0]):
                words.pop(0)  # DEBIAN_FRONTEND=... before the command
            if " ".join(words) in _TIDY or not words:
                continue
            if words[:2] in (["apt-get", "install"], ["apt", "install"]):
                found += [w for w in words[2:] if not w.startswith("-")]
                continue
            raise DockerfileError(
                f"{path}, RUN step {number}: {part!r} would run {arch} code; an image for "
                f"another architecture takes only apt-get install steps (their packages are "
                "unpacked, never run)")
    return tuple(dict.fromkeys(found))


@dataclass(frozen=True)
class Alternative:
    """One link `update-alternatives --install` makes (a master's or one of its slaves')."""

    name: str  # the master's name: iptables
    link: str  # /usr/sbin/iptables-save
    path: str  # /usr/sbin/iptables-nft-save
    priority: int  # the master's


def alternatives(script: str) -> list[Alternative]:
    """The links every `update-alternatives --install` of a maintainer script would make
    (those naming shell variables left out: their values are the script's). Pure."""
    found: list[Alternative] = []
    for command in script.replace("\\\n", " ").splitlines():
        try:
            words = shlex.split(command, comments=True)
        except ValueError:
            continue
        while "update-alternatives" in words:
            words = words[words.index("update-alternatives") + 1:]
            if "--install" not in words:
                break
            i = words.index("--install")
            try:
                link, name, path, priority = words[i + 1:i + 5]
                master = Alternative(name, link, path, int(priority))
            except ValueError:
                break
            rest, links = words[i + 5:], [master]
            while len(rest) >= 4 and rest[0] == "--slave":
                links.append(Alternative(name, rest[1], rest[3], master.priority))
                rest = rest[4:]
            found += [a for a in links if "$" not in a.link + a.path]
            words = rest
    return found


def choose(found: list[Alternative]) -> dict[str, str]:
    """link -> path, as update-alternatives' automatic mode chooses: per master name, the
    group of the highest priority. Pure."""
    best: dict[str, int] = {}
    for a in found:
        best[a.name] = max(best.get(a.name, a.priority), a.priority)
    return {a.link: a.path for a in found if a.priority == best[a.name]}


def link_alternatives(rootfs: Path, found: list[Alternative]) -> list[str]:
    """Make the chosen links in `rootfs` whose targets it has; the links made."""
    made = []
    for link, path in sorted(choose(found).items()):
        target, where = rootfs / path.lstrip("/"), rootfs / link.lstrip("/")
        if (target.exists() or target.is_symlink()) and not (where.exists() or
                                                               where.is_symlink()):
            where.parent.mkdir(parents=True, exist_ok=True)
            where.symlink_to(path)
            made.append(link)
    return made


def apt_config(work: Path, arch: str, suite: str, mirror: str) -> Path:
    """A private apt configuration for `arch`: its own sources, state, cache and an empty
    package status (so every dependency is fetched); the path for APT_CONFIG."""
    for d in ("state/lists/partial", "cache/archives/partial", "parts", "prefs"):
        (work / d).mkdir(parents=True, exist_ok=True)
    (work / "status").write_text("")
    (work / "sources.list").write_text(
        f"deb [arch={arch} signed-by={KEYRING}] {mirror} {suite} main\n")
    conf = work / "apt.conf"
    conf.write_text("\n".join([
        f'APT::Architecture "{arch}";', f'APT::Architectures {{ "{arch}"; }};',
        f'Dir::State "{work / "state"}";', f'Dir::State::status "{work / "status"}";',
        f'Dir::Cache "{work / "cache"}";', f'Dir::Etc::SourceList "{work / "sources.list"}";',
        f'Dir::Etc::SourceParts "{work / "parts"}";',
        f'Dir::Etc::PreferencesParts "{work / "prefs"}";',
        'Acquire::Languages "none";', 'APT::Install-Recommends "false";',
        'Dpkg::Use-Pty "false";', ""]))
    return conf


def unpack(rootfs: Path, wanted: tuple[str, ...], arch: str, suite: str, mirror: str,
           work: Path, run: Callable[..., None], say: Callable[[str], None],
           leave_out: tuple[str, ...] = ()) -> list[str]:
    """Download `wanted` and what they depend on for `arch`, and unpack each into `rootfs`
    (its merged-/usr links kept), but the packages named in `leave_out`; the .deb files
    unpacked. `run(argv, what, env)` runs a command of this machine and raises on
    failure."""
    if not wanted:
        return []
    env = {**os.environ, "APT_CONFIG": str(apt_config(work, arch, suite, mirror)),
           "DEBIAN_FRONTEND": "noninteractive"}
    say(f"apt ({arch}, private configuration): {' '.join(wanted)}")
    run(["apt-get", "-q", "update"], f"apt-get update for {arch}", env)
    run(["apt-get", "-q", "-y", "install", "--download-only", *wanted],
        f"downloading the {arch} packages", env)
    debs = [deb for deb in sorted((work / "cache" / "archives").glob("*.deb"))
            if deb.name.split("_")[0] not in leave_out]
    found: list[Alternative] = []
    for deb in debs:
        control = work / "control" / deb.stem
        control.parent.mkdir(parents=True, exist_ok=True)
        run(["dpkg-deb", "--control", str(deb), str(control)], f"reading {deb.name}", None)
        if (control / "postinst").exists():
            found += alternatives((control / "postinst").read_text(errors="replace"))
        data = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", str(deb)],
                                stdout=subprocess.PIPE)
        tar = subprocess.run(["tar", "-x", "--keep-directory-symlink", "-C", str(rootfs)],
                             stdin=data.stdout, capture_output=True, text=True)
        data.stdout.close()
        if data.wait() != 0 or tar.returncode != 0:
            raise DockerfileError(f"unpacking {deb.name}: {tar.stderr.strip()[-300:]}")
    settle(rootfs)
    links = link_alternatives(rootfs, found)
    say(f"unpacked {len(debs)} {arch} packages (no maintainer script run"
        + (f"; their alternatives linked: {' '.join(links)}" if links else "") + ")")
    return [d.name for d in debs]


def settle(rootfs: Path) -> None:
    """What the second stage and the maintainer scripts would have left that an image needs:
    /proc a directory (the first stage links it to the builder's), the users and groups of
    base-passwd's master files."""
    proc = rootfs / "proc"
    if proc.is_symlink():
        proc.unlink()
        proc.mkdir()
    for name in ("passwd", "group"):
        master = rootfs / "usr/share/base-passwd" / f"{name}.master"
        if master.exists() and not (rootfs / "etc" / name).exists():
            shutil.copyfile(master, rootfs / "etc" / name)
