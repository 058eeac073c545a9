"""What every HTTP server agentd runs holds its clients to (the daemon's API, the
examiner's, the OpenEnv server): how long a request's head and its body may take to
arrive, how long a connection may sit idle, and how large a body may be.

uvicorn bounds none of these. Its keep-alive timeout runs only after a response and
stops at the first byte that arrives, so a connection that never sends, or sends a
header line every few seconds, or trickles its body, stays open for ever; and Starlette
reads a body whole, however large. ASGI middleware cannot help with the first three: an
app is called only once a request's head is in. So the deadlines are kept by the HTTP
protocol (`TimedProtocol`, uvicorn's h11 one with a timer per phase of a connection),
and the cap by middleware (`Capped`). `ServerConfig` is uvicorn's configuration with
both in place: every server starts from it.

A deadline closes the connection: once it runs out no answer is owed (the request never
arrived whole). A deadline is set when its phase begins and never pushed back by what
arrives, so dribbling bytes buys nothing. An app answering takes the time it needs: a
request whose body has all arrived has no deadline until its response is sent.
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass
from typing import Any, Literal

import h11
import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

HEADER_SECONDS = 10.0
BODY_SECONDS = 120.0
IDLE_SECONDS = 10.0
BODY_BYTES = 8 * 1024 * 1024

# idle: waiting for a request (none yet, or the last answered); head: its first bytes
# are in, not yet its whole head; body: the head is in, not yet the whole body;
# answering: the request is in and the app answers it; then the WebSocket protocol's,
# or closed.
Phase = Literal["new", "idle", "head", "body", "answering", "upgraded", "closed"]


@dataclass(frozen=True)
class HttpLimits:
    """A server's deadlines (seconds) and its body cap (bytes)."""

    header_seconds: float = HEADER_SECONDS  # from a request's first byte to the end of its head
    body_seconds: float = BODY_SECONDS  # from the end of its head to the end of its body
    idle_seconds: float = IDLE_SECONDS  # with no request under way: before the first, or after an answer
    body_bytes: int = BODY_BYTES

    def seconds(self, phase: Phase) -> float | None:
        """The deadline of `phase`, or None for a phase with none."""
        return {"idle": self.idle_seconds, "head": self.header_seconds, "body": self.body_seconds}.get(phase)


class ServerConfig(uvicorn.Config):
    """uvicorn's configuration for `app` held to `limits`; `errors` is the key the app's
    JSON errors use, which a body over the cap is answered with too."""

    def __init__(self, app: ASGIApp, limits: HttpLimits, errors: str = "error", **settings: Any) -> None:
        # uvicorn's own keep-alive timer is never the first to run out: TimedProtocol's is.
        keep_alive = math.ceil(limits.idle_seconds)
        super().__init__(
            Capped(app, limits.body_bytes, errors), http=TimedProtocol, timeout_keep_alive=keep_alive, **settings
        )
        self.limits = limits


class TimedProtocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline on each phase of a connection."""

    def __init__(
        self,
        config: uvicorn.Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.limits = config.limits if isinstance(config, ServerConfig) else HttpLimits()
        self.phase: Phase = "new"
        self._deadline: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # as uvicorn's own
        super().connection_made(transport)
        self._enter("idle")

    def data_received(self, data: bytes) -> None:
        if self.phase == "idle":
            self._enter("head")  # a request's first byte: its head is due from now, however it dribbles
        super().data_received(data)
        self._follow()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._follow()

    def handle_websocket_upgrade(self, event: h11.Request) -> None:
        self._enter("upgraded")  # the WebSocket protocol takes the connection over, with its own rules
        super().handle_websocket_upgrade(event)

    def connection_lost(self, exc: Exception | None) -> None:
        self._enter("closed")
        super().connection_lost(exc)

    def _follow(self) -> None:
        """The phase the request is in now, as h11 read it."""
        if self.phase in ("upgraded", "closed"):
            return
        if self.transport.is_closing():
            self._enter("closed")
        elif self.conn.their_state is h11.SEND_BODY:
            self._enter("body")
        elif self.conn.their_state is not h11.IDLE:
            self._enter("answering")
        elif self.phase != "head":  # a new request's turn: its first bytes may be in already
            self._enter("head" if self.conn.trailing_data[0] else "idle")

    def _enter(self, phase: Phase) -> None:
        """Starts `phase` with its own deadline; staying in a phase keeps the deadline it had."""
        if phase == self.phase:
            return
        self.phase = phase
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        seconds = self.limits.seconds(phase)
        if seconds is not None:
            self._deadline = self.loop.call_later(seconds, self._expired)

    def _expired(self) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            self.transport.close()  # an app waiting on the body hears that the client went away


class Capped:
    """An ASGI app whose HTTP requests' bodies are read whole before it is called, at
    most `cap` bytes: a body over the cap is answered 413 with one JSON line (`{errors:
    ...}`) and never reaches the app."""

    def __init__(self, app: ASGIApp, cap: int, errors: str = "error") -> None:
        self.app = app
        self.cap = cap
        self.errors = errors

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        try:
            body = await self._body(scope, receive)
        except BodyTooLarge as exc:
            # No "connection: close": a client still sending would be reset before it
            # reads the answer. What it sends next is dropped; the body deadline ends it.
            await _answer(send, 413, {self.errors: str(exc)})
            return
        if body is None:
            return  # the client went away before its body ended: no one to answer
        given = False

        async def replay() -> Any:
            nonlocal given
            if given:
                return await receive()  # after the body, only the client's going away
            given = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)

    async def _body(self, scope: Scope, receive: Receive) -> bytes | None:
        declared = dict(scope["headers"]).get(b"content-length", b"")  # digits: h11 refuses any other
        if len(declared) > len(str(self.cap)) or (declared and int(declared) > self.cap):
            raise BodyTooLarge(f"the body is {declared.decode()} bytes; at most {self.cap} are taken")
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return None
            body += message.get("body", b"")
            if len(body) > self.cap:
                raise BodyTooLarge(f"the body is over {self.cap} bytes; at most {self.cap} are taken")
            if not message.get("more_body", False):
                return bytes(body)


class BodyTooLarge(Exception):
    """A request's body is over the server's cap."""


async def _answer(send: Send, status: int, document: dict[str, Any]) -> None:
    body = json.dumps(document).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
