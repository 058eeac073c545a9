"""GET /v1/entries as the daemon's app answers it in-process: a page made a piece at a time
is the page made at once, each row the document its stored bytes make, and a row whose
bytes are no entry is served as stored, its payload null."""

from __future__ import annotations

import base64
import json
import sqlite3
from typing import Any

import pytest
from starlette.testclient import TestClient

import agentd.server.api
from agentd.home import Home
from agentd.server.api import app
from ledger import Entry, EntryError


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
