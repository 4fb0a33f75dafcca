"""Atomic file writes: a killed run leaves either the old or the new file, never half."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path


def atomic_write(path: Path, data: str | bytes, mode: int | None = None) -> None:
    """Replace `path` with `data` in one step; readable as the umask allows, or with `mode`
    (0o600 for secrets)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes 0600, which is already right for secrets; results are for reading
        os.fchmod(fd, mode if mode is not None else 0o666 & ~_umask())
        with os.fdopen(fd, "wb" if isinstance(data, bytes) else "w",
                       **({} if isinstance(data, bytes) else {"newline": ""})) as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


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
