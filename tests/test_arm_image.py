"""The engine image for a Raspberry Pi (arm64, and arm: 32-bit ARMv7), built here without
running any ARM code (Debian's ARM packages unpacked), and proof that it works: its ddsperf,
run by Debian's qemu-user-static, measures against this machine's own ddsperf, as k8sdds
would run them (the engine's own argv and configuration, its parser on the output)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest

from k8sdds.images.dockerfile import DockerfileError, parse
from k8sdds.images.foreign import packages

from .builds import ARM_ENGINES, needs
from .emulated_support import cli, host_mounts

ROOT = Path(__file__).parent.parent
# Debian's qemu-user-static, run directly: no binfmt handler is registered for it
QEMU = {"arm64": "qemu-aarch64-static", "arm": "qemu-arm-static"}
ELF_MACHINE = {"arm64": 0xB7, "arm": 0x28}  # EM_AARCH64, EM_ARM


def test_a_foreign_build_takes_the_packages_of_the_dockerfile():
    recipe = parse((ROOT / "docker" / "Dockerfile").read_text())
    found = packages(recipe, "arm64")
    assert found[:2] == ("cyclonedds-tools", "libddsc0debian") and "iperf3" in found
    assert not any(p.startswith("-") for p in found)


@pytest.mark.parametrize("step, says", [
    ("make install", "would run arm64 code"),
    ("apt-get install -y x && ./configure", "'./configure' would run arm64 code"),
    ("pip install numpy", "would run arm64 code"),
    ("echo 'unbalanced", "No closing quotation")])
def test_a_foreign_build_refuses_a_step_that_would_run_arm_code(step, says):
    recipe = parse(f"FROM debian:bookworm\nRUN apt-get update && {step}\n")
    with pytest.raises(DockerfileError, match=f"Dockerfile, RUN step 1: .*{says}"):
        packages(recipe, "arm64", "Dockerfile")


def _reason() -> str | None:
    if os.geteuid() != 0:
        return "needs root (debootstrap, network namespaces)"
    lacking = [t for t in ("debootstrap", "umoci", "skopeo", "ip", "ddsperf", *QEMU.values())
               if shutil.which(t) is None]
    return f"needs {', '.join(lacking)} (make test installs them)" if lacking else None


def _binfmt() -> list[str]:
    where = Path("/proc/sys/fs/binfmt_misc")
    return sorted(p.name for p in where.iterdir()) if where.is_dir() else []


def _unpack(archive: Path, rootfs: Path) -> dict:
    with tarfile.open(archive) as tf:
        [entry] = json.load(tf.extractfile("manifest.json"))
        config = json.load(tf.extractfile(entry["Config"]))
        rootfs.mkdir()
        for layer in entry["Layers"]:
            with tarfile.open(fileobj=tf.extractfile(layer)) as lt:
                lt.extractall(rootfs, filter="fully_trusted")
    return config


def _roles(tmp_path: Path, latency: bool) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Each role's argv and environment as k8sdds' ddsperf engine makes them, on loopback."""
    from k8sdds.engines.base import RoleContext
    from k8sdds.engines.ddsperf import Ddsperf
    from k8sdds.model import Test

    test = Test(row=0, line=2, data_len=64 if latency else 1024, multicast=False,
                num_subscribers=1, best_effort=False, batch_size=0, duration=3,
                latency_test=latency)
    out = {}
    for role in ("pub", "sub"):
        ctx = RoleContext(role, "127.0.0.1", "lo", {"pub": "127.0.0.1", "sub": "127.0.0.1"},
                          "peers", str(tmp_path))
        cmd = Ddsperf().command(test, ctx)
        for name, text in cmd.files.items():
            (tmp_path / name).write_text(text)
        out[role] = (list(cmd.argv), dict(cmd.env))
    return out


@pytest.mark.image
@needs(*ARM_ENGINES, why=_reason)
@pytest.mark.parametrize("arch, arm_role, latency", [("arm64", "pub", False),
                                                     ("arm", "sub", True)])
