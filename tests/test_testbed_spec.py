"""Cluster specs (YAML) and profiles: validation with clear errors."""

from __future__ import annotations

import pytest

from k8sdds.testbed import spec
from k8sdds.testbed.profiles import PROFILES
from k8sdds.testbed.spec import SpecError


def test_defaults_give_one_control_plane_and_workers():
    s = spec.default_nodes(4, "rpi3b", name="edge")
    assert [(n.name, n.role, n.profile) for n in s.nodes] == [
        ("node0", "control-plane", "cloud"), ("node1", "worker", "rpi3b"),
        ("node2", "worker", "rpi3b"), ("node3", "worker", "rpi3b")]
    assert [n.name for n in s.workers()] == ["node1", "node2", "node3"]
    assert s.name == "edge"


def test_hybrid_spec_loads(tmp_path):
    path = tmp_path / "hybrid.yaml"
    path.write_text("""
name: hybrid
nodes:
  - {name: master, role: control-plane, arch: amd64, profile: cloud}
  - {name: pi1, arch: arm, profile: rpi3b}
  - {name: pi2, arch: arm64, profile: rpi4}
""")
    s = spec.load(path)
    assert s.name == "hybrid"
    assert [(n.name, n.role, n.arch, n.profile) for n in s.nodes] == [
        ("master", "control-plane", "amd64", "cloud"), ("pi1", "worker", "arm", "rpi3b"),
        ("pi2", "worker", "arm64", "rpi4")]
    assert spec.TestbedSpec.from_dict(s.to_dict()) == s


def test_workers_shorthand(tmp_path):
    path = tmp_path / "w.yaml"
    path.write_text("workers: 5\nprofile: rpi4\n")
    s = spec.load(path)
    assert len(s.nodes) == 6 and {n.profile for n in s.workers()} == {"rpi4"}


@pytest.mark.parametrize("text,expected", [
    ("nodes:\n  - {name: a, profile: rpi3}\n  - {name: b}\n",
     "node 1, field 'profile': unknown profile 'rpi3'"),
    ("nodes:\n  - {name: a, role: master}\n  - {name: b}\n",
     "node 1, field 'role': value 'master'; allowed: control-plane, worker"),
    ("nodes:\n  - {name: a, arch: x86}\n  - {name: b}\n", "field 'arch': value 'x86'"),
    ("nodes:\n  - {name: a}\n  - {name: a}\n", "node 2, field 'name': duplicate node name"),
    ("nodes:\n  - {name: A_1}\n  - {name: b}\n", "field 'name': value 'A_1'"),
    ("nodes:\n  - {name: a, cpu: 2}\n  - {name: b}\n", "unknown field(s) cpu"),
    ("nodes:\n  - {name: a}\n", "a cluster has 2 to 64 nodes, not 1"),
    ("nodez: []\n", "unknown key(s) nodez"),
    ("nodes: [\n", "not valid YAML"),
    ("- a\n- b\n", "expected a mapping"),
])
def test_bad_specs_name_file_node_field_value(tmp_path, text, expected):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        spec.load(path)
    assert expected in str(info.value) and str(path) in str(info.value)


def test_unknown_profile_suggests():
    with pytest.raises(SpecError, match="did you mean 'rpi3b'"):
        spec.default_nodes(3, "rpi3")


def test_profiles_are_documented_and_sane():
    assert {"rpi3b", "rpi4", "cloud"} <= set(PROFILES)
    assert PROFILES["rpi3b"].rate_mbit == 100 and PROFILES["rpi4"].rate_mbit == 1000
    assert PROFILES["rpi3b"].cpu < PROFILES["rpi4"].cpu
    cloud = PROFILES["cloud"]
    assert cloud.rate_mbit is None and cloud.cpu is None
    for p in PROFILES.values():
        assert p.about
        if p.rate_mbit:  # at least 10 ms at line rate, so the rate holds with HZ=100
            assert p.burst_kb * 8 * 1024 >= p.rate_mbit * 1e6 / 100
            # and a budgeted node's bucket holds its CPU periods (test_calibration)
