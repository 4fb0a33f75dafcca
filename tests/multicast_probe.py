"""Run inside a pod: `send GROUP PORT` sends datagrams; `recv GROUP PORT SECONDS` prints how
many arrived. Used by the datapath tests to see whether multicast crosses nodes."""

import socket
import struct
import sys
import time

mode, group, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
if mode == "send":
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 4)
    for _ in range(20):
        s.sendto(b"k8sdds-multicast-probe", (group, port))
        time.sleep(0.05)
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("", port))
    s.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                 struct.pack("4s4s", socket.inet_aton(group), socket.inet_aton("0.0.0.0")))
    s.settimeout(0.2)
    count, deadline = 0, time.monotonic() + float(sys.argv[4])
    while time.monotonic() < deadline:
        try:
            if s.recv(100) == b"k8sdds-multicast-probe":
                count += 1
        except TimeoutError:
            pass
    print(count)
