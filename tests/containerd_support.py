"""Helpers for tests that read a real containerd's content store."""

from __future__ import annotations

import subprocess


def collect_garbage(ctr: list[str], tag: str) -> None:
    """Run containerd's garbage collection now, and wait for it.

    An import writes every blob of an archive; the blobs no image refers to (the other
    platform's manifest of a multi-arch archive) stay until the collector runs, which
    containerd schedules after enough changes, not after each import. Removing a throwaway
    tag with ``--sync`` runs the collection synchronously. `ctr` is the ``ctr`` argv up to
    the subcommand (address and namespace included).
    """
    spare = f"{tag}-collect"
    subprocess.run([*ctr, "images", "tag", "--force", tag, spare], capture_output=True,
                   text=True, check=True)
    subprocess.run([*ctr, "images", "rm", "--sync", spare], capture_output=True, text=True,
                   check=True)
