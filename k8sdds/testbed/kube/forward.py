"""A TCP forwarder from this machine's loopback into a testbed namespace (the API server of
a testbed cluster is reached this way: the testbed has no route to the machine's network).
It listens in the namespace it starts in, then enters the target network namespace, so each
connection it makes starts there. Run as `python -m k8sdds.testbed.kube.forward LISTEN_PORT
NETNS_PATH HOST PORT`; prints nothing, serves until killed."""

from __future__ import annotations

import socket
import sys
import threading

from k8sdds.testbed.netns import enter


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(listener: socket.socket, host: str, port: int) -> None:
    while True:
        client, _ = listener.accept()
        try:
            upstream = socket.create_connection((host, port), timeout=10)
            upstream.settimeout(None)
        except OSError:
            client.close()
            continue
        for a, b in ((client, upstream), (upstream, client)):
            threading.Thread(target=_pipe, args=(a, b), daemon=True).start()


def main(argv: list[str]) -> None:
    listen_port, netns, host, port = int(argv[0]), argv[1], argv[2], int(argv[3])
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", listen_port))
    listener.listen(64)
    enter(netns)  # the listener stays where it was made; connections start in `netns`
    serve(listener, host, port)


if __name__ == "__main__":
    main(sys.argv[1:])
