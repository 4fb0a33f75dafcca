"""Calibrated CPU budgets (pure parts): the search (scout, ladder, check), the board
figures, the calibration file, where a profile's budget comes from, what the emulator says
it cannot show; and the netlink messages that find a namespace's NAPI threads."""

from __future__ import annotations

import datetime as dt
import json
import os
import struct
from dataclasses import asdict, replace

import pytest

from k8sdds.errors import UserError
from k8sdds.testbed import calibration, cgroups, fidelity, napi
from k8sdds.testbed.calibrate import board_of, read_figures
from k8sdds.testbed.calibration import BOARDS, Calibration
from k8sdds.testbed.profiles import resolve

from .emulated_support import cli


def _curve(cpu: float) -> float:
    """A node's 1 KiB rate: 930 Mbit/s per CPU up to a knee under a 91 Mbit/s ceiling (what
    a 2-core EPYC VM measured, 2026-11-28: 0.03 CPU 28.2, 0.045 41.7, 0.09 86.5, 0.135
    90.8)."""
    return ((930.0 * cpu) ** -16 + 91.0 ** -16) ** (-1 / 16)


def test_search_scouts_then_fits_the_ladder_then_checks_the_budget():
    link, target = 97.1, 0.868 * 97.1
    found = calibration.search(_curve, target, link, rounds=3)
    kinds = [k for _, _, k in found.steps]
    # doubling from 0.01 until a quarter of the link, then two budgets in three rounds
    # (the scout's last step is the first round of one), then three checks
    assert kinds == ["scout"] * 3 + ["ladder"] * 5 + ["check"] * 3 or kinds[:8] == (
        ["scout"] * 3 + ["ladder"] * 5)
    assert [c for c, _, k in found.steps if k == "scout"] == [0.01, 0.02, 0.04]
    assert {c for c, _, k in found.steps if k == "ladder"} == {0.04, 0.06}
    # the line through the ladder undershoots the bend: a correction brings it in
    assert abs(_curve(found.cpu) - target) <= calibration.CLOSE * link
    assert found.measured == pytest.approx(_curve(found.cpu))
    scouts = [v for _, v, k in found.steps if k == "scout"]
    assert scouts == sorted(scouts)  # monotone


def test_a_noisy_ladder_out_of_order_is_said_not_hidden():
    # the scout's three steps as they are; then 0.06 CPU reads 0.6 of its rate every round
    noise = iter([1.0, 1.0, 1.0, 0.6, 1.0, 0.6, 0.6, 1.0] + [1.0] * 20)

    def measure(cpu: float) -> float:
        return _curve(cpu) * next(noise)

    found = calibration.search(measure, 0.868 * 97.1, 97.1, rounds=3)
    assert any(n.startswith("the ladder is out of order") for n in found.notes), found.notes


def test_search_checks_its_range():
    with pytest.raises(ValueError):
        calibration.search(lambda c: c, 1.0, 10.0, low=0.5, high=0.1)
    # a machine so slow that 1 CPU does not reach a quarter of the link: the scout stops there
    found = calibration.search(lambda c: 10 * c, 50.0, 100.0, rounds=1)
    assert max(c for c, _, _ in found.steps) == 1.0 and found.cpu == 1.0


def test_rpi3b_target_is_the_published_trees_host_ratio_of_1k_to_16k():
    """The target is the published tree's own host cells (UDP host, 82.4 Mb/s at 1 KiB and
    94.5 at 16 KiB), read here from the tree file the package ships, not typed again."""
    import csv

    from k8sdds.analysis import published

    with published.DATA.open(newline="") as f:
        host = {int(r["data_len"]): float(r["mbps"]) for r in csv.DictReader(f)
                if r["transport"] == "UDP" and r["datapath"] == "host"}
    board = BOARDS["rpi3b"]
    assert board.target_ratio() == pytest.approx(host[1024] / host[16384])
    assert (host[1024], host[16384]) == (82.4, 94.5)  # the study's figures, as published
    assert "hostNetwork" in board.source


def _cal(cpu: float = 0.06, machine: dict | None = None) -> Calibration:
    """A calibration made on this machine (or on `machine`)."""
    return Calibration(board="rpi3b", cpu=cpu, target_ratio=0.868, ratio=0.87,
                       link_mbps=95.0, machine=machine or calibration.this_machine(),
                       when="2026-11-23T12:00:00+00:00", steps=[[0.1, 95.0], [cpu, 82.6]])


