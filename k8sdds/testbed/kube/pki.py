"""The cluster's credentials: a CA, the API server's serving certificate, the ServiceAccount
signing key, and one static token per client (admin, each kubelet, the controllers)."""

from __future__ import annotations

import ipaddress
import secrets
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from k8sdds import certs

SERVICE_IP = "10.96.0.1"  # the `kubernetes` Service: first address of the service range


@dataclass(frozen=True)
class Pki:
    directory: Path
    tokens: dict[str, str]  # client -> its bearer token

    @property
    def ca(self) -> Path:
        return self.directory / "ca.crt"


def _key_pem(key) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


def make(directory: Path, api_address: str, clients: dict[str, tuple[str, str]]) -> Pki:
    """Credentials in `directory` (0700); `clients`: name -> (user, group) of a token."""
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    ca, ca_key = certs.authority(certs.name("k8sdds-testbed-ca"))
    key = ec.generate_private_key(ec.SECP256R1())
    names = [x509.DNSName(n) for n in ("kubernetes", "kubernetes.default",
                                        "kubernetes.default.svc", "localhost")]
    ips = [x509.IPAddress(ipaddress.ip_address(a)) for a in (api_address, SERVICE_IP,
                                                                "127.0.0.1")]
    api = (certs.builder(certs.name("kube-apiserver"), ca.subject, key.public_key())
           .add_extension(x509.SubjectAlternativeName(names + ips), critical=False)
           .sign(ca_key, hashes.SHA256()))
    (directory / "ca.crt").write_bytes(certs.pem(ca))
    (directory / "apiserver.crt").write_bytes(certs.pem(api))
    certs.private(directory / "apiserver.key", _key_pem(key))
    sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    certs.private(directory / "sa.key", _key_pem(sa))
    (directory / "sa.pub").write_bytes(sa.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    _front_proxy(directory)
    tokens = {name: secrets.token_hex(16) for name in clients}
    certs.private(directory / "tokens.csv", "".join(
        f'{tokens[name]},{user},{name},"{group}"\n' for name, (user, group) in clients.items())
        .encode())
    return Pki(directory, tokens)


def _front_proxy(directory: Path) -> None:
    """The aggregation layer's own CA and the client certificate the API server proxies to
    extension API servers (metrics-server) with, as kubeadm makes them."""
    ca, ca_key = certs.authority(certs.name("k8sdds-front-proxy-ca"))
    key = ec.generate_private_key(ec.SECP256R1())
    client = (certs.builder(certs.name("front-proxy-client"), ca.subject, key.public_key())
              .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.CLIENT_AUTH]),
                             critical=False)
              .sign(ca_key, hashes.SHA256()))
    (directory / "front-proxy-ca.crt").write_bytes(certs.pem(ca))
    (directory / "front-proxy-client.crt").write_bytes(certs.pem(client))
    certs.private(directory / "front-proxy-client.key", _key_pem(key))


def kubeconfig(pki: Pki, server: str, client: str) -> str:
    """A kubeconfig for `client` (its token), as YAML text."""
    import yaml

    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "k8sdds",
        "clusters": [{"name": "k8sdds", "cluster": {"server": server,
                                                    "certificate-authority": str(pki.ca)}}],
        "users": [{"name": client, "user": {"token": pki.tokens[client]}}],
        "contexts": [{"name": "k8sdds", "context": {"cluster": "k8sdds", "user": client}}]})
