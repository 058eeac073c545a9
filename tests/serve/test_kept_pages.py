"""GET /v1/entries?as=jsonl read from the kept bundles (agentd/server/pages.py): the same
bytes as the rows make, from any Pulse, across bundles and into the one not full yet;
another log put in the ledger's place is served as itself; a file that cannot be kept
leaves the pages as they were, and is tried again after a rest; and the daemon's filler keeps the full bundles unasked."""

from __future__ import annotations

import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

import agentd.server.api
import agentd.server.pages
from agentd.app.init import initialise
from agentd.app.ledger import open_ledger
from agentd.home import Home
from agentd.server.api import app
from agentd.server.pages import BUNDLE, PAGES_FILE
from agentd.wallets import log_key
from ledger import MINT, TRANSFER, Wallet
from ledger.remote import entry_lines

SIZE = 2 * BUNDLE + 37  # two full bundles and a third under way
QUERIES: list[dict[str, Any]] = [
    {},
    {"from": 1, "limit": BUNDLE},  # one bundle, whole
    {"from": 17, "limit": 600},  # from inside the first, through the second, into the third
    {"from": BUNDLE - 3, "limit": 7},  # across a bundle's end
    {"from": 2 * BUNDLE + 1},  # the bundle not full yet alone
    {"from": SIZE + 1},  # past the end: nothing
]


@pytest.fixture
def grown(tmp_path: Path) -> Home:
    return _grown(Home(tmp_path / "home"), 1)


def _grown(home: Home, cents: int) -> Home:
    """A home whose log holds SIZE entries: transfers of `cents` between funded wallets."""
    initialise(home)
    wallets = [Wallet.generate() for _ in range(10)]
    with open_ledger(home) as ledger:
        ledger.append_many([(log_key(home), MINT, {"to": w.id, "cents": 10**6}) for w in wallets])
        while ledger.size < SIZE:
            batch = [(w, TRANSFER, {"to": wallets[(i + 1) % 10].id, "cents": cents}) for i, w in enumerate(wallets)]
            ledger.append_many(batch[: SIZE - ledger.size])
    return home


def _rows_as_lines(home: Home, query: dict[str, Any]) -> bytes:
    """The page as the rows make it, read from the store here."""
    start, limit = int(query.get("from", 1)), int(query.get("limit", 1000))
    with open_ledger(home) as ledger:
        return entry_lines(ledger._store.raw_rows(start, limit=limit))


def _lines(home: Home) -> list[bytes]:
    with TestClient(app(home)) as client:
        answers = [client.get("/v1/entries", params={**query, "as": "jsonl"}) for query in QUERIES]
    assert all(answer.status_code == 200 for answer in answers), [a.text for a in answers]
    return [answer.content for answer in answers]


def _kept(home: Home) -> list[int]:
    with sqlite3.connect(home.root / PAGES_FILE) as db:
        return [index for (index,) in db.execute("SELECT idx FROM entry_pages ORDER BY idx")]


def _kept_so_far(home: Home) -> list[int]:
    """As `_kept`, nothing while the file is being made."""
    try:
        return _kept(home)
    except sqlite3.Error:
        return []


def test_pages_read_from_the_kept_bundles_are_the_rows_bytes(grown: Home) -> None:
    expected = [_rows_as_lines(grown, query) for query in QUERIES]
    assert _lines(grown) == expected  # the bundles kept as they are asked for
    assert _kept(grown) == [0, 1]  # the third is not full: never kept
    assert _lines(grown) == expected  # read from what was kept
    assert expected[-1] == b"" and expected[0].count(b"\n") == SIZE


def test_another_log_in_the_ledger_s_place_is_served_as_itself(grown: Home, tmp_path: Path) -> None:
    first = _lines(grown)
    other = _grown(Home(tmp_path / "other"), 2)
    grown.ledger_db.unlink()
    (other.ledger_db).rename(grown.ledger_db)
    served = _lines(grown)
    assert served != first
    assert served == [_rows_as_lines(grown, query) for query in QUERIES]


def test_a_file_that_cannot_be_kept_leaves_the_pages_as_they_were(grown: Home) -> None:
    (grown.root / PAGES_FILE).mkdir()  # not a file SQLite can open
    said: list[str] = []
    heard = logging.Handler()
    heard.emit = lambda record: said.append(record.getMessage())  # type: ignore[method-assign]
    daemons_log = logging.getLogger("agentd.serve")
    daemons_log.addHandler(heard)
    try:
        assert _lines(grown) == [_rows_as_lines(grown, query) for query in QUERIES]
    finally:
        daemons_log.removeHandler(heard)
    assert len(said) == 1 and "entry pages" in said[0] and "pages are read from the rows" in said[0]


def test_a_file_that_could_not_be_kept_is_tried_again_after_a_rest(
    grown: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(agentd.server.pages, "RETRY", 0.5)
    (grown.root / PAGES_FILE).mkdir()  # as a disk that is full for a while
    expected = [_rows_as_lines(grown, query) for query in QUERIES]
    with TestClient(app(grown)) as client:

        def served() -> list[bytes]:
            return [client.get("/v1/entries", params={**query, "as": "jsonl"}).content for query in QUERIES]

        assert served() == expected
        (grown.root / PAGES_FILE).rmdir()
        assert served() == expected and not (grown.root / PAGES_FILE).exists()  # resting
        time.sleep(0.6)
        assert served() == expected
    assert _kept(grown) == [0, 1]


def test_the_daemon_keeps_the_full_bundles_unasked(grown: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agentd.server.api, "FILL_SECONDS", 0.05)
    with TestClient(app(grown)):
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _kept_so_far(grown) != [0, 1]:
            time.sleep(0.05)
    assert _kept(grown) == [0, 1]
    assert _lines(grown) == [_rows_as_lines(grown, query) for query in QUERIES]
