"""`k8sdds serve` over TLS: beyond loopback the token travels encrypted (a real server, a
certificate made by openssl, a client checking it), and what it refuses before it starts."""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from .cli_support import invoke
from .test_serve import _free_port, _wait_listening

ROOT = Path(__file__).parent.parent
TOKEN = "t0ken-of-the-tls-test-0123456789"
needs_openssl = pytest.mark.skipif(shutil.which("openssl") is None,
                                   reason="needs openssl (make test installs it)")


def _stop(proc: subprocess.Popen) -> None:
    """The server stopped as a user stops it (SIGTERM), and killed if it did not end within
    20 s (the test fails then: a stop must stop it)."""
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


def _pair(where: Path, name: str = "") -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and localhost, and its key (0600), by openssl
    as the page says to make one."""
    cert, key = where / f"cert{name}.pem", where / f"key{name}.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:P-256", "-nodes", "-days", "1", "-subj", "/CN=localhost",
                    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    key.chmod(0o600)
    return cert, key


def _dated(where: Path, key_file: Path, days: int) -> Path:
    """A certificate for `key_file`'s key valid for one day, `days` from now (negative: it
    ended before today; positive: it starts after), made with the cryptography package."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.x509.oid import NameOID

    key = serialization.load_pem_private_key(key_file.read_bytes(), None)
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    start = dt.datetime.now(dt.timezone.utc) + dt.timedelta(days=days)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(start).not_valid_after(start + dt.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    path = where / f"dated{days}.pem"
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return path


def test_the_service_serves_https_beyond_loopback_as_the_page_says(tmp_path):
    """The page's lines (docs/how-to/serve.md, TLS), run in a folder holding its token:
    `serve-cert` for this machine's names instead of the page's (localhost and 127.0.0.1,
    what the client dials), then `serve` on a free port instead of 8443; a client that
    trusts tls/ca.pem reads the API with the token, one that does not is refused, and a
    plain HTTP request gets no answer."""
    from .test_docs_commands import blocks

    [block] = [b for b in blocks() if b.page == ROOT / "docs/how-to/serve.md"
               and any("--tls-cert" in words for words in b.commands)]
    made, words = block.commands
    assert made[:2] == ("k8sdds", "serve-cert")
    names = {"edge-master": "localhost", "192.168.1.10": "127.0.0.1"}
    done = invoke(*[names.get(w, w) for w in made[1:]], cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert oct((tmp_path / "tls/key.pem").stat().st_mode & 0o777) == "0o600"
    again = invoke(*[names.get(w, w) for w in made[1:]], cwd=tmp_path)  # nothing replaced
    assert again.returncode == 2 and "already there: nothing is replaced" in " ".join(
        again.stderr.split())
    port = _free_port()
    argv = [w.replace(":8443", f":{port}") for w in words[1:]]
    (tmp_path / "token").write_text(TOKEN + "\n")
    (tmp_path / "logs").mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "k8sdds", *argv, "--out", "logs"],
                            cwd=tmp_path, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        _wait_listening(proc, port)
        checked = ssl.create_default_context(cafile=str(tmp_path / "tls/ca.pem"))
        request = urllib.request.Request(f"https://127.0.0.1:{port}/api/runs",
                                         headers={"Authorization": f"Bearer {TOKEN}"})
        with urllib.request.urlopen(request, timeout=30, context=checked) as response:
            assert response.status == 200 and json.loads(response.read()) == []
        with pytest.raises(urllib.error.HTTPError) as denied:  # TLS, but no token
            urllib.request.urlopen(f"https://127.0.0.1:{port}/api/runs", timeout=30,
                                   context=checked)
        assert denied.value.code == 401  # its connection left open: the stop below
        # waits for it a few seconds only (k8sdds.cli.serve.SHUTDOWN_WAIT; asyncio's 30 s)
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            urllib.request.urlopen(request.full_url.replace("https:", "http:"), timeout=10)
        with pytest.raises(urllib.error.URLError) as untrusted:  # no CA given: refused
            urllib.request.urlopen(request, timeout=10,
                                   context=ssl.create_default_context())
        assert "CERTIFICATE_VERIFY_FAILED" in str(untrusted.value)
    finally:
        _stop(proc)


@needs_openssl
def test_what_serve_refuses_before_it_listens(tmp_path):
    cert, key = _pair(tmp_path)
    other_cert, _ = _pair(tmp_path, "-other")
    (tmp_path / "token").write_text(TOKEN)
    base = ("serve", "--out", str(tmp_path / "logs"), "--token-file", str(tmp_path / "token"))
    cases = [
        (("--listen", "0.0.0.0:8443"), "give --tls-cert and --tls-key"),
        (("--tls-cert", str(cert)), "--tls-cert and --tls-key go together"),
        (("--tls-cert", str(other_cert), "--tls-key", str(key)),
         "not a PEM certificate and its private key"),
        (("--tls-cert", str(tmp_path / "absent.pem"), "--tls-key", str(key)),
         "absent.pem: no such file"),
    ]
    for args, said in cases:
        done = invoke(*base, *args)
        assert done.returncode == 2 and said in " ".join(done.stderr.split()), (args,
                                                                               done.stderr)
        assert "Traceback" not in done.stderr
    for days, said in ((-2, "is expired: valid from"), (+3, "is not valid yet: valid from")):
        dated = _dated(tmp_path, key, days)
        done = invoke(*base, "--tls-cert", str(dated), "--tls-key", str(key))
        assert done.returncode == 2 and said in " ".join(done.stderr.split()), done.stderr
        assert "every client would refuse it" in " ".join(done.stderr.split())
    key.chmod(0o644)
    done = invoke(*base, "--tls-cert", str(cert), "--tls-key", str(key))
    assert done.returncode == 2 and "others can read this private key" in " ".join(
        done.stderr.split()) and "chmod 600" in done.stderr
    assert not (tmp_path / "logs").exists()  # refused before anything was made


@needs_openssl
def test_serve_cert_names_each_address_and_refuses_what_is_no_name(tmp_path):
    """openssl reads what `serve-cert` made: the chain verifies against ca.pem, and each
    name and address given is a subjectAltName; a name that is neither is refused and
    nothing is written."""
    done = invoke("serve-cert", "pi-master.lan", "10.0.0.7", "--days", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    tls = tmp_path / "tls"
    verified = subprocess.run(["openssl", "verify", "-CAfile", str(tls / "ca.pem"),
                               str(tls / "cert.pem")], capture_output=True, text=True)
    assert verified.returncode == 0 and verified.stdout.strip().endswith(": OK")
    alt = subprocess.run(["openssl", "x509", "-in", str(tls / "cert.pem"), "-noout", "-ext",
                          "subjectAltName"], capture_output=True, text=True, check=True).stdout
    assert "DNS:pi-master.lan" in alt and "IP Address:10.0.0.7" in alt
    for name in ("host;rm -rf /", "héllo.lan", "-lead.lan"):  # the second: a traceback once
        bad = invoke("serve-cert", "--out", str(tmp_path / "bad"), "--", name)
        assert bad.returncode == 2 and "neither an IP address nor a host name" in " ".join(
            bad.stderr.split()), (name, bad.stderr)
        assert "Traceback" not in bad.stderr and not (tmp_path / "bad").exists()


@needs_openssl
@pytest.mark.service  # seconds of waiting on purpose: make test, not make check
def test_a_tls_handshake_not_done_within_the_read_timeout_is_closed(tmp_path):
    """Clients that connect to the TLS port and never complete a handshake (silent, or one
    that stops after a few bytes of its ClientHello) are closed after --read-timeout (2 s
    here; asyncio's own wait is 60 s), and a real client is served beside them."""
    import socket
    import time

    cert, key = _pair(tmp_path)
    (tmp_path / "logs").mkdir()
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "k8sdds", "serve", "--listen",
                             f"127.0.0.1:{port}", "--out", str(tmp_path / "logs"),
                             "--tls-cert", str(cert), "--tls-key", str(key),
                             "--read-timeout", "2"], stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        _wait_listening(proc, port)
        silent = [socket.create_connection(("127.0.0.1", port), timeout=15) for _ in range(5)]
        partial = socket.create_connection(("127.0.0.1", port), timeout=15)
        partial.sendall(b"\x16\x03\x01\x02\x00\x01")  # a ClientHello's first bytes only
        started = time.monotonic()
        checked = ssl.create_default_context(cafile=str(cert))
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/api/runs", timeout=30,
                                    context=checked) as response:
            assert response.status == 200
        for s in [*silent, partial]:
            try:  # closed by the server: end of stream, or a reset (the 15 s socket
                assert s.recv(4096) == b""  # timeout would fail the test instead)
            except ConnectionResetError:
                pass
            s.close()
        closed = time.monotonic() - started
        assert closed < 10, closed  # --read-timeout 2, not asyncio's 60
    finally:
        _stop(proc)
    assert "Traceback" not in proc.stderr.read()
