"""What this kernel offers the emulated testbed, detected by trying, never assumed."""

from __future__ import annotations

import functools
import os
import secrets

from k8sdds.cluster.netns import run

_PROBE_ARGS = {"vxlan": ["id", "1", "dstport", "4789"]}


@functools.cache
def link_type(kind: str) -> str | None:
    """None if the kernel can create a `kind` link, else why not (one line)."""
    if os.geteuid() != 0:
        return "needs root to probe"
    ns = f"k8sdds-probe-{secrets.token_hex(3)}"
    if run(["ip", "netns", "add", ns], check=False).returncode != 0:
        return "cannot create a network namespace"
    try:
        proc = run(["ip", "-n", ns, "link", "add", "probe0", "type", kind,
                    *_PROBE_ARGS.get(kind, [])], check=False)
        if proc.returncode == 0:
            return None
        return f"the kernel has no {kind} link type ({proc.stderr.strip() or 'refused'})"
    finally:
        run(["ip", "netns", "del", ns], check=False)


def datapath_unavailable(kernel_links: tuple[str, ...]) -> str | None:
    """Why a datapath needing these link types cannot be emulated here, or None."""
    for kind in kernel_links:
        reason = link_type(kind)
        if reason:
            return reason
    return None
