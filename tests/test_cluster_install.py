"""`k8sdds cluster install`'s pure parts: the files it writes, the record it keeps, what it
reads of dpkg, and the checks that judge a host after it. The real install runs in
tests/test_kubeadm_real.py (amd64 nodes), tests/test_pi_tutorial.py (the armhf machine, and
reset --purge) and tests/test_cluster_ssh.py (the arm64 machine)."""

from __future__ import annotations

import pytest

from k8sdds.cluster import install, node_files
from k8sdds.cluster.checks import CHECKS
from k8sdds.cluster.remote import HostError, Result

FILES = {f.path: f for f in node_files.FILES}


def test_the_kubelet_unit_and_drop_in_are_kubeadms_with_the_kubelet_in_usr_local():
    dropin = FILES["/etc/systemd/system/kubelet.service.d/10-kubeadm.conf"].text
    # kubeadm's packages' drop-in (kubernetes/release): the flags kubeadm writes reach it
    assert "EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env" in dropin
    assert "EnvironmentFile=-/etc/default/kubelet" in dropin
    assert "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf" in dropin
    assert "ExecStart=\nExecStart=/usr/local/bin/kubelet $KUBELET_KUBECONFIG_ARGS" in dropin
    assert dropin.rstrip().endswith("$KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS")
    unit = FILES["/etc/systemd/system/kubelet.service"].text
    assert "ExecStart=/usr/local/bin/kubelet\n" in unit and "Restart=always" in unit


def test_one_cgroup_driver_for_the_kubelet_and_containerd():
    assert "SystemdCgroup = true" in FILES["/etc/containerd/config.toml"].text
    assert 'sandbox_image = "registry.k8s.io/pause:3.10.1"' in \
        FILES["/etc/containerd/config.toml"].text
    assert FILES["/etc/default/kubelet"].text == "KUBELET_EXTRA_ARGS=--cgroup-driver=systemd\n"
    assert FILES["/etc/modules-load.d/k8sdds.conf"].text == "overlay\nbr_netfilter\n"
    assert "net.bridge.bridge-nf-call-iptables = 1" in FILES["/etc/sysctl.d/90-k8sdds.conf"].text


def test_dpkgs_installed_packages_are_read_from_its_status_words():
    out = ("containerd install ok installed\nrunc deinstall ok config-files\n"
           "libseccomp2:arm64 install ok installed\niptables unknown ok not-installed\n"
           "runc hold ok installed\n")
    assert install.installed(out) == {"containerd", "libseccomp2", "runc"}
    assert install.installed("") == set()


def test_the_record_round_trips_and_a_damaged_one_is_named():
    record = install.Record(packages=["runc"], files={"/etc/default/kubelet": True},
                            sysctls={"net.ipv4.ip_forward": "0"})
    assert install.Record.parse(record.text()) == record
    assert install.Record.parse("") == install.Record()
    with pytest.raises(HostError, match="/var/lib/k8sdds/node/install.json is damaged"):
        install.Record.parse("{not json")


@pytest.mark.parametrize("check, out, code, passed, found", [
    ("CNI plugins", "bridge\nhost-local\nloopback\nportmap\nflannel\n", 0, True, "present"),
    ("CNI plugins", "flannel\n", 0, False, "missing: bridge, host-local, loopback, portmap"),
    ("CNI plugins", "", 2, False, "missing: bridge"),
    ("containerd cgroups", "[x]\n  SystemdCgroup = true\n", 0, True, "SystemdCgroup = true"),
    ("containerd cgroups", "  # SystemdCgroup = true\n", 0, False, "not set"),
    ("containerd cgroups", "", 1, False, "no /etc/containerd/config.toml"),
    ("kubelet service", "enabled\n", 0, True, "enabled"),
    ("kubelet service", "disabled\n", 1, False, "disabled"),
])
def test_the_checks_of_what_install_puts_on(check, out, code, passed, found):
    [c] = [c for c in CHECKS if c.name == check]
    got = c.judge(Result(c.argv, code, out, ""))
    assert got[0] is passed and found in got[1]
    assert c.fix.startswith("k8sdds cluster install -i INVENTORY")


def test_a_host_outside_the_inventory_is_refused_by_name(tmp_path):
    from .cli_support import invoke

    inv = tmp_path / "hosts.yaml"
    inv.write_text("known_hosts: /dev/null\nhosts:\n"
                   "  - {name: m, address: 10.9.9.9, role: control-plane, user: root}\n")
    done = invoke("cluster", "install", "-i", str(inv), "--host", "pi9")
    assert done.returncode == 2 and "pi9: not in" in done.stderr and "its hosts: m" in \
        " ".join(done.stderr.split())


class _LockedTwice:
    """A host whose dpkg lock another process holds for two tries (dpkg 1.21's words)."""

    dry_run = False

    def __init__(self):
        self.calls = []

    def run(self, argv, root=False, timeout=600):
        self.calls.append(argv)
        if len(self.calls) <= 2:
            return Result(argv, 2, "", "dpkg: error: dpkg frontend lock was locked by another "
                          "process with pid 731\nNote: removing the lock file is always wrong, "
                          "and can damage the locked area\nand the entire system. See "
                          "<https://wiki.debian.org/Teams/Dpkg/FAQ#db-lock>.\n")
        return Result(argv, 0, "", "")


def test_dpkg_waits_while_another_process_holds_its_lock():
    """A Pi's daily apt timer holding dpkg's lock is waited for, not a failed install or
    purge; any other failure is answered at once."""
    host, pauses = _LockedTwice(), []
    done = install.dpkg(host, ("--purge", "containerd"), timeout=60, sleep=pauses.append)
    assert done.code == 0 and len(host.calls) == 3 and pauses == [install.LOCK_PAUSE] * 2
    assert host.calls[-1][-3:] == ("dpkg", "--purge", "containerd")

    class Broken(_LockedTwice):
        def run(self, argv, root=False, timeout=600):
            self.calls.append(argv)
            return Result(argv, 1, "", "dpkg: error processing archive x.deb (--install)")

    broken = Broken()
    assert install.dpkg(broken, ("-i", "x.deb"), timeout=60, sleep=pauses.append).code == 1
    assert len(broken.calls) == 1