def test_profiles_take_their_budget_from_this_machines_calibration(tmp_path, monkeypatch):
    monkeypatch.setenv("K8SDDS_CALIBRATION", str(tmp_path / "cal.json"))
    calibration.save(_cal(0.06))
    saved = json.loads((tmp_path / "cal.json").read_text())
    assert saved["version"] == 1 and saved["boards"]["rpi3b"]["cpu"] == 0.06
    pi3, pi4, wifi = resolve("rpi3b"), resolve("rpi4"), resolve("rpi3b-wifi")
    assert pi3.cpu == 0.06 and wifi.cpu == 0.06 and pi4.cpu == pytest.approx(0.12)
    here = calibration.this_machine()
    assert f"on this machine ({here['cpu_model']}, {here['cpu_count']} CPUs)" in pi3.cpu_from
    assert "0.87 of the link-bound rate" in pi3.cpu_from
    assert pi3.cpu_origin == pi4.cpu_origin == "this machine"
    assert pi4.cpu_from.startswith("2 x the rpi3b budget")
    assert resolve("cloud").cpu is None and resolve("cloud").cpu_from == "no limit"


def test_without_a_calibration_here_the_release_machines_is_used_and_said(tmp_path,
                                                                           monkeypatch):
    monkeypatch.setenv("K8SDDS_CALIBRATION", str(tmp_path / "none.json"))
    reference = tmp_path / "reference.json"
    monkeypatch.setattr(calibration, "REFERENCE", reference)
    assert resolve("rpi3b").cpu_from.startswith("not calibrated: a guess")
    assert resolve("rpi3b").cpu_origin == "guess"
    calibration.save(_cal(0.05, {"cpu_model": "Release CPU", "cpu_count": 2}), reference)
    got = resolve("rpi3b")
    assert got.cpu == 0.05 and "on the release machine" in got.cpu_from
    assert "run `k8sdds testbed calibrate` for this machine" in got.cpu_from
    assert got.cpu_origin == "release"


def test_a_calibration_holds_only_on_the_machine_it_was_made_on():
    made = {"cpu_model": "AMD EPYC", "cpu_count": 2, "kernel": "6.18.44",
            "udp_loopback_pps": 200_000}
    assert calibration.elsewhere(made, dict(made)) is None
    assert calibration.elsewhere(made, {**made, "udp_loopback_pps": 150_000}) is None
    assert calibration.elsewhere(made, {**made, "cpu_model": "Intel(R) Xeon(R) Processor"}) == (
        "CPU 'AMD EPYC' there, 'Intel(R) Xeon(R) Processor' here")
    # one CPU model, another VM: the measured loopback rate tells them apart
    assert calibration.elsewhere(made, {**made, "udp_loopback_pps": 90_000}) == (
        "200000 loopback datagrams a second there, 90000 here")
    old = {k: v for k, v in made.items() if k != "udp_loopback_pps"}
    assert "no loopback rate measured there" in calibration.elsewhere(old, made)


def test_this_machines_loopback_rate_is_measured_and_holds_from_one_measurement_to_the_next():
    here = calibration.this_machine()
    assert here["udp_loopback_pps"] > 1000  # a real loopback exchange, not a constant
    assert here["cpu_model"] and here["cpu_count"] == os.cpu_count()
    again = {**here, "udp_loopback_pps": calibration.loopback_pps()}
    assert calibration.elsewhere(here, again) is None


def test_a_calibration_file_from_another_machine_is_not_this_machines(tmp_path, monkeypatch):
    monkeypatch.setenv("K8SDDS_CALIBRATION", str(tmp_path / "cal.json"))
    calibration.save(_cal(0.06, {**calibration.this_machine(), "cpu_model": "Other CPU"}))
    got = resolve("rpi3b")
    assert got.cpu == 0.06 and got.cpu_origin == "another machine"
    assert "not this machine: CPU 'Other CPU' there" in got.cpu_from
    [note] = fidelity.budget_notes([asdict(got)])
    assert note.startswith("rpi3b: the CPU budget was calibrated on another machine, not on "
                           "this one (CPU 'Other CPU' there")


