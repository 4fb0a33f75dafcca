"""The pure parts of `k8sdds vm`: qemu's command, the seed, the names, the checks of what a
user gives, and what the disk holds (no machine booted: tests/test_kubeadm_real.py boots
one and joins it to a cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from k8sdds.errors import UserError
from k8sdds.vm import image, machine
from k8sdds.vm.image import BOARDS, Disk
from k8sdds.vm.machine import Spec

from .cli_support import invoke

SPEC = Spec("arm1", "10.252.0.14/24", "10.252.0.1", "kkbr", "ssh-ed25519 AAAA test\n",
            cpus=1)


def test_qemu_emulates_a_pi_3s_core_with_the_disk_the_seed_and_a_tap():
    disk = Disk(Path("/cache/vm/d"), BOARDS["arm64"])
    argv = machine.qemu_argv(disk, SPEC, Path("/m/layer.qcow2"), Path("/m/seed.img"),
                             Path("/m/console.log"))
    assert argv[:9] == ["qemu-system-aarch64", "-M", "virt", "-cpu", "cortex-a53", "-smp",
                        "1", "-m", "1024"]
    assert argv[argv.index("-kernel") + 1] == "/cache/vm/d/vmlinuz"
    assert argv[argv.index("-initrd") + 1] == "/cache/vm/d/initrd.img"
    cmdline = argv[argv.index("-append") + 1].split()
    assert "root=LABEL=k8sdds-root" in cmdline and "console=ttyAMA0" in cmdline
    assert "if=none,id=root,file=/m/layer.qcow2,format=qcow2" in argv
    assert "if=none,id=seed,file=/m/seed.img,format=raw,readonly=on" in argv
    tap = machine.tap_name("arm1")
    assert f"tap,id=net,ifname={tap},script=no,downscript=no" in argv
    assert "-serial" in argv and argv[argv.index("-serial") + 1] == "file:/m/console.log"


def test_a_machine_has_a_pis_four_cores_as_threads_at_most_this_machines(monkeypatch):
    disk = Disk(Path("/cache/vm/d"), BOARDS["arm64"])
    for here, cores in ((16, 4), (4, 4), (2, 2), (1, 1), (None, 1)):
        monkeypatch.setattr("os.cpu_count", lambda here=here: here)
        spec = Spec("arm1", "10.252.0.14/24", "10.252.0.1", "kkbr", "ssh-ed25519 AAAA t\n")
        argv = machine.qemu_argv(disk, spec, Path("/l"), Path("/s"), Path("/c"))
        assert argv[argv.index("-smp") + 1] == str(cores), here
    assert argv[argv.index("-accel") + 1] == "tcg,thread=multi"  # one host thread a core
    with pytest.raises(UserError, match="9 CPUs; 1 to 8"):
        Spec("arm1", "10.252.0.14/24", "10.252.0.1", "kkbr", "k\n", cpus=9).check()


def test_the_32_bit_board_is_a_pi_2s_core_on_qemu_system_arm():
    from dataclasses import replace

    disk = Disk(Path("/cache/vm/d"), BOARDS["armhf"])
    argv = machine.qemu_argv(disk, replace(SPEC, arch="armhf"), Path("/m/layer.qcow2"),
                             Path("/m/seed.img"), Path("/m/console.log"))
    assert argv[:5] == ["qemu-system-arm", "-M", "virt", "-cpu", "cortex-a7"]
    assert BOARDS["armhf"].kernel == "linux-image-armmp-lpae"  # the A7 has LPAE


# QEMU's scripts/qemu-binfmt-conf.sh (and Debian's /usr/share/binfmts/qemu-*): the ELF header
# of each architecture's executables, and the mask applied before comparing
ELF = {
    "arm64": (r"\x7f\x45\x4c\x46\x02\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00"
              r"\x02\x00\xb7\x00",
              r"\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff"
              r"\xfe\xff\xff\xff"),
    "armhf": (r"\x7f\x45\x4c\x46\x01\x01\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00"
              r"\x02\x00\x28\x00",
              r"\xff\xff\xff\xff\xff\xff\xff\x00\xff\xff\xff\xff\xff\xff\xff\xff"
              r"\xfe\xff\xff\xff"),
}


@pytest.mark.parametrize("arch", sorted(ELF))
def test_each_board_registers_qemus_own_binfmt_magic(arch):
    assert BOARDS[arch].elf == ELF[arch]


def test_names_fit_a_link_and_macs_are_local_and_stable():
    assert len(machine.tap_name("a-very-long-machine-name-indeed")) <= 15
    assert machine.tap_name("arm1") != machine.tap_name("arm2")
    mac = machine.mac_of("arm1")
    assert mac == machine.mac_of("arm1") and mac.startswith("52:54:00:")
    assert int(mac.split(":")[0], 16) & 0b10  # locally administered


def test_the_seed_carries_the_machines_own_settings():
    files = machine.seed_files(SPEC, "PRIVATE\n", "ssh-ed25519 HOSTKEY arm1\n")
    assert files == {"hostname": "arm1\n", "address": "10.252.0.14/24\n",
                     "gateway": "10.252.0.1\n", "authorized_keys": "ssh-ed25519 AAAA test\n",
                     "ssh_host_ed25519_key": "PRIVATE\n",
                     "ssh_host_ed25519_key.pub": "ssh-ed25519 HOSTKEY arm1\n"}


@pytest.mark.parametrize("change, message", [
    ({"name": "arm 1"}, "letters, digits and '-'"),
    ({"address": "10.252.0.14"}, "with its prefix length"),
    ({"address": "fd00::5/64", "gateway": "fd00::1"}, "must be IPv4"),
    ({"gateway": "10.9.0.1"}, "in its network"),
    ({"gateway": "gateway"}, "does not appear to be an IPv4 or IPv6 address"),
    ({"arch": "riscv64"}, "one of arm64"),
    ({"authorized_keys": " \n"}, "no authorized key"),
])
def test_a_bad_machine_is_refused_before_anything_is_made(change, message):
    from dataclasses import replace

    with pytest.raises(UserError, match=message):
        replace(SPEC, **change).check()


def test_the_disk_has_a_seed_read_before_sshd_and_no_node_part():
    """A fresh Raspberry Pi OS: sshd, no kubelet, no container runtime, no CNI plugin (they
    come by `k8sdds cluster install`, in the Pi tutorial's test)."""
    files = image.FILES
    seed = files["etc/systemd/system/k8sdds-seed.service"][0]
    assert "Before=" in seed and "ssh.service" in seed.split("Before=")[1].splitlines()[0]
    assert files["usr/local/sbin/k8sdds-seed"][1] == 0o755
    for part in ("containerd", "runc", "containernetworking-plugins", "kubelet", "kubeadm"):
        assert part not in image.PACKAGES
        assert not any(part in path for path in files)
    assert "kubelet" not in image.SETTLE and "/opt/cni" not in image.SETTLE


def test_the_packages_listing_is_read_from_dpkgs_status(tmp_path):
    status = tmp_path / "var/lib/dpkg/status"
    status.parent.mkdir(parents=True)
    status.write_text("Package: zlib1g\nStatus: install ok installed\nVersion: 1:1.2.13\n\n"
                      "Package: bash\nVersion: 5.2.15-2+b7\nDescription: x\n y\n")
    assert image._packages(tmp_path) == "bash 5.2.15-2+b7\nzlib1g 1:1.2.13\n"


def test_vm_down_of_an_unknown_machine_says_so():
    done = invoke("vm", "down", "no-such-machine")
    assert done.returncode == 2 and "no machine no-such-machine" in done.stderr


def test_vm_up_refuses_a_bad_address_before_building_anything(tmp_path):
    key = tmp_path / "id.pub"
    key.write_text("ssh-ed25519 AAAA test\n")
    done = invoke("vm", "up", "arm1", "--bridge", "kkbr", "--address", "10.252.0.14",
                  "--gateway", "10.252.0.1", "--authorized-key", str(key))
    assert done.returncode == 2 and "with its prefix length" in done.stderr


def test_the_cached_disk_is_named_by_what_goes_into_it():
    from dataclasses import replace

    board = BOARDS["arm64"]
    first = image.recipe(board)
    assert image.recipe(board) == first
    assert image.recipe(replace(board, kernel="linux-image-rt-arm64")) != first
    assert image.recipe(BOARDS["armhf"]) != first
