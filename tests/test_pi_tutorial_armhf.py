"""docs/tutorials/pi-cluster.md on the study's 32-bit Pi: the page's pi1 (`arch: arm`) is the
armhf ARM machine (tests/vm_support.py: an emulated Cortex-A7 booting Debian's armhf system,
no Kubernetes part until the page's `cluster install`), from the page's first command to its
report and `reset --purge`. The same test as tests/test_pi_tutorial.py's (`tutorial`), on
nodes of its own so that the two run side by side."""

from __future__ import annotations

import os

import pytest

from . import kubeadm_support as ks
from .test_pi_tutorial import ARMHF, arm_machine, tutorial

REASON = ks.missing()
pytestmark = [pytest.mark.kubelet, pytest.mark.ssh,
              pytest.mark.skipif(REASON is not None, reason=REASON or "")]
PREFIX = f"kku{os.getpid() % 1000}"  # the test hosts' namespaces and links


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    with ks.node_set(tmp_path_factory.mktemp("tutorial-armhf"), PREFIX, net=243) as made:
        yield made


def test_the_pi_tutorial_runs_as_written_with_the_32_bit_pi(nodes, tmp_path):
    """The page's 32-bit Pi (pi1) is the armhf machine; see `tutorial`."""
    with arm_machine(nodes, ARMHF) as machine:
        tutorial(nodes, machine, ARMHF, tmp_path)