def test_a_calibration_made_here_at_another_pace_says_so(tmp_path, monkeypatch):
    """This machine's own calibration, made when its loopback rate was 26 % lower (as one
    VM measured it within an hour, calibration.PACE_DRIFT): a run is told its nodes' figures
    read high; within the drift nothing is said."""
    monkeypatch.setenv("K8SDDS_CALIBRATION", str(tmp_path / "cal.json"))
    here = calibration.this_machine()
    now = dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
    slower = {**here, "udp_loopback_pps": round(here["udp_loopback_pps"] / 1.26)}
    calibration.save(replace(_cal(0.06, slower), when=now))
    got = resolve("rpi3b")
    assert got.cpu_origin == "this machine" and got.cpu_pace == pytest.approx(1.26, abs=0.01)
    [note] = fidelity.budget_notes([asdict(got)])
    assert note.startswith("rpi3b: this machine runs 26 % faster than when its CPU budget "
                           "was calibrated"), note
    assert "reads high" in note
    near = {**here, "udp_loopback_pps": round(here["udp_loopback_pps"] / 1.1)}
    calibration.save(replace(_cal(0.06, near), when=now))
    assert fidelity.budget_notes([asdict(resolve("rpi3b"))]) == []


def test_the_shipped_reference_calibrates_rpi3b():
    shipped = json.loads(calibration.REFERENCE.read_text())["boards"]["rpi3b"]
    assert 0.01 <= shipped["cpu"] <= 1.0
    assert abs(shipped["ratio"] - shipped["target_ratio"]) <= 0.1  # the search converged
    assert len(shipped["steps"]) >= 5
    # its ratio is what a run measured at its budget (the last such step), not the target
    at_budget = [v for c, v in shipped["steps"] if c == shipped["cpu"]]
    assert at_budget, shipped["steps"]
    assert shipped["ratio"] == pytest.approx(at_budget[-1] / shipped["link_mbps"], abs=1e-3)


def test_a_damaged_calibration_file_is_named(tmp_path, monkeypatch):
    bad = tmp_path / "cal.json"
    bad.write_text("{not json")
    monkeypatch.setenv("K8SDDS_CALIBRATION", str(bad))
    with pytest.raises(UserError, match=str(bad)):
        resolve("rpi3b")


def test_saving_keeps_other_boards(tmp_path):
    path = tmp_path / "cal.json"
    calibration.save(Calibration(**{**_cal().__dict__, "board": "other"}), path)
    calibration.save(_cal(0.07), path)
    assert set(json.loads(path.read_text())["boards"]) == {"other", "rpi3b"}


@pytest.mark.parametrize("text, message", [
    ("data_len,throughput_mbps\n1024,81\n", "needs a row for data_len 16384"),
    ("data_len,throughput_mbps\n1024,abc\n16384,93\n", "line 2: data_len '1024' must be"),
    ("data_len,throughput_mbps\n1024,-3\n16384,93\n", "line 2: data_len and throughput_mbps"),
    ("data_len\n1024\n", "line 2: column throughput_mbps is missing"),
])
def test_board_figures_are_checked_row_by_row(tmp_path, text, message):
    path = tmp_path / "figures.csv"
    path.write_text(text)
    with pytest.raises(UserError, match=message):
        read_figures(path)


def test_own_figures_replace_the_published_ones(tmp_path):
    path = tmp_path / "figures.csv"
    path.write_text("data_len,throughput_mbps\n1024,50\n16384,100\n")
    board = board_of("rpi3b", path)
    assert board.target_ratio() == 0.5 and str(path) in board.source
    with pytest.raises(UserError, match="takes its CPU budget from rpi3b"):
        board_of("rpi4", None)
    with pytest.raises(UserError, match="no CPU budget to calibrate"):
        board_of("cloud", None)


def test_calibrate_refuses_bad_input_before_touching_anything(tmp_path):
    import os

    proc = cli("testbed", "calibrate", "--profile", "rpi3b", "--figures",
               str(tmp_path / "missing.csv"), env=dict(os.environ))
    assert proc.returncode == 2 and "missing.csv: cannot read" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_profiles_command_says_where_each_budget_comes_from(tmp_path):
    import os

    env = {**os.environ, "K8SDDS_CALIBRATION": str(tmp_path / "cal.json"), "COLUMNS": "300"}
    calibration.save(_cal(0.0612), tmp_path / "cal.json")
    proc = cli("testbed", "profiles", env=env)
    assert proc.returncode == 0, proc.stderr
    assert "0.0612" in proc.stdout and "calibrated on this machine" in proc.stdout
    assert "2 x the rpi3b budget" in proc.stdout
    assert "rpi3b: Raspberry Pi 3B" in proc.stdout and "No AES instructions: the engines' " \
        "OpenSSL does AES in software" in " ".join(proc.stdout.split())
    assert "cloud: no limits\n" in proc.stdout  # the cloud machine keeps its AES


