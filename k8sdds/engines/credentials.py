"""Per-run test credentials for TLS and DDS Security: a CA, one identity per role, and the
governance and permissions documents signed by the CA (S/MIME, as DDS Security requires).

Everything lives in one private directory of the run (mode 0700, files 0600). It is made once
and reused, so a resumed run keeps its CA. These are throwaway credentials for a benchmark:
they prove the cost of the cryptography, not the safety of a deployment.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from xml.sax.saxutils import escape

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs7

from k8sdds import certs

ORGANIZATION = "k8sdds"
DOMAINS = (0, 230)  # every DDS domain id

GOVERNANCE = """\
<?xml version="1.0" encoding="UTF-8"?>
<dds xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" \
xsi:noNamespaceSchemaLocation="http://www.omg.org/spec/DDS-Security/20170801/omg_shared_ca_governance.xsd">
  <domain_access_rules>
    <domain_rule>
      <domains><id_range><min>{lo}</min><max>{hi}</max></id_range></domains>
      <allow_unauthenticated_participants>false</allow_unauthenticated_participants>
      <enable_join_access_control>{access}</enable_join_access_control>
      <discovery_protection_kind>{discovery}</discovery_protection_kind>
      <liveliness_protection_kind>{liveliness}</liveliness_protection_kind>
      <rtps_protection_kind>{rtps}</rtps_protection_kind>
      <topic_access_rules>
        <topic_rule>
          <topic_expression>*</topic_expression>
          <enable_discovery_protection>{topic_discovery}</enable_discovery_protection>
          <enable_liveliness_protection>{topic_liveliness}</enable_liveliness_protection>
          <enable_read_access_control>{access}</enable_read_access_control>
          <enable_write_access_control>{access}</enable_write_access_control>
          <metadata_protection_kind>{metadata}</metadata_protection_kind>
          <data_protection_kind>{data}</data_protection_kind>
        </topic_rule>
      </topic_access_rules>
    </domain_rule>
  </domain_access_rules>
</dds>
"""


@dataclass(frozen=True)
class Protection:
    """What a governance document protects, in DDS Security's kinds (NONE, SIGN, ENCRYPT),
    and whether it controls who joins, reads and writes (by the signed permissions)."""

    name: str  # "" for governance.p7s, else its document is governance-NAME.p7s
    rtps: str  # whole RTPS messages
    discovery: str  # the secure discovery endpoints (and the topics' discovery protection)
    liveliness: str
    metadata: str  # submessages
    data: str  # serialized payloads
    access_control: bool

    @property
    def file(self) -> str:
        """Its document's name in a credentials directory."""
        return f"governance-{self.name}.p7s" if self.name else "governance.p7s"

    def document(self) -> str:
        lo, hi = DOMAINS
        on = {True: "true", False: "false"}
        return GOVERNANCE.format(
            lo=lo, hi=hi, access=on[self.access_control], rtps=self.rtps,
            discovery=self.discovery, liveliness=self.liveliness, metadata=self.metadata,
            data=self.data, topic_discovery=on[self.discovery != "NONE"],
            topic_liveliness=on[self.liveliness != "NONE"])


# ddsperf's: everything encrypted but whole messages, and access controlled
ENCRYPTED = Protection("", rtps="NONE", discovery="ENCRYPT", liveliness="ENCRYPT",
                       metadata="ENCRYPT", data="ENCRYPT", access_control=True)
# The K8sDDS study's: its Perftest 3.0.1 flags -secureSign -secureEncryptBoth chose the
# governance Perftest ships as resource/secure/signed_PerftestGovernance_SignEncryptBoth.xml
# (-secureSign: RTPS messages signed; -secureEncryptBoth: data and submessages encrypted;
# discovery and liveliness in clear, no access control). Perftest 4.1 on takes the document
# itself (-secureGovernanceFile); k8sdds writes this one for it.
STUDY = Protection("study", rtps="SIGN", discovery="NONE", liveliness="NONE",
                   metadata="ENCRYPT", data="ENCRYPT", access_control=False)

