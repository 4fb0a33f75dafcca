"""Who and what the service's pages and API hand out: a request bringing the token (its
Bearer header, or the login form's cookie), and a file inside the run folder reached
through no link."""

from __future__ import annotations

import hmac
from pathlib import Path

from fastapi import Request

COOKIE = "k8sdds_token"


def allowed(request: Request, token: str | None) -> bool:
    """No token set, or the request brings it (the login cookie, or a Bearer header)."""
    if token is None:
        return True
    header = request.headers.get("authorization", "").encode()
    cookie = request.cookies.get(COOKIE, "").encode()
    return (hmac.compare_digest(header, f"Bearer {token}".encode())
            or hmac.compare_digest(cookie, token.encode()))


def served(path: Path, out: Path) -> bool:
    """A file a page may hand out: a regular file, no link on the way from the run folder
    (`out`) to it, inside that folder."""
    try:
        inside = path.resolve().is_relative_to(Path(out).resolve())
    except OSError:
        return False
    return (inside and not path.is_symlink() and not path.parent.is_symlink()
            and path.is_file())
