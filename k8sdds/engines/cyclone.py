"""Cyclone DDS configuration (the CYCLONEDDS_URI file) for one process."""

from __future__ import annotations

import functools
import glob
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from k8sdds.engines.base import Problem
from k8sdds.model import Test

SPDP_INTERVAL = "1s"  # participant announcements to listed peers (Cyclone's default: 30 s)
# where distributions put Cyclone's DDS Security plugins (Debian: a private directory)
PLUGIN_DIRS = ("/usr/lib/*/libddsc0debian", "/usr/lib/*", "/usr/lib64", "/usr/lib",
               "/usr/local/lib", "/opt/cyclonedds/lib")


@functools.cache
def security_plugins() -> str | None:
    """The directory holding libdds_security_auth/crypto/ac.so, or None."""
    for pattern in PLUGIN_DIRS:
        for directory in sorted(glob.glob(pattern)):
            if all(Path(directory, f"libdds_security_{p}.so").exists()
                   for p in ("auth", "crypto", "ac")):
                return directory
    return None


def problem(test: Test) -> Problem:
    """What Cyclone DDS itself cannot give a test, whichever program runs on it (ddsperf,
    Perftest built on it): DTLS, DDS Security without its plugins, multicast discovery over
    TCP or TLS."""
    if test.transport == "dtls":
        return ("transport", test.transport,
                "Cyclone DDS has no DTLS transport; allowed here: udp, tcp, tls")
    if test.secure and security_plugins() is None:
        return ("secure", test.secure,
                "the DDS Security plugins of Cyclone DDS (libdds_security_auth.so) are "
                "not installed; install libddsc0debian, or set secure=false")
    if test.transport in ("tcp", "tls") and test.discovery == "multicast":
        return ("discovery", test.discovery,
                f"transport={test.transport} discovers by peers only on Cyclone DDS")
    return None


@dataclass(frozen=True)
class SecurityFiles:
    """DDS Security: the plugin libraries and this participant's credentials (absolute)."""

    plugins: str  # directory of libdds_security_{auth,crypto,ac}.so
    identity_ca: str
    certificate: str
    private_key: str
    governance: str
    permissions: str


@dataclass(frozen=True)
class CycloneConfig:
    interface: str  # "": Cyclone picks the interface itself
    allow_multicast: str  # "true", "spdp" (discovery only) or "false"
    transport: str = "udp"  # "udp" or "tcp"
    tcp_port: int | None = None
    peers: Sequence[str] = ()  # "ip" or "ip:port"
    max_participant_index: int = 9
    write_batch: bool = False
    whc_high_bytes: int = 0  # writer history cache high watermark; 0: Cyclone's default
    max_message_bytes: int = 0  # largest datagram Cyclone builds; 0: its default (14720)
    fragment_bytes: int = 0  # samples above this go as DDS fragments; 0: its default (1344)
    ssl_keystore: str | None = None  # TLS over the TCP transport: certificate, key and CA
    security: SecurityFiles | None = None  # DDS Security plugins and credentials


def render(cfg: CycloneConfig) -> str:
    """The XML text; built with ElementTree so no value can break the document."""
    root = ET.Element("CycloneDDS")
    domain = ET.SubElement(root, "Domain", id="any")
    general = ET.SubElement(domain, "General")
    ifaces = ET.SubElement(general, "Interfaces")
    if cfg.interface:
        ET.SubElement(ifaces, "NetworkInterface", name=cfg.interface)
    else:  # where the interface's name is not known (a node's own network on Kubernetes)
        ET.SubElement(ifaces, "NetworkInterface", autodetermine="true")
    ET.SubElement(general, "AllowMulticast").text = cfg.allow_multicast
    ET.SubElement(general, "Transport").text = cfg.transport
    if cfg.max_message_bytes:
        ET.SubElement(general, "MaxMessageSize").text = f"{cfg.max_message_bytes}B"
    if cfg.fragment_bytes:
        ET.SubElement(general, "FragmentSize").text = f"{cfg.fragment_bytes}B"
    if cfg.transport == "tcp" and cfg.tcp_port is not None:
        tcp = ET.SubElement(domain, "TCP")
        ET.SubElement(tcp, "Port").text = str(cfg.tcp_port)
    if cfg.ssl_keystore:
        ssl = ET.SubElement(domain, "SSL")
        ET.SubElement(ssl, "Enable").text = "true"
        ET.SubElement(ssl, "CertificateVerification").text = "true"
        ET.SubElement(ssl, "VerifyClient").text = "true"
        ET.SubElement(ssl, "SelfSignedCertificates").text = "false"
        ET.SubElement(ssl, "KeystoreFile").text = cfg.ssl_keystore
        ET.SubElement(ssl, "KeyPassphrase").text = ""
        ET.SubElement(ssl, "MinimumTLSVersion").text = "1.3"
    disc = ET.SubElement(domain, "Discovery")
    ET.SubElement(disc, "ParticipantIndex").text = "auto"
    ET.SubElement(disc, "MaxAutoParticipantIndex").text = str(cfg.max_participant_index)
    if cfg.peers:
        # unicast discovery: a peer's first announcement can be lost (its pod network not
        # carrying yet, the peer not started); Cyclone repeats it every 30 s by default, past
        # ddsperf's wait for its peers (-Q initwait, 10 s), so k8sdds repeats it every second
        ET.SubElement(disc, "SPDPInterval").text = SPDP_INTERVAL
        peers = ET.SubElement(disc, "Peers")
        for address in cfg.peers:
            ET.SubElement(peers, "Peer", address=address)
    if cfg.write_batch or cfg.whc_high_bytes:
        internal = ET.SubElement(domain, "Internal")
        if cfg.write_batch:
            ET.SubElement(internal, "WriteBatch").text = "true"
        if cfg.whc_high_bytes:
            marks = ET.SubElement(internal, "Watermarks")
            ET.SubElement(marks, "WhcHigh").text = f"{cfg.whc_high_bytes}B"
    if cfg.security:
        _security(domain, cfg.security)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"


def _security(domain: ET.Element, sec: SecurityFiles) -> None:
    security = ET.SubElement(domain, "Security")

    def plugin(parent: ET.Element, lib: str, kind: str) -> None:
        ET.SubElement(parent, "Library", path=f"{sec.plugins}/libdds_security_{lib}.so",
                      initFunction=f"init_{kind}", finalizeFunction=f"finalize_{kind}")

    auth = ET.SubElement(security, "Authentication")
    plugin(auth, "auth", "authentication")
    ET.SubElement(auth, "IdentityCertificate").text = _file_uri(sec.certificate)
    ET.SubElement(auth, "IdentityCA").text = _file_uri(sec.identity_ca)
    ET.SubElement(auth, "PrivateKey").text = _file_uri(sec.private_key)
    crypto = ET.SubElement(security, "Cryptographic")
    plugin(crypto, "crypto", "crypto")
    access = ET.SubElement(security, "AccessControl")
    plugin(access, "ac", "access_control")
    ET.SubElement(access, "PermissionsCA").text = _file_uri(sec.identity_ca)
    ET.SubElement(access, "Governance").text = _file_uri(sec.governance)
    ET.SubElement(access, "Permissions").text = _file_uri(sec.permissions)


def _file_uri(path: str) -> str:
    """DDS Security's `file:` form; Cyclone takes the rest as a plain path."""
    return f"file:{path}"
