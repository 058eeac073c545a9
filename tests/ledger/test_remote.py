"""Reading a daemon's log over HTTP, whatever the daemon's age: loopback servers stand for
a daemon from before ?until= (it answers from Pulse 1 on, whatever was asked), one from
before JSON lines (it answers ?as=jsonl with its JSON document), and one of this version
(JSON lines of the stored bytes, written by the ledger's own `entry_lines`)."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

import pytest

from ledger import TRANSFER, Entry, LedgerError, Row, Wallet, entry_lines
from ledger.entry import leaf_hash
from ledger.remote import RemoteRecorder
from ledger.store import CHAIN_START, chain

NOT_AN_ENTRY = {3: b"not an entry", 4: b'{"payload":\n"e30="}'}  # as a damaged store holds them


def _log() -> list[Row]:
    """Five rows of transfers as a store holds them, two of them damaged since."""
    alice, bob = Wallet.generate(), Wallet.generate()
    rows, link = [], CHAIN_START
    for pulse in range(1, 6):
        entry = Entry.create(alice, TRANSFER, {"to": bob.id, "cents": pulse}, log="a" * 32, seq=pulse)
        link = chain(link, entry.leaf_hash)
        rows.append(Row(pulse, NOT_AN_ENTRY.get(pulse, entry.raw), entry.leaf_hash, link, TRANSFER, alice.id))
    return rows


LOG = _log()


def _doc(row: Row) -> dict:
    return {
        "pulse": row.pulse,
        "raw": base64.b64encode(row.raw).decode(),
        "leaf": row.leaf.hex(),
        "chain": row.chain.hex(),
        "kind": row.kind,
        "author": row.author,
    }


def _answer(knows_until: bool, knows_lines: bool, query: dict[str, list[str]]) -> tuple[str, bytes]:
    rows = LOG
    if knows_until and "until" in query:
        rows = [row for row in reversed(LOG) if row.pulse <= int(query["until"][0])]
    elif "from" in query:
        rows = [row for row in LOG if row.pulse >= int(query["from"][0])]
    rows = rows[: int(query.get("limit", ["1000"])[0])]
    if knows_lines and query.get("as") == ["jsonl"]:
        return "application/jsonl", entry_lines((r.pulse, r.leaf, r.chain, r.raw) for r in rows)
    return "application/json", json.dumps({"entries": [_doc(row) for row in rows]}).encode()


@contextmanager
def serving(answer: Callable[[dict[str, list[str]]], tuple[str, bytes]]) -> Iterator[str]:
    class Daemon(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            media, body = answer(parse_qs(urlparse(self.path).query))
            self.send_response(200)
            self.send_header("Content-Type", media)
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
    with serving(lambda query: _answer(False, False, query)) as url:
        yield url


@pytest.fixture(params=["JSON document", "JSON lines"])
def current(request: pytest.FixtureRequest) -> Iterator[str]:
    with serving(lambda query: _answer(True, request.param == "JSON lines", query)) as url:
        yield url


@pytest.mark.parametrize("limit", [1, 2])
def test_reading_back_from_a_daemon_that_cannot_is_refused_not_misread(older: str, limit: int) -> None:
    with pytest.raises(LedgerError, match="does not read its log back from a Pulse: upgrade its agentd"):
        RemoteRecorder(older).rows_back(3, limit=limit)


def test_reading_back_from_a_daemon_that_can(current: str) -> None:
    assert [row.pulse for row in RemoteRecorder(current).rows_back(4, limit=2)] == [4, 3]
    assert [row.pulse for row in RemoteRecorder(current).rows_back(4, limit=1)] == [4]


def test_rows_read_as_json_lines_are_the_rows_the_document_gives() -> None:
    def read(knows_lines: bool) -> tuple[list[Row], list[Row]]:
        with serving(lambda query: _answer(True, knows_lines, query)) as url:
            remote = RemoteRecorder(url)
            return remote.rows(2, limit=10), remote.rows_back(5, limit=3)

    document, lines = read(False), read(True)
    assert document == (LOG[1:], LOG[:1:-1])  # a daemon from before JSON lines: its document
    for served, listed in zip(document, lines, strict=True):
        for row, kept in zip(listed, served, strict=True):
            # The exact bytes, leaf and digest; kind and author read from the entry, none from damaged bytes.
            assert row[:4] == kept[:4]
            assert (row.kind, row.author) == (("", "") if row.pulse in NOT_AN_ENTRY else (kept.kind, kept.author))
    assert leaf_hash(lines[0][0].raw) == lines[0][0].leaf


@pytest.mark.parametrize(
    ("page", "said"),
    [
        (b'{"pulse":1,"leaf":"zz"}\n', "sent a line that is no row of its log"),
        (
            entry_lines([(r.pulse, r.leaf, r.chain, r.raw) for r in LOG])[:-1],
            "a page of JSON lines that ends inside a line",
        ),
    ],
    ids=["a line of no row", "a page cut short"],
)
def test_a_line_that_is_no_row_is_named(page: bytes, said: str) -> None:
    with (
        serving(lambda query: ("application/jsonl", page)) as url,
        pytest.raises(LedgerError, match=said),
    ):
        RemoteRecorder(url).rows(1)
