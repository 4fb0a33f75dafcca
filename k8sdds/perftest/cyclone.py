"""Cyclone DDS configuration (the CYCLONEDDS_URI file) for one process."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class CycloneConfig:
    interface: str
    allow_multicast: str  # "true", "spdp" (discovery only) or "false"
    transport: str = "udp"  # "udp" or "tcp"
    tcp_port: int | None = None
    peers: Sequence[str] = ()  # "ip" or "ip:port"
    max_participant_index: int = 9
    write_batch: bool = False
    whc_high_bytes: int = 0  # writer history cache high watermark; 0: Cyclone's default


def render(cfg: CycloneConfig) -> str:
    """The XML text; built with ElementTree so no value can break the document."""
    root = ET.Element("CycloneDDS")
    domain = ET.SubElement(root, "Domain", id="any")
    general = ET.SubElement(domain, "General")
    ifaces = ET.SubElement(general, "Interfaces")
    ET.SubElement(ifaces, "NetworkInterface", name=cfg.interface)
    ET.SubElement(general, "AllowMulticast").text = cfg.allow_multicast
    ET.SubElement(general, "Transport").text = cfg.transport
    if cfg.transport == "tcp" and cfg.tcp_port is not None:
        tcp = ET.SubElement(domain, "TCP")
        ET.SubElement(tcp, "Port").text = str(cfg.tcp_port)
    disc = ET.SubElement(domain, "Discovery")
    ET.SubElement(disc, "ParticipantIndex").text = "auto"
    ET.SubElement(disc, "MaxAutoParticipantIndex").text = str(cfg.max_participant_index)
    if cfg.peers:
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
    ET.indent(root)
    return ET.tostring(root, encoding="unicode") + "\n"
