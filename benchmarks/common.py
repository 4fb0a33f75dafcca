"""What every benchmark does: run the k8sdds CLI as a user would and read its JSON outcome,
and start again by hand what a run started, in the nodes it placed it on (`Hand`)."""

from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from k8sdds.engines.base import engine_path
from k8sdds.testbed import netns


def need_root() -> None:
    """Exit with why unless run as root (the emulated backend's namespaces)."""
    if os.geteuid() != 0:
        sys.exit("run as root: the emulated backend needs network namespaces")


def k8sdds(*args: str, prefix: tuple[str, ...] = ()) -> dict:
    """`python -m k8sdds ARGS --json` (after `prefix`, such as `taskset -c 1`); exit with
    its message if it fails, print any failed repeats, return the outcome (run_dir, repeats,
    failed, wall_s, ...)."""
    proc = subprocess.run([*prefix, sys.executable, "-m", "k8sdds", *args, "--json"],
                          capture_output=True, text=True)
    if proc.returncode != 0:
        sys.exit(f"k8sdds {args[0]} failed: {proc.stderr}")
    outcome = json.loads(proc.stdout)
    for failure in outcome.get("failed", []):
        print("failed:", failure, file=sys.stderr)
    return outcome


class Hand:
    """Processes started by hand in the nodes where a k8sdds run placed its roles."""

    def __init__(self, tb, run_dir: Path, sessions: bool = True):
        manifest = json.loads((run_dir / "manifest.json").read_text())
        self.entry = manifest["repeats"]["test-1/rep-1"]
        self.tb, self.rep = tb, run_dir / "test-1" / "rep-1"
        self.sessions = sessions  # each in a session of its own, as from its own shell
        self.procs: list[subprocess.Popen] = []

    def start(self, role: str, argv: list[str], out=subprocess.PIPE) -> subprocess.Popen:
        ns = self.tb.node(self.entry["placement"][role]).ns
        proc = subprocess.Popen(netns.exec_argv(ns, argv), cwd=self.rep, stdout=out,
                                stderr=subprocess.STDOUT, text=True,
                                start_new_session=self.sessions,
                                env={**os.environ, "PATH": engine_path()})
        self.procs.append(proc)
        return proc

    def hub(self, role: str, port: int, argv: list[str] | None = None) -> None:
        """The router or broker k8sdds ran, as it ran it (or `argv`), listening before the
        others."""
        self.wait_listening(self.start(role, argv or self.entry["argv"][role],
                                       subprocess.DEVNULL), port)

    @staticmethod
    def wait_listening(proc: subprocess.Popen, port: int, timeout: float = 10) -> None:
        """Until `proc` listens on `port` (read from /proc: nothing to be told of)."""
        deadline = time.monotonic() + timeout
        while not netns.listening(proc.pid, port) and time.monotonic() < deadline:
            time.sleep(0.01)

    def stop(self) -> None:
        for proc in self.procs:
            self._signal(proc, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._signal(proc, signal.SIGKILL)

    def _signal(self, proc: subprocess.Popen, sig: int) -> None:
        """`sig` to the process (and its group, when it leads one)."""
        try:
            os.killpg(proc.pid, sig) if self.sessions else proc.send_signal(sig)
        except ProcessLookupError:
            pass


def ratio_interval(a: list[float], b: list[float]) -> tuple[float, float, float]:
    """mean(a) / mean(b), its 95 % interval (delta method on the two means, Student's t) and
    Welch's p that the means differ: how closely the pairs can tell the two apart."""
    from scipy import stats as sps

    ma, mb = statistics.mean(a), statistics.mean(b)
    rel = (statistics.variance(a) / (len(a) * ma ** 2) +
           statistics.variance(b) / (len(b) * mb ** 2)) ** 0.5
    half = float(sps.t.ppf(0.975, len(a) + len(b) - 2)) * rel
    p = float(sps.ttest_ind(a, b, equal_var=False).pvalue)
    return ma / mb, half, p


def mean_interval(values: list[float], digits: int = 1) -> str:
    """'120.0' from one repeat, '120.0 ± 8.1' (the half width of the mean's 95 % interval,
    k8sdds.analysis.stats.summarize) from more; '-' from none."""
    from k8sdds.analysis.stats import summarize

    s = summarize(values)
    if s.n == 0:
        return "-"
    if s.n == 1:
        return f"{s.mean:.{digits}f}"
    return f"{s.mean:.{digits}f} ± {(s.ci_high - s.ci_low) / 2:.{digits}f}"
