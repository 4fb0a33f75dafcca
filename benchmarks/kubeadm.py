"""Real kubeadm bring-up on this machine, air-gapped: seconds for `k8sdds cluster images`
(cold: every image built; warm: built images cached, loaded over SSH), `cluster init`,
`cluster join` of two workers (until every node is Ready), and `cluster reset` (every node
drained, then reset), on three SSH test hosts that are real nodes (tests/kubeadm_support.py),
for each CNI given.

Usage (root, after `make test-deps` built the binaries):
    .venv/bin/python benchmarks/kubeadm.py [--cni flannel-vxlan,kube-router,weave] [--cold]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import kubeadm_support as ks  # noqa: E402
from tests.test_kubeadm_real import NODE_CONFIG  # noqa: E402


def k8sdds(*args: str) -> float:
    """Seconds for one k8sdds command (exits on failure, with its output)."""
    start = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "k8sdds", *args], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "COLUMNS": "200"})
    if proc.returncode != 0:
        sys.exit(f"k8sdds {' '.join(args)} failed:\n{proc.stdout[-1500:]}{proc.stderr[-1500:]}")
    return time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cni", default="flannel-vxlan,kube-router,weave")
    parser.add_argument("--cold", action="store_true",
                        help="build every image first (a private image cache)")
    args = parser.parse_args()
    reason = ks.missing()
    if reason:
        sys.exit(f"cannot run: {reason}")
    with tempfile.TemporaryDirectory(prefix="k8sdds-kubeadm-bench-") as work:
        work = Path(work)
        if args.cold:
            base = Path(os.environ.get("K8SDDS_CACHE", "/var/cache/k8sdds")) / "images"
            os.environ["K8SDDS_CACHE"] = str(work / "cache")
            (work / "cache" / "images").mkdir(parents=True)
            for tar in base.glob("debian-*-minbase-*.tar"):  # debootstrap is not what we time
                shutil.copy(tar, work / "cache" / "images" / tar.name)
        nodes = ks.make(work, f"kbb{os.getpid() % 1000}", net=239)
        rows = []
        try:
            nodes.up()
            inv = work / "inventory.yaml"
            inv.write_text(yaml.safe_dump({
                "known_hosts": str(nodes.known_hosts((1, 2, 3))),
                "defaults": {"user": "root", "key": str(nodes.directory / "id_ed25519")},
                "hosts": [{"name": f"h{i}", "address": nodes.address(i), "arch": "amd64",
                           "role": "control-plane" if i == 1 else "worker"}
                          for i in (1, 2, 3)]}))
            extra = work / "node.yaml"
            extra.write_text(yaml.safe_dump_all(NODE_CONFIG))
            common = ("--inventory", str(inv), "--log-dir", str(work / "logs"))
            for cni in args.cni.split(","):
                images = k8sdds("cluster", "images", "--cni", cni, "--build", *common)
                again = k8sdds("cluster", "images", "--cni", cni, "--build", *common)
                init = k8sdds("cluster", "init", "--cni", cni, "--kubeadm-config", str(extra),
                              "--ignore-preflight-errors", "all", *common)
                join = k8sdds("cluster", "join", "--ignore-preflight-errors", "all", *common)
                reset = k8sdds("cluster", "reset", *common)
                rows.append((cni, images, again, init, join, reset))
        finally:
            nodes.down()
    print("kubeadm v1.34.3, 3 hosts (1 control plane, 2 workers), images built here, no "
          "registry")
    print(f"{'cni':16} {'images':>8} {'again':>7} {'init':>7} {'join 2':>7} {'reset':>7}")
    for cni, images, again, init, join, reset in rows:
        print(f"{cni:16} {images:7.1f}s {again:6.1f}s {init:6.1f}s {join:6.1f}s "
              f"{reset:6.1f}s")
    print("images: what each host lacks, built (or cached) and loaded over SSH; again: "
          "nothing lacking. The first CNI loads kubeadm's images too.")


if __name__ == "__main__":
    main()
