"""The per-run CA, identities and signed DDS Security documents."""

from __future__ import annotations

import shutil
import stat
import subprocess

import pytest
from cryptography import x509

from k8sdds.engines import credentials


def _mode(path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_files_are_private_and_identities_chain_to_the_ca(tmp_path):
    d = tmp_path / "credentials"
    ids = credentials.ensure(d, ["pub", "sub0"])
    assert _mode(d) == 0o700
    assert {_mode(p) for p in d.iterdir()} == {0o600}
    ca = x509.load_pem_x509_certificate(ids["pub"].ca.read_bytes())
    for role, ident in ids.items():
        cert = x509.load_pem_x509_certificate(ident.certificate.read_bytes())
        cert.verify_directly_issued_by(ca)
        assert cert.subject == credentials.subject(role)
        keystore = ident.keystore.read_text()
        assert keystore.count("BEGIN CERTIFICATE") == 2 and "PRIVATE KEY" in keystore
        # the grant names exactly this certificate's subject
        assert (f"<subject_name>{cert.subject.rfc4514_string()}</subject_name>"
                in ident.permissions.read_text())
    assert not list(d.glob(".*.tmp"))


def test_a_second_call_keeps_the_ca_and_adds_roles(tmp_path):
    first = credentials.ensure(tmp_path, ["pub"])
    ca, pub = first["pub"].ca.read_bytes(), first["pub"].certificate.read_bytes()
    second = credentials.ensure(tmp_path, ["pub", "sub3"])
    assert second["pub"].ca.read_bytes() == ca
    assert second["pub"].certificate.read_bytes() == pub
    assert second["sub3"].certificate.exists()


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_documents_verify_as_smime_signed_by_the_ca(tmp_path):
    ident = credentials.ensure(tmp_path, ["sub0"])["sub0"]
    for doc, needle in ((ident.governance, "<data_protection_kind>ENCRYPT"),
                        (ident.permissions, "<grant name=\"sub0\">")):
        proc = subprocess.run(["openssl", "smime", "-verify", "-in", str(doc), "-CAfile",
                               str(ident.ca), "-text"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        assert needle in proc.stdout
    other = credentials.ensure(tmp_path / "other", ["sub0"])["sub0"]
    proc = subprocess.run(["openssl", "smime", "-verify", "-in", str(ident.permissions),
                           "-CAfile", str(other.ca), "-text"], capture_output=True)
    assert proc.returncode != 0  # signed by this run's CA, not any other
