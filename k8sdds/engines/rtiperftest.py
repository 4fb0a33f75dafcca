"""RTI Perftest (`perftest_cpp`): RTI's own build, which the user supplies with a license, or
Perftest's program built on Eclipse Cyclone DDS by `make perftest PERFTEST_SRC=DIR`
(engines/perftest: k8sdds' implementation of Perftest's middleware interface), which needs
none. The middleware underneath is named wherever the engine's version is (Perftest's own
banner says it), and a test the Cyclone DDS build cannot honour is refused at load.

The K8sDDS command lines, built as argv lists: publisher `-pub -numSubscribers N`, subscriber j
`-sub -sidMultiSubTest j -numPublishers 1`, and `-dataLen`, `-bestEffort`, `-batchSize`,
`-multicast`, `-latencyTest`, `-executionTime`, `-cpu`, `-noPrintIntervals`, `-transport`,
`-peer`, `-sendQueueSize`, `-pubRate`, and DDS Security: the study's Perftest 3.0.1 flags
`-secureEncryptBoth -secureSign`, or, for Perftest 4.1 on (which has only the files), the
governance document those flags chose (credentials.STUDY) with the run's own certificates:
`-secureGovernanceFile -securePermissionsFile -secureCertAuthority -secureCertFile
-securePrivateKey`. TLS takes `--rti-tls-dir`'s certificates, else the run's own.

Under load (`load`): beside the round trip's publisher and subscriber, a throughput pair of
`load_len` samples in DDS domain STREAM_DOMAIN (`-domain`), so it never matches the round
trip's readers: its publisher (role STREAM, on the publisher's node) sends at the stream rate
the run gives it (`-pubRate R:sleep`, Perftest's own rate control; none for `max`), its
subscriber (role SINK) prints a line a second. Perftest prints its summary only when its
publisher ends the test, and the stream outlasts the round trip it runs beside (it is stopped
once that ends): what it carried is read from the subscriber's interval lines (the parser's).
"""

from __future__ import annotations

import functools
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from k8sdds.caches import engine_bin
from k8sdds.engines import credentials, cyclone
from k8sdds.engines.base import (
    STREAM_DOMAIN,
    Command,
    Problem,
    RoleContext,
    pubsub_roles,
    told_rate,
)
from k8sdds.flags import option
from k8sdds.model import BESIDE, HOST_ARCH, SINK, STREAM, Test
from k8sdds.parsers.rtiperftest import PARSER

MIN_SIZE = 28  # Perftest refuses smaller samples
MAX_SIZE = 2_147_482_620
TRANSPORTS = {"udp": "UDPv4", "tcp": "TCP", "tls": "TLS", "dtls": "DTLS"}
SECURE_TRANSPORTS = ("tls", "dtls")
# Perftest's own layout of certificates (its resource/secure folder)
CERTS = {"ca": "cacert.pem", "pub": ("pub.pem", "pubkey.pem"), "sub": ("sub.pem", "subkey.pem")}
TCP_PORT = 7400  # Perftest's TCP server bind port
CDS_PORT = 7400  # where the RTI Cloud Discovery Service listens (UDPv4)
LICENSE = "rti_license.dat"  # the license's name in the run's private directory
HOW = ("build it on Cyclone DDS from a Perftest source tree with `make perftest "
       "PERFTEST_SRC=DIR` (a clone of github.com/rticommunity/rtiperftest), or give RTI's "
       "perftest_cpp with --rtiperftest PATH (and the license with --rti-license FILE), or set "
       "K8SDDS_RTIPERFTEST")
BUILT = "perftest_cpp"  # what `make perftest` links in the engines' cache
CYCLONE = "Eclipse Cyclone DDS"  # how Perftest built on it names its middleware (banner)
GOVERNANCE_FILES = (4, 1)  # from this Perftest on, -secureGovernanceFile replaces the flags


def built() -> str | None:
    """The perftest_cpp `make perftest` built for this machine, if any."""
    path = engine_bin() / BUILT
    return str(path) if path.is_file() and os.access(path, os.X_OK) else None


