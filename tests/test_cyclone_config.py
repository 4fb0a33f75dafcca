"""The generated CYCLONEDDS_URI file and the ddsperf command lines."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import replace
from pathlib import Path

from k8sdds.engines import RoleContext, registry
from k8sdds.engines.cyclone import CycloneConfig, render
from k8sdds.model import Test

BASE = Test(row=0, line=2, data_len=1024, multicast=False, num_subscribers=2,
            best_effort=False, batch_size=0, datapath="flannel-vxlan", duration=5)
ENGINES = registry()  # a fresh registry, as a run builds one
ENDPOINTS = {"pub": "10.244.0.10", "sub0": "10.244.1.10", "sub1": "10.244.2.10"}


def _ctx(role, discovery="peers", tmp="/tmp/x"):
    return RoleContext(role=role, address=ENDPOINTS[role], interface="eth0",
                       endpoints=ENDPOINTS, discovery=discovery, config_dir=tmp)


def _xml(cmd) -> ET.Element:
    [text] = cmd.files.values()
    return ET.fromstring(text)


def test_render_escapes_values():
    root = ET.fromstring(render(CycloneConfig(interface='e"><x', allow_multicast="false",
                                              peers=["1.2.3.4", "<&>"])))
    assert root.find(".//NetworkInterface").get("name") == 'e"><x'
    assert [p.get("address") for p in root.iter("Peer")] == ["1.2.3.4", "<&>"]


def test_listed_peers_are_announced_to_every_second_not_cyclones_30_s():
    """ddsperf waits 10 s for its peers: one lost announcement must not cost the repeat."""
    listed = ET.fromstring(render(CycloneConfig(interface="", allow_multicast="false",
                                                peers=["10.244.1.5"])))
    assert listed.find("./Domain/Discovery/SPDPInterval").text == "1s"
    multicast = ET.fromstring(render(CycloneConfig(interface="", allow_multicast="true")))
    assert multicast.find(".//SPDPInterval") is None


def test_throughput_roles_and_argv():
    engine = ENGINES["ddsperf"]
    assert engine.roles(BASE) == ["pub", "sub0", "sub1"]
    pub = engine.command(BASE, _ctx("pub"))
    assert pub.argv == ("ddsperf", "-D", "5", "-Q", "minmatch:2", "-Q", "initwait:20",
                        "pub", "inf", "size", "1024")
    sub = engine.command(BASE, _ctx("sub1"))
    assert sub.argv[-1] == "sub" and "minmatch:1" in sub.argv
    assert sub.env["CYCLONEDDS_URI"] == "file:///tmp/x/sub1.cyclonedds.xml"
    # beside a stream at full rate the peers get 30 s to match, not 20
    loaded = replace(BASE, latency_test=True, load="max", load_len=1024)
    assert "initwait:30" in engine.command(loaded, _ctx("pub")).argv


def test_peers_discovery_lists_every_role_and_disables_multicast():
    root = _xml(ENGINES["ddsperf"].command(BASE, _ctx("sub0")))
    assert [p.get("address") for p in root.iter("Peer")] == list(ENDPOINTS.values())
    assert root.find(".//AllowMulticast").text == "false"
    assert root.find(".//NetworkInterface").get("name") == "eth0"


def test_multicast_discovery_and_multicast_data():
    engine = ENGINES["ddsperf"]
    root = _xml(engine.command(BASE, _ctx("pub", discovery="multicast")))
    assert root.find(".//AllowMulticast").text == "spdp" and not list(root.iter("Peer"))
    root = _xml(engine.command(replace(BASE, multicast=True), _ctx("pub", "multicast")))
    assert root.find(".//AllowMulticast").text == "true"


def test_tcp_gets_a_fixed_port_per_role_and_peers_with_ports():
    test = replace(BASE, transport="tcp")
    root = _xml(ENGINES["ddsperf"].command(test, _ctx("sub1")))
    assert root.find(".//Transport").text == "tcp"
    assert root.find(".//TCP/Port").text == "7412"
    assert [p.get("address") for p in root.iter("Peer")] == [
        "10.244.0.10:7410", "10.244.1.10:7411", "10.244.2.10:7412"]


def test_latency_best_effort_batching_rate_and_queue():
    engine = ENGINES["ddsperf"]
    lat = replace(BASE, latency_test=True, best_effort=True, data_len=64)
    assert engine.command(lat, _ctx("pub")).argv[-4:] == ("-u", "ping", "size", "64")
    assert engine.command(lat, _ctx("sub0")).argv[-2:] == ("-u", "pong")
    batched = replace(BASE, batch_size=8192, pub_rate=500, send_queue_size=50)
    cmd = engine.command(batched, _ctx("pub"))
    assert cmd.argv[-4:] == ("pub", "500Hz", "size", "1024")
    root = _xml(cmd)
    assert root.find(".//Internal/WriteBatch").text == "true"
    assert root.find(".//Internal/Watermarks/WhcHigh").text == f"{50 * 1024}B"


def _secure_ctx(role, secrets):
    return replace(_ctx(role), secrets_dir=str(secrets))


def test_tls_is_tcp_with_ssl_and_the_role_keystore(tmp_path):
    test = replace(BASE, transport="tls")
    root = _xml(ENGINES["ddsperf"].command(test, _secure_ctx("sub1", tmp_path)))
    assert root.find(".//Transport").text == "tcp"
    assert root.find(".//TCP/Port").text == "7412"
    assert root.find(".//SSL/Enable").text == "true"
    assert root.find(".//SSL/CertificateVerification").text == "true"
    assert root.find(".//SSL/KeystoreFile").text == str(tmp_path / "sub1.keystore.pem")
    assert [p.get("address") for p in root.iter("Peer")][0] == "10.244.0.10:7410"
    assert root.find(".//Security") is None


def test_secure_configures_the_three_plugins_and_this_role_credentials(tmp_path,
                                                                        monkeypatch):
    from k8sdds.engines import ddsperf
    monkeypatch.setattr(ddsperf, "security_plugins", lambda: "/plugins")
    test = replace(BASE, secure=True)
    root = _xml(ENGINES["ddsperf"].command(test, _secure_ctx("pub", tmp_path)))
    assert root.find(".//SSL") is None and root.find(".//Transport").text == "udp"
    libs = {lib.get("path"): (lib.get("initFunction"), lib.get("finalizeFunction"))
            for lib in root.iter("Library")}
    assert libs == {
        "/plugins/libdds_security_auth.so": ("init_authentication", "finalize_authentication"),
        "/plugins/libdds_security_crypto.so": ("init_crypto", "finalize_crypto"),
        "/plugins/libdds_security_ac.so": ("init_access_control", "finalize_access_control")}
    sec = root.find(".//Security")
    assert sec.find("Authentication/IdentityCertificate").text == f"file:{tmp_path}/pub.pem"
    assert sec.find("Authentication/PrivateKey").text == f"file:{tmp_path}/pub.key"
    assert sec.find("Authentication/IdentityCA").text == f"file:{tmp_path}/ca.pem"
    assert sec.find("AccessControl/PermissionsCA").text == f"file:{tmp_path}/ca.pem"
    assert sec.find("AccessControl/Governance").text == f"file:{tmp_path}/governance.p7s"
    assert (sec.find("AccessControl/Permissions").text
            == f"file:{tmp_path}/pub.permissions.p7s")


def test_ddsperf_refuses_what_cyclone_cannot_do(monkeypatch):
    from k8sdds.engines import cyclone
    engine = ENGINES["ddsperf"]
    assert "no DTLS" in engine.check(replace(BASE, transport="dtls"))[2]
    assert engine.check(replace(BASE, transport="tls", multicast=True))[0] == "multicast"
    assert engine.check(replace(BASE, transport="tls")) is None
    monkeypatch.setattr(cyclone, "security_plugins", lambda: None)
    field, _, reason = engine.check(replace(BASE, secure=True))
    assert field == "secure" and "libddsc0debian" in reason


def test_debian_security_plugins_are_found():
    from k8sdds.engines import cyclone
    found = cyclone.security_plugins()
    assert found is not None, "cyclonedds-tools pulls libddsc0debian, which ships them"
    assert (Path(found) / "libdds_security_auth.so").exists()


def test_without_batching_a_datagram_holds_one_sample_never_two():
    engine = ENGINES["ddsperf"]
    for size in (64, 256, 1024, 16384):
        general = _xml(engine.command(replace(BASE, data_len=size), _ctx("pub"))).find(
            ".//General")
        largest = int(general.findtext("MaxMessageSize").rstrip("B"))
        fragment = int(general.findtext("FragmentSize").rstrip("B"))
        assert size < fragment <= largest  # the whole sample in one datagram ...
        # ... and no room for a second one (each sample brings at least 40 bytes of
        # submessage headers, the datagram a 20-byte RTPS header)
        assert largest < 2 * (size + 40) + 20
    huge = _xml(engine.command(replace(BASE, data_len=1_000_000), _ctx("pub")))
    assert int(huge.findtext(".//MaxMessageSize").rstrip("B")) <= 65000  # a UDP datagram
    assert int(huge.findtext(".//FragmentSize").rstrip("B")) < 65000  # DDS fragments then
    batched = _xml(engine.command(replace(BASE, batch_size=8192), _ctx("pub")))
    assert batched.find(".//MaxMessageSize") is None  # batching packs, as asked
