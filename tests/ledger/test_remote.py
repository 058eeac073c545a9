"""Reading a daemon's log over HTTP when the daemon is older than this agentd: a loopback
server that answers /v1/entries as a daemon did before ?until= (from Pulse 1 on, whatever
was asked) stands for it."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from ledger import LedgerError
from ledger.remote import RemoteRecorder


def _doc(pulse: int) -> dict:
    return {
        "pulse": pulse,
        "raw": base64.b64encode(b"x").decode(),
        "leaf": "00" * 32,
        "chain": "00" * 32,
        "kind": "funds.mint/v1",
        "author": "log",
    }


def serving(knows_until: bool) -> Iterator[str]:
    class Daemon(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = parse_qs(urlparse(self.path).query)
            pulses = [1, 2, 3, 4, 5]
            if knows_until and "until" in query:
                pulses = [p for p in reversed(pulses) if p <= int(query["until"][0])]
            body = json.dumps({"entries": [_doc(p) for p in pulses][: int(query.get("limit", ["1000"])[0])]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Daemon)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def older() -> Iterator[str]:
    yield from serving(knows_until=False)


@pytest.fixture
def current() -> Iterator[str]:
    yield from serving(knows_until=True)


@pytest.mark.parametrize("limit", [1, 2])
def test_reading_back_from_a_daemon_that_cannot_is_refused_not_misread(older: str, limit: int) -> None:
    with pytest.raises(LedgerError, match="does not read its log back from a Pulse: upgrade its agentd"):
        RemoteRecorder(older).rows_back(3, limit=limit)


def test_reading_back_from_a_daemon_that_can(current: str) -> None:
    assert [row.pulse for row in RemoteRecorder(current).rows_back(4, limit=2)] == [4, 3]
    assert [row.pulse for row in RemoteRecorder(current).rows_back(4, limit=1)] == [4]
