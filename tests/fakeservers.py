"""Model servers on loopback that speak a provider's wire format, for tests and benches.

A `ModelServer` listens on 127.0.0.1 at a random port in a background thread and answers
either OpenAI Chat Completions (`POST /v1/chat/completions`) or Anthropic Messages
(`POST /v1/messages`), so the real SDK clients talk to it over real HTTP. Answers come
from a queue of `Reply`s (served in order, one per request), then from a responder
function, then a default text answer. Every request is kept in `requests`, with the
connection it came on (the client's port), and the server counts the connections
clients open and close, so a test can see keep-alive connections reused and closed.

    with ModelServer("openai", delay=0.05) as server:
        server.queue(server.error(429), server.tool_calls(("pay", {"invoice": 23})))
        ... point the client at server.base_url ...
        assert server.requests[-1].body["model"] == "m"

Faults: `server.error(status)` (the wire's own error body), `Reply(drop=True)` (the
connection closes without an answer), `Reply(body=b"...")` (any bytes, e.g. a malformed
body), `Reply(delay=...)` (answer late, for time-outs), `Reply(trickle=...)` (the body a
byte at a time, that many seconds apart: a model writing slowly, which no read time-out
catches). `delay=` on the server adds a fixed latency to every answer, as a real model would.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Wire = Literal["openai", "anthropic"]
PATHS: dict[str, str] = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


@dataclass(frozen=True)
class Reply:
    """One answer. A dict body is sent as JSON (its "model" filled from the request when
    absent); bytes are sent as they are; no body means the default text answer "ok"."""

    status: int = 200
    body: dict[str, Any] | bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop: bool = False
    trickle: float = 0.0  # seconds between the body's bytes


@dataclass(frozen=True)
class Received:
    path: str
    headers: dict[str, str]
    body: Any
    connection: int = 0  # the client's port: requests kept alive on one connection share it


Responder = Callable[[Received], Reply]


class ModelServer:
    def __init__(self, wire: Wire, *, delay: float = 0.0, responder: Responder | None = None) -> None:
        if wire not in PATHS:
            raise ValueError(f"unknown wire format {wire!r}; use one of {sorted(PATHS)}")
        self.wire = wire
        self.delay = delay
        self.requests: list[Received] = []
        self._responder = responder
        self._queue: deque[Reply] = deque()
        self._lock = threading.Lock()
        self._closed = threading.Condition(self._lock)
        self.connections_made = 0
        self.connections_open = 0
        self._stopping = threading.Event()
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # lifecycle

    def start(self) -> ModelServer:
        self._httpd = _Listener(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        # A short poll keeps stop() quick: shutdown waits for the loop to look again.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, args=(0.02,), name=f"{self.wire}-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        # Wakes handlers still sleeping out a delay so none outlives the server for long.
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()

    def __enter__(self) -> ModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def base_url(self) -> str:
        """What a client is given: OpenAI SDKs expect the /v1 prefix, Anthropic's adds it."""
        if self._httpd is None:
            raise RuntimeError("the server is not started")
        root = f"http://127.0.0.1:{self._httpd.server_address[1]}"
        return f"{root}/v1" if self.wire == "openai" else root

    # what it answers

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    def answer_with(self, responder: Responder) -> None:
        """Answers every request the queue does not, by calling `responder`."""
        self._responder = responder

    def next_reply(self, request: Received) -> Reply:
        with self._lock:
            self.requests.append(request)
            if self._queue:
                return self._queue.popleft()
        return self._responder(request) if self._responder else self.text("ok")

    # replies in this server's wire format

    def text(self, text: str, *, tokens_in: int = 11, tokens_out: int = 7) -> Reply:
        return self.tool_calls(text=text, tokens_in=tokens_in, tokens_out=tokens_out)

    def tool_calls(
        self, *calls: tuple[str, dict[str, Any]], text: str = "", tokens_in: int = 11, tokens_out: int = 7
    ) -> Reply:
        n = next(self._ids)
        if self.wire == "openai":
            return Reply(body=_openai_body(n, text, calls, tokens_in, tokens_out))
        return Reply(body=_anthropic_body(n, text, calls, tokens_in, tokens_out))

    def error(self, status: int, message: str = "", headers: dict[str, str] | None = None) -> Reply:
        message = message or HTTPStatus(status).phrase
        body: dict[str, Any]
        if self.wire == "openai":
            body = {"error": {"message": message, "type": "server_error", "code": None}}
        else:
            body = {"type": "error", "error": {"type": "api_error", "message": message}}
        return Reply(status=status, body=body, headers=headers or {})

    def wait_for_no_connections(self, seconds: float = 10.0) -> bool:
        """Waits until every client connection is closed; False if one is still open after
        `seconds` (a bound for a broken client, not a measure of speed)."""
        with self._closed:
            return self._closed.wait_for(lambda: self.connections_open == 0, seconds)

    def _opened(self) -> None:
        with self._lock:
            self.connections_made += 1
            self.connections_open += 1

    def _ended(self) -> None:
        with self._closed:
            self.connections_open -= 1
            self._closed.notify_all()

    def _wait(self, seconds: float) -> bool:
        """Sleeps; False when the server stopped meanwhile."""
        return not (seconds > 0 and self._stopping.wait(seconds))


