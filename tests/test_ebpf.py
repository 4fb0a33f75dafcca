"""The emulated Cilium's programs (k8sdds/testbed/wiring/bpf/datapath.c): each node's configuration
as clang reads it, the object clang-19 makes of it, and what is said where a tool is
missing. The programs at work: tests/test_emulated.py."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest

from k8sdds.testbed.wiring import ebpf

ONE_NODE = """\
// written by k8sdds/testbed/wiring/ebpf.py for one node of an emulated testbed
#define TUNNEL 1
#define VNI 2
#define NETDEV_IFINDEX 3
#define TUNNEL_IFINDEX 7
#define ENDPOINTS(X) \\
\tX(0x0af4010a, 12, 0x0e, 0x00, 0x00, 0x00, 0x00, 0x01, 0x0e, 0x00, 0x00, 0x00, 0x00, 0x02) \\

#define REMOTES(X) \\
\tX(0x0af40000, 0xffffff00, 0x0a63000a) \\
\tX(0x0af40200, 0xffffff00, 0x0a63000c) \\

"""


def test_a_nodes_configuration_names_its_pods_and_the_other_nodes():
    header = ebpf.config(True, 2, 3, 7,
                         [ebpf.Endpoint("10.244.1.10", 12, "0e:00:00:00:00:01",
                                        "0e:00:00:00:00:02")],
                         [ebpf.OtherNode("10.244.0.0/24", "10.99.0.10"),
                          ebpf.OtherNode("10.244.2.0/24", "10.99.0.12")])
    assert header == ONE_NODE


@pytest.mark.skipif(ebpf.unavailable() is not None, reason=str(ebpf.unavailable()))
def test_clang_builds_the_three_programs_for_a_node(tmp_path):
    obj = ebpf.build(ONE_NODE, tmp_path / "node1")
    sections = subprocess.run(["readelf", "-S", "-W", str(obj)], capture_output=True,
                              text=True, check=True).stdout
    for program in ("from-container", "from-netdev", "from-overlay", ".maps", ".BTF"):
        assert f" {program} " in sections, program
    assert (tmp_path / "node1" / "node_config.h").read_text() == ONE_NODE


def test_a_missing_tool_is_named_with_its_package(monkeypatch, tmp_path):
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "bpftool" else "/x")
    monkeypatch.setattr(ebpf, "HELPERS", tmp_path / "absent.h")
    assert ebpf.unavailable() == ("its eBPF programs need bpftool, libbpf-dev (apt-get install "
                                  "--no-install-recommends bpftool libbpf-dev)")


@pytest.mark.skipif(ebpf.unavailable() is not None, reason=str(ebpf.unavailable()))
def test_a_program_that_does_not_compile_is_said_with_clangs_words(tmp_path):
    with pytest.raises(ebpf.TestbedError, match="clang-19 could not compile datapath.c for "
                                                "n1: .*ENDPOINTS"):
        ebpf.build("#define TUNNEL 0\n", tmp_path / "n1")


def test_the_programs_and_their_counters_are_the_c_sources_own():
    """ebpf.PROGRAMS is read against datapath.c: the same sections, and each program's
    counter at the index of its name in the C enum (bpftool's keys are those indices)."""
    source = ebpf.SOURCE.read_text()
    sections = re.findall(r'^SEC\("([a-z-]+)"\)', source, re.MULTILINE)
    assert sections == ["from-container", "from-netdev", "from-overlay"]
    assert list(ebpf.PROGRAMS) == sections
    enum = re.search(r"^enum \{([^}]*)\};", source, re.MULTILINE).group(1)
    counters = [name.strip() for name in enum.split(",")]
    assert counters[-1] == "HITS"  # the map's size
    assert [c.lower().replace("_", "-") for c in counters[:-1]] == list(ebpf.PROGRAMS)
