"""Run inside the switch namespace: `wire_capture.py IFACE SECONDS HEXPATTERN [HEXPATTERN...]`
captures every frame on IFACE for SECONDS, or until SIGTERM (the run it watches has ended),
and prints JSON: frames seen, frames holding the first pattern, frames holding each pattern
(by its hex), and UDP frames to the WireGuard port."""

import json
import signal
import socket
import struct
import sys
import time

iface, seconds = sys.argv[1], float(sys.argv[2])
patterns = {h: bytes.fromhex(h) for h in sys.argv[3:]}
counts = dict.fromkeys(patterns, 0)
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(0x0003))
s.bind((iface, 0))
s.settimeout(0.1)
frames = wireguard = 0
deadline = time.monotonic() + seconds
stopped = []
signal.signal(signal.SIGTERM, lambda *_: stopped.append(True))
while time.monotonic() < deadline and not stopped:
    try:
        frame = s.recv(65535)
    except TimeoutError:
        continue
    frames += 1
    for h, pattern in patterns.items():
        counts[h] += pattern in frame
    if frame[12:14] == b"\x08\x00" and frame[23] == 17:  # IPv4, UDP
        ihl = (frame[14] & 0x0F) * 4
        dport = struct.unpack("!H", frame[14 + ihl + 2:14 + ihl + 4])[0]
        wireguard += dport == 51820
print(json.dumps({"frames": frames, "with_pattern": counts[sys.argv[3]], "patterns": counts,
                  "wireguard": wireguard}))
