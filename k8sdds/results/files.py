"""Atomic file writes: a killed run leaves either the old or the new file, never half; and
appends of whole lines, of which a killed run leaves at most a torn last line that every
reader drops."""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path


def atomic_write(path: Path, data: str | bytes | Iterable[bytes], mode: int | None = None
                 ) -> None:
    """Replace `path` with `data` (text, bytes, or pieces of bytes written as they come) in
    one step; readable as the umask allows, or with `mode` (0o600 for secrets)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes 0600, which is already right for secrets; results are for reading
        os.fchmod(fd, mode if mode is not None else 0o666 & ~_umask())
        text = isinstance(data, str)
        with os.fdopen(fd, "w" if text else "wb", **({"newline": ""} if text else {})) as fh:
            for piece in (data,) if isinstance(data, (str, bytes)) else data:
                fh.write(piece)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def append_lines(path: Path, data: str) -> None:
    """Add whole lines to the end of `path` (made if absent, never through a link) without
    rewriting it: one write, synced. A torn last line left by a killed writer is cut first."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    try:
        end = os.lseek(fd, 0, os.SEEK_END)
        if end and os.pread(fd, 1, end - 1) != b"\n":
            os.ftruncate(fd, whole_lines_end(fd, end))
        os.lseek(fd, 0, os.SEEK_END)
        payload = data.encode()
        while payload:
            payload = payload[os.write(fd, payload):]
        os.fsync(fd)
    finally:
        os.close(fd)


def whole_lines_end(fd: int, end: int) -> int:
    """The offset just after the last newline before `end` (0 if none)."""
    pos = end
    while pos > 0:
        start = max(0, pos - 65536)
        block = os.pread(fd, pos - start, start)
        cut = block.rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        pos = start
    return 0


def whole_lines(text: str) -> str:
    """`text` without a torn last line (one with no newline)."""
    return text if not text or text.endswith("\n") else text[:text.rfind("\n") + 1]


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def sha256(path: Path) -> str:
    """The file's SHA-256, read in blocks (image archives are hundreds of MB)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
