"""How `k8sdds serve` holds up under slow and greedy clients, on top of uvicorn's HTTP/1.1
(h11): a connection must deliver each whole request (head and body) within `read_timeout`
seconds or it is closed, so clients that never finish their headers cannot hold the
service; at most `max_open` connections are open at once (more are closed at once); and
only requests being served count against the service's concurrency (ASGI middleware,
`ConcurrencyLimit`), not connections that are idle or still sending. Over TLS the handshake
comes before any of that (asyncio completes it before the protocol sees the connection):
`handshake_bounded` closes one not done within `read_timeout` too (asyncio's own wait, 60 s,
let silent clients hold connections long after the read deadline)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("k8sdds.serve")


def guarded(read_timeout: float, max_open: int) -> type[H11Protocol]:
    """uvicorn's h11 protocol with a deadline on reading each request and a cap on open
    connections."""

    class Guarded(H11Protocol):
        _read_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            if len(self.connections) > max_open:
                log.warning("%s: over %d open connections: closed", _who(self), max_open)
                transport.close()
                return
            self._arm()

        def _arm(self) -> None:
            if self._read_timer is not None:
                self._read_timer.cancel()
            self._read_timer = self.loop.call_later(read_timeout, self._read_timeout)

        def handle_events(self) -> None:
            waiting = self.conn.their_state is h11.IDLE
            super().handle_events()
            if waiting and self.conn.their_state is not h11.IDLE:
                self._arm()  # a head arrived: its body gets a deadline of its own

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

        def _read_timeout(self) -> None:
            if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and \
                    not self.transport.is_closing():
                if self.conn.their_state is h11.SEND_BODY or self.conn.trailing_data[0]:
                    log.warning("%s: no whole request within %g s: closed", _who(self),
                                read_timeout)
                self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            if self._read_timer is not None:
                self._read_timer.cancel()
            super().connection_lost(exc)

    return Guarded


def handshake_bounded(read_timeout: float) -> Callable[[], asyncio.AbstractEventLoop]:
    """An event loop factory whose TLS servers give a client `read_timeout` seconds to
    complete its handshake (`ssl_handshake_timeout` of asyncio's create_server, which
    uvicorn does not set): a client that never completes it is closed then."""

    def factory() -> asyncio.AbstractEventLoop:
        loop = asyncio.new_event_loop()
        plain = loop.create_server

        async def create_server(*args: Any, **kwargs: Any) -> asyncio.Server:
            if kwargs.get("ssl") is not None:
                kwargs.setdefault("ssl_handshake_timeout", read_timeout)
            return await plain(*args, **kwargs)

        loop.create_server = create_server  # type: ignore[method-assign]
        return loop

    return factory


def _who(protocol: Any) -> str:
    client = getattr(protocol, "client", None)
    return f"{client[0]}:{client[1]}" if client else "a client"


class ConcurrencyLimit:
    """ASGI middleware: at most `limit` requests served at once; one more is answered 503
    at once (an idle or slow connection holds no slot)."""

    def __init__(self, app: Any, limit: int):
        self.app, self.limit, self.active = app, limit, 0

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if self.active >= self.limit:
            body = b'{"detail":"the service is serving as many requests as it may; try again"}'
            await send({"type": "http.response.start", "status": 503, "headers": [
                (b"content-type", b"application/json"), (b"retry-after", b"1"),
                (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        self.active += 1
        try:
            await self.app(scope, receive, send)
        finally:
            self.active -= 1
