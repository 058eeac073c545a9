"""GET /v1/entries as the daemon's app answers it in-process: a page made a piece at a time
is the page made at once, each row the document its stored bytes make, and a row whose
bytes are no entry is served as stored, its payload null. The same page as JSON lines
(?as=jsonl) holds the stored bytes as they are, the same rows, refuses what the document
refuses, and a damaged row spoils its own line alone; read by a remote store from a real
daemon, the rows are the store's, and the audit names the damaged one."""

from __future__ import annotations

import base64
import json
import sqlite3
from typing import Any

import pytest
import rfc8785
from starlette.testclient import TestClient

import agentd.server.api
from agentd.home import Home
from agentd.server.api import app
from ledger import Entry, EntryError, RemoteRecorder
from tests.homekit import run_in_process
from tests.serve.daemonkit import Daemon


def _pages(home: Home, queries: list[dict[str, Any]]) -> list[bytes]:
    with TestClient(app(home)) as client:
        answers = [client.get("/v1/entries", params=query) for query in queries]
    assert all(answer.status_code == 200 for answer in answers), [a.text for a in answers]
    return [answer.content for answer in answers]


QUERIES: list[dict[str, Any]] = [
    {},
    {"from": 2, "limit": 7},
    {"from": 1, "limit": 6},  # ends at a piece's end: the next piece is empty
    {"until": 20, "limit": 9},
    {"until": 4},  # runs out before the limit, reading back
    {"kind": "agent.session/v1"},
    {"author": "log", "until": 10_000},
    {"from": 10_000},  # nothing: an empty page
]


