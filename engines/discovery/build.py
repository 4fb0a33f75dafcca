#!/usr/bin/env python3
"""Build k8sdds-discovery (discovery.c and its multicast probe, probe.c, here; its topic's
type from beat.idl by Cyclone's `idlc`) on Debian's Eclipse Cyclone DDS, for this machine
or a Pi (arm64, armhf: Debian's cross gcc and Cyclone DDS for that architecture, as the
Perftest build takes them).

The binary is cached by its inputs: BIN/k8sdds-discovery-ARCH-HASH, and BIN/k8sdds-discovery
(BIN/k8sdds-discovery-ARCH for another architecture) points at it; an earlier build of the
same architecture is removed when a new one is linked. A second run with nothing changed is a
check of a second.

Usage: engines/discovery/build.py [--bin DIR] [--arch amd64|arm64|armhf]
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import cyclone_toolchain as cyclone  # noqa: E402 - engines/, beside this folder

HERE = Path(__file__).resolve().parent
NAME = "k8sdds-discovery"
SOURCES = (HERE / "discovery.c", HERE / "probe.c", HERE / "probe.h", HERE / "beat.idl",
           Path(__file__).resolve(), HERE.parent / "cyclone_toolchain.py")


def digest(tools: dict) -> str:
    """A hash of every input: the sources, the compiler's version, Cyclone's version."""
    h = hashlib.sha256()
    for path in SOURCES:
        h.update(path.name.encode() + b"\0" + path.read_bytes())
    version = subprocess.run([tools["cc"], "--version"], capture_output=True, text=True)
    h.update(version.stdout.encode())
    h.update(Path(tools["version"]).read_bytes())
    return h.hexdigest()[:12]


def build(bin_dir: Path, arch: str, say=print) -> Path:
    """Build (or find cached) k8sdds-discovery for `arch`; return the link roles run."""
    tools = cyclone.toolchain(arch, say, needs=("cc", "idlc"))
    suffix = "" if arch == cyclone.host_arch() else f"-{arch}"
    target = bin_dir / f"{NAME}-{arch}-{digest(tools)}"
    link = bin_dir / f"{NAME}{suffix}"
    if not target.is_file():
        started = time.monotonic()
        say(f"building {NAME} on Cyclone DDS for {arch} (cached in {bin_dir})")
        with tempfile.TemporaryDirectory(prefix="k8sdds-discovery-") as tmp:
            out = Path(tmp)
            cyclone.run([tools["idlc"], "-l", "c", "-o", str(out), str(HERE / "beat.idl")],
                        out, "beat.idl")
            partial = target.with_name(target.name + ".partial")
            cyclone.run([tools["cc"], "-std=c11", "-O2", "-Wall", f"-I{out}", f"-I{HERE}",
                         *tools["includes"], "-o", str(partial), str(HERE / "discovery.c"),
                         str(HERE / "probe.c"), str(out / "beat.c"), *tools["link"],
                         *cyclone.linked_to(arch), "-s"],
                        out, "discovery.c")
            partial.replace(target)
        say(f"built {target.name} in {time.monotonic() - started:.1f} s")
    return cyclone.publish(target, link, f"{NAME}-{arch}-*")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    cyclone.add_options(parser)
    args = parser.parse_args(argv)
    args.bin.mkdir(parents=True, exist_ok=True)
    try:
        build(args.bin, args.arch)
    except cyclone.BuildError as exc:
        print(f"engines/discovery/build.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
