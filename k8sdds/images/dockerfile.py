"""A Dockerfile, read as the few instructions an engine image uses: FROM a Debian image,
RUN, USER, WORKDIR, ENV. Pure: text in, steps out; anything else is refused by name."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from k8sdds.errors import UserError

# Debian images by tag -> the suite debootstrap makes
SUITES = {"bookworm": "bookworm", "bookworm-slim": "bookworm", "12": "bookworm",
          "12-slim": "bookworm", "trixie": "trixie", "trixie-slim": "trixie"}


class DockerfileError(UserError):
    """The Dockerfile uses what the builder does not do; names file, line and instruction."""


@dataclass(frozen=True)
class Recipe:
    suite: str  # the Debian suite of the base
    runs: tuple[str, ...]  # shell commands, in order
    user: str = "0"
    workdir: str = "/"
    env: tuple[tuple[str, str], ...] = field(default_factory=tuple)


def _lines(text: str) -> list[tuple[int, str]]:
    """(first line number, instruction) with continuation lines joined, comments dropped."""
    out, buf, start = [], "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):
            continue
        if not buf:
            start = number
        if line.endswith("\\"):
            buf += line[:-1].rstrip() + " "
            continue
        out.append((start, buf + line))
        buf = ""
    if buf:
        out.append((start, buf.rstrip()))
    return out


def parse(text: str, path: str = "Dockerfile") -> Recipe:
    """The recipe of a Dockerfile; DockerfileError for what it cannot build."""
    suite, runs, user, workdir, env = None, [], "0", "/", []
    for number, line in _lines(text):
        word, _, rest = line.partition(" ")
        word, rest = word.upper(), rest.strip()
        where = f"{path}, line {number}"
        if word == "FROM":
            m = re.fullmatch(r"(?:docker\.io/)?(?:library/)?debian:([\w.-]+)", rest)
            if not m or m[1] not in SUITES:
                raise DockerfileError(f"{where}: FROM {rest!r}: the builder makes Debian bases "
                                      f"only: debian:{', debian:'.join(SUITES)}")
            suite = SUITES[m[1]]
        elif suite is None:
            raise DockerfileError(f"{where}: {word} before FROM")
        elif word == "RUN":
            if rest.startswith("["):
                raise DockerfileError(f"{where}: RUN in exec form; write it as a shell command")
            runs.append(rest)
        elif word == "USER":
            user = rest
        elif word == "WORKDIR":
            workdir = rest
        elif word == "ENV":
            for item in shlex.split(rest):
                key, sep, value = item.partition("=")
                if not sep:
                    raise DockerfileError(f"{where}: ENV {item!r}: write KEY=VALUE")
                env.append((key, value))
        else:
            raise DockerfileError(f"{where}: {word} is not one of FROM, RUN, USER, WORKDIR, "
                                  "ENV (what the builder does)")
    if suite is None:
        raise DockerfileError(f"{path}: no FROM line")
    return Recipe(suite, tuple(runs), user, workdir, tuple(env))
