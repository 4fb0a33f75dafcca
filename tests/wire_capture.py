"""Run inside the switch namespace: `wire_capture.py IFACE SECONDS HEXPATTERN` captures every
frame on IFACE for SECONDS and prints JSON: frames seen, frames holding the pattern, and UDP
frames to the WireGuard port (51820)."""

import json
import socket
import struct
import sys
import time

iface, seconds, pattern = sys.argv[1], float(sys.argv[2]), bytes.fromhex(sys.argv[3])
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003))
s.bind((iface, 0))
s.settimeout(0.1)
frames = with_pattern = wireguard = 0
deadline = time.monotonic() + seconds
while time.monotonic() < deadline:
    try:
        frame = s.recv(65535)
    except TimeoutError:
        continue
    frames += 1
    with_pattern += pattern in frame
    if frame[12:14] == b"\x08\x00" and frame[23] == 17:  # IPv4, UDP
        ihl = (frame[14] & 0x0F) * 4
        dport = struct.unpack("!H", frame[14 + ihl + 2:14 + ihl + 4])[0]
        wireguard += dport == 51820
print(json.dumps({"frames": frames, "with_pattern": with_pattern, "wireguard": wireguard}))