def test_the_arm_image_s_ddsperf_measures_against_this_machine_s(arch, arm_role, latency,
                                                                   tmp_path):
    from k8sdds.parsers.ddsperf import parse as parse_ddsperf

    before = (host_mounts(), _binfmt())
    archive = tmp_path / f"engines-{arch}.tar"
    done = cli("image", "build", "--arch", arch, "--out", str(archive), cwd=ROOT,
               timeout=1800, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    assert (host_mounts(), _binfmt()) == before  # nothing mounted or registered
    rootfs = tmp_path / "rootfs"
    config = _unpack(archive, rootfs)
    assert config["architecture"] == arch and config["config"]["User"] == "65532:65532"
    ddsperf = rootfs / "usr/bin/ddsperf"
    head = ddsperf.read_bytes()[:20]
    assert head[:4] == b"\x7fELF" and head[18] == ELF_MACHINE[arch]  # an ARM binary
    assert (rootfs / "proc").is_dir() and not (rootfs / "proc").is_symlink()

    ns = f"k8sdds-arm-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        procs = {}
        for role, (argv, env) in _roles(tmp_path, latency).items():
            if role == arm_role:  # the ARM binary, its libraries from the image
                argv = [QEMU[arch], "-L", str(rootfs), str(ddsperf), *argv[1:]]
            procs[role] = subprocess.Popen(
                ["ip", "netns", "exec", ns, *argv], env={**os.environ, **env},
                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        outs = {role: p.communicate(timeout=120)[0] for role, p in procs.items()}
    finally:
        subprocess.run(["ip", "netns", "delete", ns], check=True)
    measured = "pub" if latency else "sub"  # ping measures the round trip; sub the rate
    parsed = parse_ddsperf(outs[measured], measured, latency)
    assert parsed.failure is None, outs
    metric = "latency_us_p50" if latency else "throughput_mbps"
    print(f"{arch} {arm_role} under qemu-user, {measured} measured {metric} "
          f"{parsed.summary(metric)}", file=sys.stderr)  # the figure (seen with -s)
    assert (parsed.summary(metric) or 0) > 0, outs[measured][-2000:]
    assert _binfmt() == before[1]


def _elf_machine(path: Path) -> int:
    head = path.read_bytes()[:20]
    assert head[:4] == b"\x7fELF", path
    return head[18]


def _await_listening(pid: int, port: int, timeout: float = 30) -> None:
    """Until process `pid` listens on TCP `port` (as the runner waits before the driver)."""
    from k8sdds.testbed import netns

    deadline = time.monotonic() + timeout
    while not netns.listening(pid, port):
        assert time.monotonic() < deadline, f"nothing listened on {port} within {timeout} s"
        time.sleep(0.05)


def _middleware_roles(engine: str, tmp_path: Path) -> dict[str, list[str]]:
    """broker (mqtt only), sub0 and pub argv as k8sdds' engine makes them, on loopback."""
    from k8sdds.engines import registry
    from k8sdds.engines.base import RoleContext
    from k8sdds.model import Test

    eng = registry()[engine]
    test = Test(row=0, line=2, data_len=1024, multicast=False, num_subscribers=1,
                best_effort=False, batch_size=0, duration=2, engine=engine, transport="tcp")
    roles = list(eng.roles(test))
    out = {}
    for role in roles[1:] + roles[:1]:  # the broker first, the publisher last
        ctx = RoleContext(role, "127.0.0.1", "lo", dict.fromkeys(roles, "127.0.0.1"), "peers",
                          str(tmp_path))
        cmd = eng.command(test, ctx)
        for name, text in cmd.files.items():
            (tmp_path / name).write_text(text)
        out[role] = list(cmd.argv)
    return out


@pytest.mark.image
@needs(*ARM_ENGINES, why=_reason)
@pytest.mark.parametrize("arch", ["arm64", "arm"])
def test_the_arm_image_carries_the_engines_k8sdds_builds_and_they_measure(arch, tmp_path):
    """mosquitto (Debian's, for the Pi) and k8sdds-mqtt in the image; its ARM subscriber,
    run by qemu-user, counts what this machine's publisher sends through this machine's
    broker; on arm64 the same for k8sdds-zenoh."""
    from k8sdds.engines import registry
    from k8sdds.engines.base import engine_bin, engine_path
    from k8sdds.images.foreign import DEBIAN

    from .parsers_support import PARSERS

    archive = tmp_path / f"engines-{arch}.tar"
    done = cli("image", "build", "--arch", arch, "--out", str(archive), cwd=ROOT,
               timeout=1800, env={**os.environ, "COLUMNS": "200"})
    assert done.returncode == 0, done.stderr
    rootfs = tmp_path / "rootfs"
    _unpack(archive, rootfs)
    assert _elf_machine(rootfs / "usr/sbin/mosquitto") == ELF_MACHINE[arch]
    engines = ["mqtt"]
    if (engine_bin() / f"k8sdds-zenoh-{DEBIAN[arch]}").exists():  # make engines, with the
        engines.append("zenoh")  # cross gcc (make test installs it): arm64
    assert arch != "arm64" or "zenoh" in engines, "make test builds k8sdds-zenoh for arm64"
    for engine in engines:
        client = rootfs / "usr/local/bin" / f"k8sdds-{engine}"
        assert _elf_machine(client) == ELF_MACHINE[arch]  # the Pi's build, not this machine's
        ns = f"k8sdds-arm-{engine}-{os.getpid()}"
        subprocess.run(["ip", "netns", "add", ns], check=True)
        procs = {}
        try:
            subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
            for role, argv in _middleware_roles(engine, tmp_path).items():
                if role == "sub0":  # the ARM client, under qemu-user
                    argv = [QEMU[arch], "-L", str(rootfs), str(client), *argv[1:]]
                procs[role] = subprocess.Popen(
                    ["ip", "netns", "exec", ns, *argv], env={**os.environ, "PATH": engine_path()},
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                if role == next(iter(procs)):  # the first follower listens (broker, peer)
                    _await_listening(procs[role].pid, registry()[engine].listen_port)
            procs["pub"].communicate(timeout=120)
            time.sleep(1.5)
            for p in procs.values():
                p.terminate()
            out = procs["sub0"].communicate(timeout=30)[0]
        finally:
            for p in procs.values():
                p.kill()
            subprocess.run(["ip", "netns", "delete", ns], check=True)
        parsed = PARSERS[engine](out, "sub0", False)
        assert parsed.failure is None, out[-2000:]
        print(f"{arch} k8sdds-{engine} sub0 under qemu-user: "
              f"{parsed.summary('throughput_mbps')} Mb/s", file=sys.stderr)
        assert (parsed.summary("throughput_mbps") or 0) > 0 and parsed.summary("lost") == 0