PERMISSIONS = """\
<?xml version="1.0" encoding="UTF-8"?>
<dds xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" \
xsi:noNamespaceSchemaLocation="http://www.omg.org/spec/DDS-Security/20170801/omg_shared_ca_permissions.xsd">
  <permissions>
    <grant name="{role}">
      <subject_name>{subject}</subject_name>
      <validity><not_before>{start}</not_before><not_after>{end}</not_after></validity>
      <allow_rule>
        <domains><id_range><min>{lo}</min><max>{hi}</max></id_range></domains>
        <publish><topics><topic>*</topic></topics><partitions><partition>*</partition>\
</partitions></publish>
        <subscribe><topics><topic>*</topic></topics><partitions><partition>*</partition>\
</partitions></subscribe>
      </allow_rule>
      <default>DENY</default>
    </grant>
  </permissions>
</dds>
"""


@dataclass(frozen=True)
class Identity:
    """The files of one role, as absolute paths."""

    ca: Path  # the CA certificate: identity CA and permissions CA
    certificate: Path
    key: Path
    keystore: Path  # certificate + key + CA in one PEM file, as Cyclone's TLS wants it
    governance: Path
    permissions: Path


def paths(directory: Path, role: str, protection: Protection = ENCRYPTED) -> Identity:
    """Where the files of `role` are (or will be) in the credentials `directory`, with the
    governance document of `protection`."""
    d = Path(directory).resolve()
    return Identity(ca=d / "ca.pem", certificate=d / f"{role}.pem", key=d / f"{role}.key",
                    keystore=d / f"{role}.keystore.pem", governance=d / protection.file,
                    permissions=d / f"{role}.permissions.p7s")


def ensure(directory: Path, roles: list[str] | tuple[str, ...],
           protection: Protection = ENCRYPTED) -> dict[str, Identity]:
    """Make the CA, the governance document of `protection` and the identity of each role
    that has none yet; return every role's files."""
    directory = Path(directory)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(directory, 0o700)
    ca_cert, ca_key = _authority(directory)
    governance = directory / protection.file
    if not governance.exists():
        certs.private(governance, _sign(protection.document(), ca_cert, ca_key))
    out = {}
    for role in roles:
        ident = paths(directory, role, protection)
        if not all(p.exists() for p in (ident.certificate, ident.key, ident.keystore,
                                        ident.permissions)):
            _identity(ident, role, ca_cert, ca_key)
        out[role] = ident
    return out


def subject(role: str) -> x509.Name:
    return certs.name(role, ORGANIZATION)


def _authority(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert_path, key_path = directory / "ca.pem", directory / "ca.key"
    if cert_path.exists() and key_path.exists():
        cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    else:
        cert, key = certs.authority(certs.name("k8sdds test CA", ORGANIZATION))
        certs.private(key_path, certs.key_pem(key))
        certs.private(cert_path, certs.pem(cert))
    return cert, key


def _identity(ident: Identity, role: str, ca_cert: x509.Certificate,
              ca_key: ec.EllipticCurvePrivateKey) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    cert = certs.builder(subject(role), ca_cert.subject, key.public_key()).sign(
        ca_key, hashes.SHA256())
    cert_pem = cert.public_bytes(serialization.Encoding.PEM)
    ca_pem = ca_cert.public_bytes(serialization.Encoding.PEM)
    certs.private(ident.key, certs.key_pem(key))
    certs.private(ident.certificate, cert_pem)
    certs.private(ident.keystore, cert_pem + certs.key_pem(key) + ca_pem)
    lo, hi = DOMAINS
    start = cert.not_valid_before_utc.strftime("%Y-%m-%dT%H:%M:%S")
    end = cert.not_valid_after_utc.strftime("%Y-%m-%dT%H:%M:%S")
    document = PERMISSIONS.format(role=escape(role), subject=escape(subject(role)
                                                                    .rfc4514_string()),
                                  start=start, end=end, lo=lo, hi=hi)
    certs.private(ident.permissions, _sign(document, ca_cert, ca_key))


def _sign(document: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> bytes:
    """S/MIME, detached, text: what `openssl smime -sign -text` writes."""
    return (pkcs7.PKCS7SignatureBuilder().set_data(document.encode())
            .add_signer(cert, key, hashes.SHA256())
            .sign(serialization.Encoding.SMIME,
                  [pkcs7.PKCS7Options.DetachedSignature, pkcs7.PKCS7Options.Text]))


