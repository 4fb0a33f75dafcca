"""Certificates k8sdds makes for itself (the test CA of TLS and DDS Security runs, a testbed
cluster's CAs, serving and client certificates): one builder, one way to write a secret."""

from __future__ import annotations

import datetime as dt
import ipaddress
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from k8sdds.results import atomic_write

VALID_DAYS = 30


def name(common_name: str, organization: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if organization:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
    return x509.Name(attrs)


def builder(subject: x509.Name, issuer: x509.Name, public_key,
            days: int = VALID_DAYS) -> x509.CertificateBuilder:
    """Valid from an hour ago (clocks of nodes differ) for `days`."""
    now = dt.datetime.now(dt.timezone.utc)
    return (x509.CertificateBuilder().subject_name(subject).issuer_name(issuer)
            .public_key(public_key).serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(hours=1))
            .not_valid_after(now + dt.timedelta(days=days)))


def authority(subject: x509.Name,
              days: int = VALID_DAYS) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    """A self-signed CA (P-256) that signs certificates, not other CAs."""
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (builder(subject, subject, key.public_key(), days)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False), critical=True)
            .sign(key, hashes.SHA256()))
    return cert, key


def pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM,
                             serialization.PrivateFormat.TraditionalOpenSSL,
                             serialization.NoEncryption())


def serving(names: Sequence[str], days: int) -> tuple[bytes, bytes, bytes]:
    """A CA of its own and a server certificate it signs for `names` (host names or IP
    addresses, each a subjectAltName: what a client checks): the CA's PEM (what clients
    trust), the server's chain (its certificate, then the CA's) and its private key. The
    CA's key is not kept: nothing else is ever signed with it."""
    ca_cert, ca_key = authority(name(f"k8sdds serve CA for {names[0]}"), days)
    alt = []
    for each in names:
        try:
            alt.append(x509.IPAddress(ipaddress.ip_address(each)))
        except ValueError:
            alt.append(x509.DNSName(each))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (builder(name(names[0]), ca_cert.subject, key.public_key(), days)
            .add_extension(x509.SubjectAlternativeName(alt), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    return pem(ca_cert), pem(cert) + pem(ca_cert), key_pem(key)


def private(path: Path, data: bytes) -> None:
    """Write `data` readable by the owner only, atomically."""
    atomic_write(path, data, mode=0o600)