def test_a_page_made_a_piece_at_a_time_is_the_page_made_at_once(
    served_home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    whole = _pages(served_home, QUERIES)
    monkeypatch.setattr(agentd.server.api, "PIECE", 3)
    assert _pages(served_home, QUERIES) == whole
    assert whole[-1] == b'{"entries":[]}'


def test_each_row_is_what_its_stored_bytes_say(served_home: Home) -> None:
    (page,) = _pages(served_home, [{}])
    with sqlite3.connect(served_home.ledger_db) as db:
        stored = db.execute(
            "SELECT pulse, raw, leaf, chain, kind, author FROM ledger_entries ORDER BY pulse"
        ).fetchall()
    listed = json.loads(page)["entries"]
    assert [row["pulse"] for row in listed] == [pulse for pulse, *_ in stored][: agentd.server.api.PAGE]
    for row, (pulse, raw, leaf, chain, kind, author) in zip(listed, stored, strict=False):
        entry = Entry.parse(raw, pulse, verify=False)
        assert row == {
            "pulse": pulse,
            "claim": leaf.hex(),
            "kind": kind,
            "author": author,
            "leaf": leaf.hex(),
            "chain": chain.hex(),
            "raw": base64.b64encode(raw).decode(),
            "payload": {
                "kind": entry.kind,
                "author": entry.author,
                "at": entry.at,
                "log": entry.log,
                "seq": entry.seq,
                "body": entry.body,
            },
        }
        assert list(row) == ["pulse", "claim", "kind", "author", "leaf", "chain", "raw", "payload"]
        assert list(row["payload"]) == ["kind", "author", "at", "log", "seq", "body"]


def test_bytes_that_are_no_entry_are_served_as_stored_with_a_null_payload(served_home: Home) -> None:
    damaged = {3: b"not an entry", 4: b'{"payload":"e30=","payloadType":"x","signatures":[{"keyid":"a","sig":"b"}]}'}
    with sqlite3.connect(served_home.ledger_db) as db:
        for pulse, raw in damaged.items():
            db.execute("UPDATE ledger_entries SET raw = ? WHERE pulse = ?", (raw, pulse))
    for raw in damaged.values():
        with pytest.raises(EntryError):
            Entry.parse(raw, verify=False)
    (page,) = _pages(served_home, [{"from": 2, "limit": 4}])
    rows = json.loads(page)["entries"]
    assert [row["pulse"] for row in rows] == [2, 3, 4, 5]
    assert rows[0]["payload"] is not None and rows[3]["payload"] is not None
    for row in rows[1:3]:
        assert row["payload"] is None and base64.b64decode(row["raw"]) == damaged[row["pulse"]]


# The page as JSON lines (?as=jsonl): the stored bytes as they are, a row a line.


def _lines(home: Home, queries: list[dict[str, Any]]) -> list[bytes]:
    return _pages(home, [{**query, "as": "jsonl"} for query in queries])


def _stored_bytes(line: bytes) -> bytes:
    """A line's stored bytes, as a reader takes them: after "entry", to the closing brace."""
    _, found, rest = line.partition(b',"entry":')
    assert found and rest.endswith(b"}"), line[:200]
    return rest[:-1]


def test_each_line_holds_an_entry_s_exact_bytes(served_home: Home) -> None:
    (page,) = _lines(served_home, [{}])
    exported = run_in_process(["--home", str(served_home.root), "ledger", "export", "-"])
    assert exported.code == 0, exported.err
    copy = [json.loads(line) for line in exported.out.splitlines()]
    with sqlite3.connect(served_home.ledger_db) as db:
        stored = db.execute("SELECT pulse, leaf, chain FROM ledger_entries ORDER BY pulse").fetchall()
    lines = page.split(b"\n")
    assert lines.pop() == b""  # every line ends with a newline, the last too
    assert len(lines) == min(len(copy), agentd.server.api.PAGE)
    for line, exact, (pulse, leaf, chain) in zip(lines, copy, stored, strict=False):
        raw = base64.b64decode(exact["entry"])
        assert _stored_bytes(line) == raw
        row = json.loads(line)
        assert row == {"pulse": pulse, "leaf": leaf.hex(), "chain": chain.hex(), "entry": json.loads(raw)}
        assert list(row) == ["pulse", "leaf", "chain", "entry"]
        assert rfc8785.dumps(row["entry"]) == raw  # canonical JSON: a reader that writes it back gets the bytes


def test_json_lines_hold_the_rows_the_document_holds_a_piece_at_a_time_or_at_once(
    served_home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    documents = _pages(served_home, QUERIES)
    lines = _lines(served_home, QUERIES)
    monkeypatch.setattr(agentd.server.api, "PIECE", 3)
    assert _lines(served_home, QUERIES) == lines  # held whole
    monkeypatch.setattr(agentd.server.api, "HELD", 1)
    assert _lines(served_home, QUERIES) == lines  # streamed a piece at a time
    for query, document, page in zip(QUERIES, documents, lines, strict=True):
        listed = json.loads(document)["entries"]
        read = [json.loads(line) for line in page.splitlines()]
        assert [row["pulse"] for row in read] == [row["pulse"] for row in listed], query
        for row, line, doc in zip(read, page.splitlines(), listed, strict=True):
            assert (row["leaf"], row["chain"]) == (doc["leaf"], doc["chain"])
            assert _stored_bytes(line) == base64.b64decode(doc["raw"])
    assert lines[-1] == b""  # nothing from Pulse 10,000 on


BAD_QUERIES: list[dict[str, Any]] = [
    {"from": 1, "until": 2},
    {"limit": 0},
    {"limit": 1001},
    {"from": "x"},
    {"until": "-3"},
    {"kind": "agent.nothing/v1"},
    {"author": "nobody"},
]


def test_json_lines_are_refused_as_the_document_is(served_home: Home) -> None:
    with TestClient(app(served_home)) as client:
        for query in BAD_QUERIES:
            document = client.get("/v1/entries", params=query)
            lines = client.get("/v1/entries", params={**query, "as": "jsonl"})
            assert document.status_code == 400, query
            assert (lines.status_code, lines.json()) == (document.status_code, document.json())
        other = client.get("/v1/entries", params={"as": "csv"})
    assert other.status_code == 400
    assert other.json() == {"error": "as='csv' is not a form of this page: give as=jsonl, or leave it out for JSON"}


# Bytes no entry holds, as a damaged store may: not JSON, a newline (which would cut its
# line in two), bytes that are not ASCII, and an envelope whose payload is no entry's.
DAMAGED = {
    3: b"not an entry",
    4: b'{"payload":\n"e30="}',
    5: b'{"payload":"\xff\xfe"}',
    6: b'{"payload":"e30=","payloadType":"x","signatures":[{"keyid":"a","sig":"b"}]}',
}


def _damage(home: Home) -> None:
    with sqlite3.connect(home.ledger_db) as db:
        for pulse, raw in DAMAGED.items():
            db.execute("UPDATE ledger_entries SET raw = ? WHERE pulse = ?", (raw, pulse))


def test_a_damaged_row_spoils_its_own_line_and_no_other(served_home: Home) -> None:
    _damage(served_home)
    (page,) = _lines(served_home, [{"from": 2, "limit": 6}])
    lines = page.decode("ascii").splitlines()  # ASCII text, whatever the store holds
    assert len(lines) == 6
    with pytest.raises(ValueError):  # not JSON: its own line cannot be read as JSON, its bytes can
        json.loads(lines[1])
    assert _stored_bytes(lines[1].encode()) == DAMAGED[3]
    rows = {pulse: json.loads(line) for pulse, line in zip(range(2, 8), lines, strict=True) if pulse != 3}
    assert [row["pulse"] for row in rows.values()] == [2, 4, 5, 6, 7]
    for pulse in (4, 5):  # a newline, and bytes that are not ASCII: in base64 instead
        assert "entry" not in rows[pulse] and base64.b64decode(rows[pulse]["raw"]) == DAMAGED[pulse]
    assert _stored_bytes(lines[4].encode()) == DAMAGED[6]
    assert all("raw" not in rows[pulse] for pulse in (2, 6, 7))


def test_a_value_of_another_type_is_the_server_s_fault_in_either_form(served_home: Home) -> None:
    with sqlite3.connect(served_home.ledger_db) as db:
        db.execute("UPDATE ledger_entries SET raw = CAST(raw AS TEXT) WHERE pulse = 3")
    with TestClient(app(served_home)) as client:
        document = client.get("/v1/entries", params={"limit": 5})
        lines = client.get("/v1/entries", params={"limit": 5, "as": "jsonl"})
    # The server's own fault, said in one line that names neither its disk nor a command to run.
    assert document.status_code == 500
    assert document.json() == {
        "error": "the ledger cannot be read here: its store is damaged; the daemon's log says where"
    }
    assert (lines.status_code, lines.json()) == (document.status_code, document.json())


def test_an_auditor_elsewhere_reads_the_rows_as_stored_and_is_told_which_is_damaged(daemon: Daemon) -> None:
    _damage(daemon.home)
    with sqlite3.connect(daemon.home.ledger_db) as db:
        stored = db.execute(
            "SELECT pulse, raw, leaf, chain, kind, author FROM ledger_entries ORDER BY pulse"
        ).fetchall()
    remote = RemoteRecorder(daemon.url)
    try:
        read = [*remote.rows(1, limit=10), *remote.rows(11)]
        back = remote.rows_back(7, limit=5)
    finally:
        remote.close()
    assert [tuple(row[:4]) for row in read] == [tuple(row[:4]) for row in stored]
    for row, kept in zip(read, stored, strict=True):  # kind and author are read from the entry
        assert (row.kind, row.author) == ((kept[4], kept[5]) if row.pulse not in DAMAGED else ("", ""))
    assert [row.pulse for row in back] == [7, 6, 5, 4, 3]
    done = run_in_process(["--home", str(daemon.home.root), "ledger", "verify", "--remote", daemon.url])
    assert done.code == 3 and "Pulse 3" in done.err, done.err
