"""The one guarded way k8sdds reads a file it did not write just now: regular files only (a
FIFO would block, a device would never end), size limits before anything is parsed, UTF-8
errors named with file and line, YAML without aliases and with bounded nesting, and run
directories that hold only regular files and directories (no link is ever followed there)."""

from __future__ import annotations

import codecs
import errno
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from k8sdds.errors import UserError

MiB = 1 << 20
# the largest file of each kind k8sdds reads (a limit far above any real one)
LIMITS = {"schedule": 16 * MiB, "testbed spec": 4 * MiB, "inventory": 4 * MiB,
          "kubeadm configuration": 4 * MiB, "CNI manifest": 16 * MiB,
          "known_hosts": 16 * MiB, "manifest": 256 * MiB, "results": 4096 * MiB,
          "log": 1024 * MiB, "usage": MiB, "token": 64 << 10}
YAML_DEPTH = 32
RUN_DIR_ENTRIES = 1_000_000


class FileRefused(UserError):
    """A file k8sdds will not read as it is; names the file and why."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def read_bytes(path: str | Path, what: str, follow: bool = True,
               limit: int | None = None) -> bytes:
    """The bytes of a regular file (`follow=False`: a symbolic link is refused, not
    followed); FileRefused for anything else or for more than the kind's limit."""
    return b"".join(read_pieces(path, what, follow, limit))


def read_pieces(path: str | Path, what: str, follow: bool = True, limit: int | None = None,
                size: int = MiB) -> Iterator[bytes]:
    """The bytes of a regular file `size` at a time, as `read_bytes` checks them (checked
    when the file is opened, before the first piece): a long file read without holding it
    whole."""
    path = Path(path)
    limit = LIMITS.get(what, 64 * MiB) if limit is None else limit
    fd = _open(path, what, follow)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(f"{path}: {_kind(st.st_mode)}, not a regular file; the {what} "
                              "must be one")
        if st.st_size > limit:
            raise FileRefused(f"{path}: {st.st_size} bytes; a {what} may have at most {limit}")
    except BaseException:
        os.close(fd)
        raise
    return _pieces(fd, path, what, limit, size)


def _pieces(fd: int, path: Path, what: str, limit: int, size: int) -> Iterator[bytes]:
    try:
        got = 0
        while piece := os.read(fd, size):
            got += len(piece)
            if got > limit:  # it grew while read
                raise FileRefused(f"{path}: more than {limit} bytes; a {what} may not")
            yield piece
    finally:
        os.close(fd)


def _open(path: Path, what: str, follow: bool) -> int:
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= os.O_NOFOLLOW
    try:
        return os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise FileRefused(f"{path}: a symbolic link; k8sdds does not follow links in a "
                              f"{what}'s place") from None
        if exc.errno == errno.ENOENT:
            raise FileRefused(f"{path}: no such {what} file") from None
        reason = {errno.EISDIR: "a directory, not a file",
                  errno.EACCES: "permission denied"}.get(exc.errno, exc.strerror)
        raise FileRefused(f"{path}: cannot read the {what}: {reason}") from None


def read_head(path: str | Path, what: str, size: int, follow: bool = True) -> bytes:
    """The first `size` bytes of a regular file, checked as `read_bytes` checks it."""
    pieces = read_pieces(path, what, follow, size=size)
    try:
        return next(pieces, b"")
    finally:
        pieces.close()


def text_pieces(path: str | Path, what: str, follow: bool = True, size: int = 2 * MiB,
                advance: Callable[[int], None] | None = None) -> Iterator[str]:
    """A regular file's text a piece at a time, each piece ending at a line's end (a piece
    with no line's end in four times `size` is given as it is); bytes that are not UTF-8
    replaced, as an engine's output may hold them. `advance(n)`: n more bytes read."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    rest = ""
    for raw in read_pieces(path, what, follow, size=size):
        if advance is not None:
            advance(len(raw))
        rest += decoder.decode(raw)
        cut = rest.rfind("\n") + 1
        if not cut and len(rest) < 4 * size:
            continue
        cut = cut or len(rest)
        yield rest[:cut]
        rest = rest[cut:]
    rest += decoder.decode(b"", final=True)
    if rest:
        yield rest


def decode(data: bytes, path: str | Path, what: str) -> str:
    """UTF-8 text (a byte-order mark dropped); FileRefused naming the line of a bad byte."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise FileRefused(f"{path}, line {line}: not UTF-8 (byte 0x{data[exc.start]:02x}); "
                          f"save the {what} as UTF-8") from None


def read_text(path: str | Path, what: str, follow: bool = True) -> str:
    return decode(read_bytes(path, what, follow), path, what)


def load_yaml(path: str | Path, what: str, depth: int = YAML_DEPTH) -> Any:
    """A YAML file's data: no anchors or aliases (an alias bomb expands without bound), at
    most `depth` levels of nesting; FileRefused with the file and line otherwise."""
    import yaml

    text = read_text(path, what)
    loader = _loader(path, depth)(text)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}, line {mark.line + 1}, column {mark.column + 1}" if mark else str(path)
        raise FileRefused(f"{where}: not valid YAML: {exc.problem or exc.context}") from None
    except yaml.YAMLError as exc:
        raise FileRefused(f"{path}: not valid YAML: {exc}") from None
    finally:
        loader.dispose()


def _loader(path: str | Path, depth: int):
    import yaml

    class Loader(yaml.SafeLoader):
        level = 0

        def compose_node(self, parent, index):
            event = self.peek_event()
            where = f"{path}, line {event.start_mark.line + 1}"
            if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None):
                raise FileRefused(f"{where}: YAML anchors and aliases (&, *) are not allowed "
                                  "here (they can expand without bound); write the values out")
            self.level += 1
            if self.level > depth:
                raise FileRefused(f"{where}: nested more than {depth} levels deep")
            try:
                return super().compose_node(parent, index)
            finally:
                self.level -= 1

    return Loader


def check_tree(root: Path, what: str = "run directory") -> None:
    """Every entry under `root` is a regular file or a directory: a symbolic link, FIFO,
    socket or device is refused by its path (k8sdds reads and writes there, and must never
    be led elsewhere or blocked)."""
    root = Path(root)
    try:
        top = os.lstat(root)
    except OSError as exc:
        raise FileRefused(f"{root}: cannot read the {what}: {exc.strerror}") from None
    if not stat.S_ISDIR(top.st_mode):
        raise FileRefused(f"{root}: {_kind(top.st_mode)}, not a {what}")
    seen = 0
    for parent, dirs, files in os.walk(root, followlinks=False):
        for name in dirs + files:
            seen += 1
            if seen > RUN_DIR_ENTRIES:
                raise FileRefused(f"{root}: more than {RUN_DIR_ENTRIES} entries; not a {what}")
            entry = Path(parent) / name
            mode = os.lstat(entry).st_mode
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise FileRefused(f"{entry}: {_kind(mode)} in a {what}; k8sdds keeps only "
                                  "regular files and directories there and follows no link "
                                  "(remove it)")
