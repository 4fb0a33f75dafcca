#!/usr/bin/env python3
"""Build RTI Perftest's C++ program (`perftest_cpp`) on Eclipse Cyclone DDS, from a Perftest
source tree the user brings (a clone of github.com/rticommunity/rtiperftest, or an archive of
one), with k8sdds' implementation of Perftest's middleware interface (CycloneDDSImpl.cxx here)
and Perftest's types compiled from its srcIdl/perftest.idl by Cyclone's `idlc`.

Perftest's sources compile unchanged but for two files, edited in the build directory (never
in the user's tree) in three places, each guarded by PERFTEST_CYCLONEDDS:
  1. perftest_cpp.cxx, where Perftest picks its middleware: a branch that makes the Cyclone
     DDS one;
  2. perftest_cpp.cxx, where Perftest zeroes -batchSize for middlewares other than RTI
     Connext Professional: the Cyclone DDS build is left out (Cyclone batches writes,
     Internal/WriteBatch);
  3. ParameterManager.cxx, where Perftest lists the values of -transport (UDPv4 and SHMEM
     outside RTI Connext Professional): TCP and TLS are added (Cyclone's TCP transport, and
     with SSL on it).
Everything else a middleware's generated code gives Perftest comes from prelude.h. Two of
RTI's macros are defined, as RTI's own build defines them: RTI_LINUX, the platform (Perftest's
CPU monitor reads /proc with it), and RTI_SECURE_PERFTEST, which gives Perftest its -secure
options and its PerftestSecurity class (srcCpp/connextDDS/PerftestSecurity.cxx, which reads
the options and applies Perftest's defaults: no RTI code in it), mapped to Cyclone's DDS
Security plugins in CycloneDDSImpl.cxx.

An earlier build of the same architecture is removed when a new one is linked.

The binary looks for its libraries first in debian-ARCH/lib beside itself (an RPATH,
$ORIGIN/debian-ARCH/lib, which also serves the libraries those load): where `k8sdds cluster
engines` has put Debian's Cyclone DDS with its libraries into a host's engine_bin (the folder
k8sdds.images.debian_engines.folder names), an air-gapped host without Cyclone DDS runs it;
anywhere else the folder is absent and the system's libraries are used.

The binary is cached by its inputs: BIN/perftest_cpp-cyclonedds-ARCH-HASH, and BIN/perftest_cpp
(BIN/perftest_cpp-ARCH for another architecture) points at it.

Usage: engines/perftest/build.py SRC [--bin DIR] [--arch amd64|arm64|armhf]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from cyclone_toolchain import (  # noqa: E402 - engines/, beside this folder
    BuildError,
    add_options,
    host_arch,
    linked_to,
    publish,
    run,
    toolchain,
)

HERE = Path(__file__).resolve().parent
OURS = (HERE / "CycloneDDSImpl.cxx", HERE / "prelude.h", Path(__file__).resolve(),
        HERE.parent / "cyclone_toolchain.py")
# what the build takes from a Perftest tree (relative to its root)
NEEDED = ("srcCpp/perftest_cpp.cxx", "srcCpp/perftest_cpp.h", "srcCpp/MessagingIF.h",
          "srcCpp/Infrastructure_common.cxx", "srcCpp/PerftestTransport.cxx",
          "srcCpp/connextDDS/PerftestSecurity.cxx", "srcCpp/connextDDS/PerftestSecurity.h",
          "srcCppCommon/ParameterManager.cxx", "srcIdl/perftest.idl")
COMMON = ("CpuMonitor", "FileDataLoader", "Parameter", "ParameterManager", "PerftestPrinter",
          "ThreadPriorities")
# the edits, per file: (what is there, what it becomes, where)
EDITS = {
    "srcCpp/perftest_cpp.cxx": (
        ("  #else // No middleware is passed as -DPERFTEST_...",
         "  #elif defined(PERFTEST_CYCLONEDDS)\n"
         "    _MessagingImpl = CycloneDDSImpl_new(_PM);\n"
         "  #else // No middleware is passed as -DPERFTEST_...",
         "where Perftest picks its middleware"),
        ("  #if !defined(PERFTEST_RTI_PRO) && !defined(RTI_PERF_TSS_PRO)\n"
         "    _PM.set(\"batchSize\", 0);",
         "  #if !defined(PERFTEST_RTI_PRO) && !defined(RTI_PERF_TSS_PRO) "
         "&& !defined(PERFTEST_CYCLONEDDS)\n"
         "    _PM.set(\"batchSize\", 0);",
         "where Perftest turns -batchSize off for other middlewares"),
    ),
    "srcCppCommon/ParameterManager.cxx": (
        ("    transport->add_valid_str_value(\"SHMEM\");\n",
         "    transport->add_valid_str_value(\"SHMEM\");\n"
         "  #ifdef PERFTEST_CYCLONEDDS\n"
         "    transport->add_valid_str_value(\"TCP\");\n"
         "    transport->add_valid_str_value(\"TLS\");\n"
         "  #endif\n",
         "where Perftest lists the values of -transport"),
    ),
}
def source_root(src: Path, work: Path) -> Path:
    """The Perftest tree: `src` itself, or the one folder an archive of it holds."""
    if not src.exists():
        raise BuildError(f"{src}: no such file or directory (give a clone of "
                         "github.com/rticommunity/rtiperftest, or an archive of one)")
    if src.is_file():
        try:
            with tarfile.open(src) as archive:
                archive.extractall(work / "src", filter="data")
        except (tarfile.TarError, OSError) as exc:
            raise BuildError(f"{src}: not a readable tar archive ({exc})") from None
        src = work / "src"
    candidates = [src, *sorted(p for p in src.iterdir() if p.is_dir())]
    for root in candidates:
        if (root / "srcCpp" / "perftest_cpp.cxx").is_file():
            missing = [n for n in NEEDED if not (root / n).is_file()]
            if missing:
                raise BuildError(f"{root}: not a Perftest source tree of the layout this "
                                 f"build knows: missing {', '.join(missing)}")
            return root
    raise BuildError(f"{src}: no srcCpp/perftest_cpp.cxx in it or in a folder under it: not "
                     "an RTI Perftest source tree")


def digest(root: Path, tools: dict[str, str]) -> str:
    """A hash of every input: Perftest's sources, ours, the compiler's version."""
    h = hashlib.sha256()
    files = sorted([*(root / "srcCpp").glob("*.[ch]*"), *(root / "srcCppCommon").glob("*"),
                    *(root / "srcCpp" / "connextDDS").glob("PerftestSecurity.*"),
                    root / "srcIdl" / "perftest.idl", *OURS])
    for path in files:
        if path.is_file():
            h.update(path.name.encode() + b"\0" + path.read_bytes())
    version = subprocess.run([tools["cxx"], "--version"], capture_output=True, text=True)
    h.update(version.stdout.encode())
    h.update(Path(tools["version"]).read_bytes())
    return h.hexdigest()[:12]


def edited(name: str, text: str) -> str:
    """A Perftest file with its edits; a BuildError where its layout differs."""
    for before, after, where in EDITS[name]:
        if text.count(before) != 1:
            raise BuildError(f"{name}: {where} is not where this build "
                             f"expects it ({before.splitlines()[-1].strip()!r} found "
                             f"{text.count(before)} times, 1 expected): another Perftest "
                             "version? This build knows release 4.x")
        text = text.replace(before, after)
    return text


def build(src: Path, bin_dir: Path, arch: str, say=print) -> Path:
    """Build (or find cached) perftest_cpp for `arch`; return the link roles run."""
    tools = toolchain(arch, say)
    suffix = "" if arch == host_arch() else f"-{arch}"
    with tempfile.TemporaryDirectory(prefix="k8sdds-perftest-") as tmp:
        work = Path(tmp)
        root = source_root(src.resolve(), work)
        name = f"perftest_cpp-cyclonedds-{arch}-{digest(root, tools)}"
        target = bin_dir / name
        link = bin_dir / f"perftest_cpp{suffix}"
        if not target.is_file():
            started = time.monotonic()
            say(f"building RTI Perftest (perftest_cpp) on Cyclone DDS for {arch} from "
                f"{src} (cached in {bin_dir})")
            out = work / "build"
            out.mkdir()
            for name in EDITS:  # edited copies in the build directory, never the user's
                (out / Path(name).name).write_text(edited(name, (root / name).read_text()))
            idl = root / "srcIdl" / "perftest.idl"
            run([tools["idlc"], "-l", "c", "-o", str(out), str(idl)], out, idl.name)
            flags = ["-std=c++11", "-O2", "-DPERFTEST_CYCLONEDDS", "-DRTI_LINUX",
                     "-DRTI_SECURE_PERFTEST", "-include", str(HERE / "prelude.h"),
                     f"-I{out}", f"-I{root / 'srcCpp'}", f"-I{root / 'srcCpp' / 'connextDDS'}",
                     f"-I{root / 'srcCppCommon'}", *tools["includes"], "-w"]
            units = [out / "perftest_cpp.cxx", root / "srcCpp" / "Infrastructure_common.cxx",
                     root / "srcCpp" / "PerftestTransport.cxx",
                     root / "srcCpp" / "connextDDS" / "PerftestSecurity.cxx",
                     *(out / f"{n}.cxx" if (out / f"{n}.cxx").exists()
                       else root / "srcCppCommon" / f"{n}.cxx" for n in COMMON),
                     HERE / "CycloneDDSImpl.cxx"]
            jobs = [([tools["cxx"], *flags, "-c", "-o", str(out / f"{u.stem}.o"), str(u)],
                     u.name) for u in units]
            jobs.append(([tools["cc"], "-O2", *tools["includes"], "-c", "-o",
                          str(out / "perftest_types.o"), str(out / "perftest.c")],
                         "perftest.c (idlc's)"))
            with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
                for future in [pool.submit(run, job, out, what) for job, what in jobs]:
                    future.result()
            partial = target.with_name(target.name + ".partial")
            run([tools["cxx"], "-o", str(partial), *sorted(str(p) for p in out.glob("*.o")),
                 *tools["link"], *linked_to(arch), "-lpthread", "-s"], out, "the link")
            partial.replace(target)
            say(f"built {target.name} in {time.monotonic() - started:.0f} s")
        return publish(target, link, f"perftest_cpp-cyclonedds-{arch}-*")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("src", type=Path, help="RTI Perftest sources: a clone, or a tar "
                        "archive of one")
    add_options(parser)
    args = parser.parse_args(argv)
    args.bin.mkdir(parents=True, exist_ok=True)
    try:
        build(args.src, args.bin, args.arch)
    except BuildError as exc:
        print(f"engines/perftest/build.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