def test_the_emulator_says_what_it_cannot_show():
    limited = {"name": "rpi3b", "cpu": 0.05, "cpu_from": "calibrated on the release machine",
               "cpu_origin": "release"}
    lines = fidelity.cannot_show([limited, {"name": "cloud", "cpu": None}])
    assert any("periods of 20 ms" in line for line in lines)
    assert any("repeats spread more than on the board" in line
               and "k8sdds testbed steadiness --profile rpi3b" in line for line in lines)
    assert any("release machine, not on this one" in line for line in lines)
    # no other machine's spread is written into this run's record as if it were this one's
    [spread] = [line for line in lines if "repeats spread" in line]
    assert "not measured before the run" in spread and "%" not in spread
    assert not any(line.startswith("cloud") for line in lines)
    guess = fidelity.cannot_show([{"name": "x", "cpu": 0.5, "cpu_origin": "guess"}])
    assert any("is a guess" in line for line in guess)


def test_the_emulator_says_when_this_machines_calibration_is_from_another_sitting():
    import datetime as dt

    mine = {"name": "rpi3b", "cpu": 0.09, "cpu_origin": "this machine",
            "cpu_when": "2026-11-23T22:43:04+00:00"}
    later = dt.datetime(2026, 11, 24, 22, 43, tzinfo=dt.timezone.utc)
    [stale] = [line for line in fidelity.cannot_show([mine], now=later)
               if "hours before this run" in line]
    assert "calibrated 24 hours before this run (2026-11-23T22:43)" in stale
    assert "`k8sdds testbed calibrate` in the sitting you measure in" in stale
    soon = later - dt.timedelta(hours=23)  # an hour after it: the same sitting
    assert not [line for line in fidelity.cannot_show([mine], now=soon)
                if "hours before" in line]
    for when in ("", "not a time"):  # older calibration files: nothing to say, no error
        assert not [line for line in fidelity.cannot_show([{**mine, "cpu_when": when}],
                                                          now=later) if "hours before" in line]


def test_cgroup_periods_keep_the_quota_above_the_kernels_minimum():
    for cpus in (1.0, 0.5, 0.1, 0.065, 0.05, 0.011):
        period = cgroups.period_us(cpus)
        assert period >= cgroups.PERIOD_US
        assert round(cpus * period) >= cgroups.MIN_QUOTA_US - 1
    assert cgroups.period_us(0.5) == cgroups.PERIOD_US


def test_link_burst_holds_the_cpu_periods_a_throttled_node_sends_in_at_line_rate(
        tmp_path, monkeypatch):
    from k8sdds.testbed.profiles import BURST_PERIODS, PROFILES, link_burst_kb

    for cpus in (0.5, 0.0831, 0.05):
        window = BURST_PERIODS * cgroups.period_us(cpus) / 1e6  # seconds
        kb = link_burst_kb(100, 128, cpus)
        assert kb * 1024 >= 100e6 / 8 * window > (kb - 1) * 1024 or kb == 128
    assert link_burst_kb(100, 128, 0.0831) > 128  # 12 ms periods: 4 hold 602 kB at 100 Mbit/s
    assert link_burst_kb(100, 4096, 0.0831) == 4096  # a profile's own larger bucket stays
    assert link_burst_kb(100, 128, None) == 128 and link_burst_kb(None, 0, 0.1) == 0
    monkeypatch.setenv("K8SDDS_CALIBRATION", str(tmp_path / "cal.json"))
    calibration.save(_cal(0.0831))
    assert resolve("rpi3b").burst_kb == link_burst_kb(100, PROFILES["rpi3b"].burst_kb, 0.0831)
    assert resolve("cloud").burst_kb == 0
    monkeypatch.setenv("K8SDDS_CALIBRATION", str(tmp_path / "none.json"))
    monkeypatch.setattr(calibration, "REFERENCE", tmp_path / "absent.json")
    guess = resolve("rpi3b")  # not calibrated: the guess's bucket follows the guess
    assert guess.cpu_from.startswith("not calibrated")
    assert guess.burst_kb == link_burst_kb(100, PROFILES["rpi3b"].burst_kb, guess.cpu)


# ---- netlink (pure) ---------------------------------------------------------------------
def test_attributes_round_trip_with_padding():
    body = napi.attribute(2, b"netdev\0") + napi.attribute(1, struct.pack("=I", 7))
    assert len(body) % 4 == 0
    assert napi.attributes(body) == {2: b"netdev\0", 1: struct.pack("=I", 7)}


def _reply(attrs: bytes, kind: int = 20) -> bytes:
    payload = struct.pack("=BBH", 11, 1, 0) + attrs
    return struct.pack("=IHHII", 16 + len(payload), kind, 2, 1, 0) + payload