@functools.cache
def banner(path: str) -> str:
    """The line a perftest_cpp starts with, naming its version and its middleware in brackets
    ("RTI Perftest 4.3.0 (Eclipse Cyclone DDS 0.10.2)"); "unknown" if it prints none. Perftest
    4.3 has no -version: its banner comes first, on stderr, whatever it is asked (-help, which
    exits at once)."""
    try:
        out = subprocess.run([path, "-help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    found = re.search(r"^RTI Perftest \S+.*$", out.stderr + out.stdout, re.M)
    return found.group(0).strip() if found else "unknown"


def version_of(path: str) -> tuple[int, ...]:
    """Perftest's own version, as its banner says it; () if it says none."""
    found = re.match(r"RTI Perftest (\d+(?:\.\d+)*)", banner(path))
    return tuple(int(n) for n in found.group(1).split(".")) if found else ()


def middleware_of(path: str) -> str:
    """The middleware a perftest_cpp runs on, as its banner names it; "unknown" if none."""
    found = re.search(r"\((.+)\)\s*$", banner(path))
    return found.group(1) if found else "unknown"


@dataclass(frozen=True)
class RtiSettings:
    """Where the user's RTI Perftest, its license, TLS certificates, an image holding it and
    the Cloud Discovery Service are; read once per run (command line, then environment)."""

    path: str | None = option(None, "--rtiperftest", "RTI Perftest executable "
                              "(perftest_cpp), for engine=rtiperftest [$K8SDDS_RTIPERFTEST]")
    license: str | None = option(None, "--rti-license", "RTI license file, given to "
                                 "Perftest as RTI_LICENSE_FILE [$K8SDDS_RTI_LICENSE]")
    tls_dir: str | None = option(
        None, "--rti-tls-dir", "certificates for Perftest over TLS or DTLS, in Perftest's "
        "layout (cacert.pem, pub.pem, pubkey.pem, sub.pem, subkey.pem) [$K8SDDS_RTI_TLS_DIR, "
        "else the run's own]")
    image: str | None = option(
        None, "--rtiperftest-image", "kubernetes: an image holding RTI Perftest (and "
        "rticlouddiscoveryservice, for discovery=cds), for engine=rtiperftest; --rtiperftest "
        "then names perftest_cpp inside it [perftest_cpp on its PATH]")
    cds: str | None = option(None, "--rti-cds", "RTI Cloud Discovery Service "
                      "executable, for discovery=cds [$K8SDDS_RTI_CDS, else "
                      "rticlouddiscoveryservice on the PATH]")

    @classmethod
    def from_environment(cls, path: str | None = None, license: str | None = None,
                         tls_dir: str | None = None, image: str | None = None,
                         cds: str | None = None, env: Mapping[str, str] = os.environ,
                         ) -> RtiSettings:
        """The given values, else $K8SDDS_RTIPERFTEST, $K8SDDS_RTI_LICENSE,
        $K8SDDS_RTI_TLS_DIR, $K8SDDS_RTI_CDS; local files as absolute paths. With an image,
        `path` and `cds` are paths inside it."""
        path = path or env.get("K8SDDS_RTIPERFTEST")
        license = license or env.get("K8SDDS_RTI_LICENSE")
        tls_dir = tls_dir or env.get("K8SDDS_RTI_TLS_DIR")
        return cls(path=path if (image or not path) else str(Path(path).resolve()),
                   license=str(Path(license).resolve()) if license else None,
                   tls_dir=str(Path(tls_dir).resolve()) if tls_dir else None,
                   image=image, cds=cds or env.get("K8SDDS_RTI_CDS")
                   or "rticlouddiscoveryservice")


class RtiPerftest:
    name = "rtiperftest"
    arches: tuple[str, ...] = ()  # RTI's image: any
    middleware = True
    hubs: tuple[str, ...] = ()  # the CDS serves discovery only
    programs = (BUILT,)  # `make perftest` builds it; the engine image carries it
    qos_levels: tuple[int, ...] = ()
    supports = ("DDS throughput, latency, latency under load. RTI's own build: udp, tcp, "
                "tls, dtls; DDS Security; multicast; batching; discovery by multicast, peers "
                "or cds. k8sdds' build on Cyclone DDS (make perftest): udp, tcp, tls; DDS "
                "Security; multicast; batching; discovery by multicast (udp) or peers")
    parser = PARSER
    parallel_streams = False
    under_load = True  # STREAM and SINK: a pub and a sub beside the round trip's, domain 1
    node_traffic = False  # no node interface counters sampled
    drain = 10.0  # subscribers print their summary and exit once the publisher finishes
    listen_port = None  # discovery waits for the peers itself
    topologies = ("peer",)  # DDS needs no broker (the CDS serves discovery only)

    def __init__(self, settings: RtiSettings = RtiSettings()):
        self.settings = settings
        self.path, self.license, self.tls_dir = settings.path, settings.license, \
            settings.tls_dir
        # none given: the one `make perftest` built, run by its name (engine_bin first on
        # the PATH here, /usr/local/bin in the engine image)
        self.own = built() if self.path is None and settings.image is None else None
        self.image, self.cds = settings.image, settings.cds or "rticlouddiscoveryservice"

    def _certs(self, role: str) -> list[str]:
        """The certificate authority, certificate and key files of a role (pub or sub)."""
        side = "pub" if role == "pub" else "sub"
        cert, key = CERTS[side]
        return [os.path.join(self.tls_dir, f) for f in (CERTS["ca"], cert, key)]

    def takes_governance(self) -> bool:
        """Whether this Perftest takes DDS Security's documents as files (4.1 on) rather
        than the study's flags; an image's Perftest is taken to be the study's (3.x)."""
        if self.image or self.unavailable():
            return False
        return version_of(self.path or self.own) >= GOVERNANCE_FILES

    def _own_credentials(self, test: Test) -> bool:
        """Whether the run makes the certificates: DDS Security for a Perftest that takes
        files, TLS without --rti-tls-dir."""
        return ((test.secure and self.takes_governance())
                or (test.transport in SECURE_TRANSPORTS and not self.tls_dir))

    def unavailable(self) -> str | None:
        if self.license and not os.path.isfile(self.license):
            return f"RTI license {self.license}: no such file"
        if self.image:
            return None  # Perftest is in the image; its pods say if it is not
        if not self.path:
            return None if self.own else f"RTI Perftest is not available: {HOW}"
        if not (os.path.isfile(self.path) and os.access(self.path, os.X_OK)):
            return f"RTI Perftest: {self.path} is not an executable file; {HOW}"
        if self.license and not os.path.isfile(self.license):
            return f"RTI license {self.license}: no such file"
        return None

    def how_to_build(self, arches: Sequence[str]) -> str:
        """The command that builds Perftest on Cyclone DDS for `arches` (this machine's, and
        the others through PERFTEST_ARCHES)."""
        others = [a for a in arches if a != HOST_ARCH]
        return ("make perftest PERFTEST_SRC=DIR"
                + (f' PERFTEST_ARCHES="{" ".join(others)}"' if others else "")
                + " (DIR: a clone of github.com/rticommunity/rtiperftest)")

    def runs_on(self) -> str:
        """What this Perftest runs on: its own word (its banner), or RTI's in an image."""
        if self.image or self.unavailable():
            return "RTI Connext DDS (an image)" if self.image else "unknown"
        return middleware_of(self.path or self.own)

    def check(self, test: Test) -> Problem:
        reason = self.unavailable()
        if reason:
            return ("engine", test.engine, reason)
        if not self.image and self.runs_on().startswith(CYCLONE):
            # what Cyclone DDS cannot give (CycloneDDSImpl.cxx refuses the same at start),
            # and RTI Connext's Cloud Discovery Service
            refused = cyclone.problem(test) or (
                ("discovery", test.discovery, "the Cloud Discovery Service is RTI Connext's")
                if test.discovery == "cds" else None)
            if refused:
                name, value, why = refused
                return (name, value, f"{why} (this perftest_cpp runs on {self.runs_on()})")
        if not MIN_SIZE <= test.data_len <= MAX_SIZE:
            return ("data_len", test.data_len,
                    f"RTI Perftest sends samples of {MIN_SIZE} to {MAX_SIZE} bytes")
        if test.load and not MIN_SIZE <= test.load_len <= MAX_SIZE:
            return ("load_len", test.load_len,
                    f"RTI Perftest sends samples of {MIN_SIZE} to {MAX_SIZE} bytes")
        if test.transport != "udp" and test.multicast:
            return ("multicast", test.multicast, "multicast needs transport=udp")
        if test.discovery == "cds" and test.transport != "udp":
            return ("discovery", test.discovery,
                    "RTI Cloud Discovery Service relays UDPv4 announcements; set transport=udp")
        if test.transport in SECURE_TRANSPORTS and self.tls_dir:
            missing = [f for role in ("pub", "sub") for f in self._certs(role)
                       if not os.path.isfile(f)]
            if missing:
                return ("transport", test.transport,
                        f"--rti-tls-dir lacks {', '.join(sorted(set(missing)))} (Perftest's "
                        "layout: cacert.pem, pub.pem, pubkey.pem, sub.pem, subkey.pem)")
        return None

    def service_ports(self, test: Test) -> Sequence[tuple[int, str]]:
        return ()  # DDS discovers peers and picks ports itself: no Service forwards that

    def roles(self, test: Test) -> Sequence[str]:
        """pub, sub0..; with discovery=cds, the Cloud Discovery Service right after pub, so it
        starts before the subscribers; under load, STREAM and SINK last."""
        roles = pubsub_roles(test)
        roles = roles[:1] + ["cds"] + roles[1:] if test.discovery == "cds" else roles
        return roles + ([STREAM, SINK] if test.load else [])

    def timeout(self, test: Test) -> float:
        return test.duration + 60  # discovery, 50 initialisation pings, the final exchange

    def secrets(self, test: Test, roles: Sequence[str], directory: str) -> None:
        """The license, copied into the run's private directory (0600), and the run's own
        certificates where the test needs them (credentials, with the study's governance):
        from there they reach the roles wherever they run (a Secret on kubernetes)."""
        if self._own_credentials(test):
            credentials.ensure(Path(directory), [r for r in roles if r != "cds"],
                               credentials.STUDY)
        if not self.license:
            return
        folder = Path(directory)
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        target = folder / LICENSE
        data = Path(self.license).read_bytes()
        if not target.exists() or target.read_bytes() != data:
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)

    def command(self, test: Test, ctx: RoleContext) -> Command:
        env = {"RTI_LICENSE_FILE": f"{ctx.secrets_dir}/{LICENSE}"} if self.license else {}
        if ctx.role == "cds":
            return Command(argv=(self.cds, "-transport", str(CDS_PORT)), env=env,
                           image=self.image)
        if ctx.role in BESIDE:  # a throughput pair of load_len samples, its own domain; it
            # outlasts the round trip beside it and is stopped once that ends
            stream = replace(test, data_len=test.load_len, latency_test=False,
                             num_subscribers=1, pub_rate=told_rate(ctx.stream_rate), load="",
                             load_len=0, no_print=False, duration=self.timeout(test))
            return self._command(stream, ctx, env, ctx.role == STREAM, STREAM_DOMAIN)
        return self._command(test, ctx, env, ctx.role == "pub", 0)

    def _command(self, test: Test, ctx: RoleContext, env: dict[str, str], publisher: bool,
                 domain: int) -> Command:
        argv = [self.path or "perftest_cpp"]
        if domain:
            argv += ["-domain", str(domain)]
        if publisher:
            argv += ["-pub", "-numSubscribers", str(test.num_subscribers),
                     "-executionTime", f"{test.duration:g}"]
            if test.latency_test:
                argv.append("-latencyTest")
            # always said: 0 is "no batching", as the study's Perftest 3.0.1 had it by default
            # ("Batching: No" in its logs); Perftest 4.x batches 8 KB unless told otherwise
            argv += ["-batchSize", str(test.batch_size)]
            if test.send_queue_size > 0:
                argv += ["-sendQueueSize", str(test.send_queue_size)]
            if test.pub_rate > 0:  # the stream's sleeps: a spinning one would take a core
                argv += ["-pubRate", f"{test.pub_rate}:sleep" if domain else str(test.pub_rate)]
        else:
            argv += ["-sub", "-sidMultiSubTest",
                     "0" if ctx.role == SINK else ctx.role.removeprefix("sub"),
                     "-numPublishers", "1"]
        argv += ["-dataLen", str(test.data_len), "-cpu", "-nic", ctx.interface,
                 "-transport", TRANSPORTS[test.transport]]
        if test.best_effort:
            argv.append("-bestEffort")
        if test.multicast:
            argv.append("-multicast")
        if test.no_print:
            argv.append("-noPrintIntervals")
        own = credentials.paths(Path(ctx.secrets_dir), ctx.role, credentials.STUDY)
        side = "pub" if publisher else "sub"
        if test.secure and self.takes_governance():
            argv += ["-secureGovernanceFile", str(own.governance), "-securePermissionsFile",
                     str(own.permissions), "-secureCertAuthority", str(own.ca),
                     "-secureCertFile", str(own.certificate), "-securePrivateKey",
                     str(own.key)]
        elif test.secure:
            argv += ["-secureEncryptBoth", "-secureSign"]
        if test.transport in SECURE_TRANSPORTS:
            ca, cert, key = (self._certs(side) if self.tls_dir
                             else (str(own.ca), str(own.certificate), str(own.key)))
            argv += ["-transportCertAuthority", ca, "-transportCertFile", cert,
                     "-transportPrivateKey", key]
        if ctx.discovery == "peers":
            port = f":{TCP_PORT}" if test.transport in ("tcp", "tls") else ""
            for role, address in ctx.endpoints.items():  # its own domain's participants
                if role != ctx.role and (role in BESIDE) == (ctx.role in BESIDE):
                    argv += ["-peer", address + port]
        elif ctx.discovery == "cds":  # as K8sDDS: every participant announces itself to CDS
            env["NDDS_DISCOVERY_PEERS"] = f"rtps@udpv4://{ctx.endpoints['cds']}:{CDS_PORT}"
        return Command(argv=tuple(argv), env=env, image=self.image)

    def version(self) -> str:
        if self.image:
            return f"image {self.image}"
        if self.unavailable():
            return "unavailable"
        return banner(self.path or self.own)
