"""Which program a node that runs its board's own builds starts, and how (qemu-user)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from k8sdds.errors import UserError
from k8sdds.testbed import userspace


def _file(path):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\x7fELF")
    return path


def test_the_root_s_program_is_found_as_a_shell_s_path_would(tmp_path, monkeypatch):
    root, built = tmp_path / "root", tmp_path / "bin"
    built.mkdir()
    monkeypatch.setenv("K8SDDS_ENGINE_BIN", str(built))
    _file(root / "usr/sbin/mosquitto")
    first = _file(root / "usr/bin/ddsperf")
    _file(root / "sbin/ddsperf")
    assert userspace.program("ddsperf", "armhf", root) == first
    assert userspace.program("/usr/sbin/mosquitto", "armhf", root) == \
        root / "usr/sbin/mosquitto"


def test_k8sdds_own_build_for_the_board_comes_before_the_root_s(tmp_path, monkeypatch):
    root, built = tmp_path / "root", tmp_path / "bin"
    monkeypatch.setenv("K8SDDS_ENGINE_BIN", str(built))
    _file(root / "usr/bin/perftest_cpp")
    own = _file(built / "perftest_cpp-armhf")
    _file(built / "perftest_cpp")  # this machine's: never run on the board
    assert userspace.program(str(built / "perftest_cpp"), "armhf", root) == own


def test_wrap_runs_the_board_s_program_under_qemu_user_with_its_libraries(tmp_path,
                                                                          monkeypatch):
    root = tmp_path / "root"
    monkeypatch.setenv("K8SDDS_ENGINE_BIN", str(tmp_path / "bin"))
    _file(root / "usr/bin/ddsperf")
    argv = userspace.wrap(["ddsperf", "-D", "5", "pub", "inf"], "armhf", root)
    assert argv[1:] == ["-L", str(root), str(root / "usr/bin/ddsperf"), "-D", "5", "pub",
                        "inf"]
    # qemu-user under the program's name, so the process is named after the program
    launcher = Path(argv[0])
    assert launcher.name == "ddsperf" and launcher.is_symlink()
    assert Path(os.readlink(launcher)).name == "qemu-arm-static"
    _file(tmp_path / "r64/usr/bin/ddsperf")
    arm64 = Path(userspace.wrap(["ddsperf"], "arm64", tmp_path / "r64")[0])
    assert Path(os.readlink(arm64)).name == "qemu-aarch64-static"


def test_a_program_the_board_has_no_build_of_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.setenv("K8SDDS_ENGINE_BIN", str(tmp_path / "bin"))
    with pytest.raises(UserError) as info:
        userspace.wrap(["k8sdds-zenoh", "pub"], "armhf", tmp_path / "root")
    assert "k8sdds-zenoh has no armhf build here" in str(info.value)


def test_an_architecture_without_qemu_user_is_named():
    assert "not mips" in userspace.unavailable("mips")


def test_an_engine_k8sdds_builds_is_refused_where_its_board_build_is_missing(tmp_path,
                                                                             monkeypatch):
    monkeypatch.setenv("K8SDDS_ENGINE_BIN", str(tmp_path))
    unbuilt = userspace.unbuilt({"armhf"})
    assert "k8sdds-mqtt is not built for armhf" in unbuilt["mqtt"]
    assert "perftest_cpp is not built for armhf" in unbuilt["rtiperftest"]
    assert "zenoh" not in unbuilt  # built for amd64 and arm64 only: its own refusal
    assert "ddsperf" not in unbuilt  # Debian's, in the board's user space
    _file(tmp_path / "k8sdds-mqtt-armhf")
    assert "mqtt" not in userspace.unbuilt({"armhf"})