def test_a_napi_dump_is_read_into_threads():
    one = _reply(napi.attribute(napi.NETDEV_A_NAPI_IFINDEX, struct.pack("=I", 2))
                 + napi.attribute(napi.NETDEV_A_NAPI_ID, struct.pack("=I", 518))
                 + napi.attribute(napi.NETDEV_A_NAPI_PID, struct.pack("=I", 27564)))
    done = struct.pack("=IHHII", 20, napi.NLMSG_DONE, 2, 1, 0) + struct.pack("=i", 0)
    messages, ended = napi.split_messages(one + done)
    assert ended and napi.napis(messages) == [napi.Napi(2, 518, 27564)]
    messages, ended = napi.split_messages(one)
    assert not ended and len(messages) == 1


def test_a_netlink_error_is_raised():
    error = struct.pack("=IHHII", 36, napi.NLMSG_ERROR, 0, 1, 0) + struct.pack("=i", -95)
    with pytest.raises(OSError, match="not supported"):
        napi.split_messages(error + b"\0" * 16)


def test_a_request_carries_its_family_flags_and_command():
    msg = napi.genl_message(0x10, napi.NLM_F_REQUEST, napi.CTRL_CMD_GETFAMILY,
                            napi.attribute(napi.CTRL_ATTR_FAMILY_NAME, b"netdev\0"), 1)
    length, kind, flags, seq, _ = struct.unpack_from("=IHHII", msg)
    assert (length, kind, flags, seq) == (len(msg), 0x10, napi.NLM_F_REQUEST, 1)
    assert msg[16] == napi.CTRL_CMD_GETFAMILY and b"netdev\0" in msg


def test_pi_profiles_keep_openssl_off_this_machines_aes_instructions():
    from k8sdds.testbed.profiles import PROFILES, engine_env, not_emulated

    for name in ("rpi3b", "rpi4", "rpi3b-wifi"):  # neither Pi's SoC has the crypto extensions
        assert PROFILES[name].aes is False
        assert engine_env(PROFILES[name], "x86_64") == {"OPENSSL_ia32cap": "~0x200000200000000"}
        assert engine_env(PROFILES[name], "aarch64") == {"OPENSSL_armcap": "0x1"}
        assert not_emulated(PROFILES[name], "x86_64") is None
        assert "no OpenSSL mask for riscv64" in not_emulated(PROFILES[name], "riscv64")
    assert engine_env(PROFILES["cloud"], "x86_64") == {}
    assert not_emulated(PROFILES["cloud"], "riscv64") is None
    # the Pi's own armhf programs: OpenSSL's 32-bit ARM mask, NEON (bit 0) without AES (bit 2)
    assert engine_env(PROFILES["rpi3b-armhf"]) == {"OPENSSL_armcap": "0x1"}
    assert not_emulated(PROFILES["rpi3b-armhf"]) is None


def test_a_run_calibrates_first_only_a_calibrated_budget_not_made_here():
    from dataclasses import replace

    from k8sdds.testbed.calibrate import AUTO, not_here

    pi = resolve("rpi3b")
    mine = replace(pi, cpu_origin="this machine", cpu_from="calibrated on this machine")
    assert not_here([mine, resolve("cloud")]) == {}
    for origin in ("guess", "release", "another machine"):
        assert not_here([replace(pi, cpu_origin=origin, cpu_from="x")]) == {"rpi3b": "x"}
    rpi4 = replace(resolve("rpi4"), cpu_origin="release", cpu_from="y")
    assert not_here([rpi4]) == {"rpi3b": "y"}  # rpi4 takes the rpi3b budget: that board
    assert round(AUTO.minutes) == 4  # `k8sdds testbed calibrate`'s defaults, as said


def test_a_calibration_file_naming_the_cpu_as_before_is_read_with_todays_names(tmp_path):
    """A file written before 2026-11-29 named the machine's CPU model and count `cpu` and
    `cpus` (the calibration's own `cpu` is its budget); read, they are `cpu_model` and
    `cpu_count`, as a run's environment names them."""
    old = tmp_path / "old.json"
    old.write_text(json.dumps({"version": 1, "boards": {"rpi3b": {
        "board": "rpi3b", "cpu": 0.07, "target_ratio": 0.87, "ratio": 0.9, "link_mbps": 97.0,
        "machine": {"cpu": "AMD EPYC", "cpus": 2, "kernel": "6.18.44",
                    "udp_loopback_pps": 200_000}}}}))
    [cal] = calibration._read(old).values()
    assert cal.cpu == 0.07 and cal.machine == {"cpu_model": "AMD EPYC", "cpu_count": 2,
                                               "kernel": "6.18.44", "udp_loopback_pps": 200_000}