def _openai_body(
    n: int, text: str, calls: tuple[tuple[str, dict[str, Any]], ...], tokens_in: int, tokens_out: int
) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        message["tool_calls"] = [
            {"id": f"call_{n}_{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args) in enumerate(calls, 1)
        ]
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {"prompt_tokens": tokens_in, "completion_tokens": tokens_out, "total_tokens": tokens_in + tokens_out},
    }


def _anthropic_body(
    n: int, text: str, calls: tuple[tuple[str, dict[str, Any]], ...], tokens_in: int, tokens_out: int
) -> dict[str, Any]:
    content: list[dict[str, Any]] = [{"type": "text", "text": text}] if text else []
    content += [
        {"type": "tool_use", "id": f"toolu_{n}_{i}", "name": name, "input": args}
        for i, (name, args) in enumerate(calls, 1)
    ]
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "content": content,
        "stop_reason": "tool_use" if calls else "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": tokens_in, "output_tokens": tokens_out},
    }


class _Listener(ThreadingHTTPServer):
    # socketserver's default backlog of 5 resets connections when many clients come at once.
    request_queue_size = 256


def _handler_for(server: ModelServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
        # Headers and body go out in two writes; with Nagle's algorithm on, the second
        # waits for the client's delayed ACK (~40 ms) and every answer looks slow.
        disable_nagle_algorithm = True

        def setup(self) -> None:
            super().setup()
            server._opened()

        def finish(self) -> None:
            try:
                super().finish()
            finally:
                server._ended()

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = self.path.split("?", 1)[0]
            if path != PATHS[server.wire]:
                self._send(Reply(status=404, body={"error": {"message": f"no route {path}"}}), {})
                return
            try:
                body = json.loads(raw) if raw else None
            except json.JSONDecodeError:
                body = raw
            request = Received(path, {k.lower(): v for k, v in self.headers.items()}, body, self.client_address[1])
            reply = server.next_reply(request)
            if not server._wait(server.delay + reply.delay):
                self.close_connection = True
                return
            if reply.drop:
                self.close_connection = True
                return
            self._send(reply, body if isinstance(body, dict) else {})

        def _send(self, reply: Reply, request: dict[str, Any]) -> None:
            body = server.text("ok").body if reply.body is None else reply.body
            if isinstance(body, bytes):
                data = body
            else:
                payload = dict(body or {})
                if reply.status < 400:
                    payload.setdefault("model", request.get("model", ""))
                data = json.dumps(payload).encode()
            try:
                self.send_response(reply.status)
                headers = {"Content-Type": "application/json", **reply.headers, "Content-Length": str(len(data))}
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self._write(data, reply.trickle)
            except (BrokenPipeError, ConnectionResetError):
                # The client gave up (a time-out under test): nothing left to answer.
                self.close_connection = True

        def _write(self, data: bytes, trickle: float) -> None:
            if not trickle:
                self.wfile.write(data)
                return
            for i in range(len(data)):
                self.wfile.write(data[i : i + 1])
                self.wfile.flush()
                if not server._wait(trickle):
                    self.close_connection = True
                    return

        def log_message(self, format: str, *args: Any) -> None:
            pass  # tests read `requests`, not access logs

    return Handler
