"""A ledger store damaged behind agentd's back, on SQLite and on PostgreSQL: `ledger
verify` says what it found in one line and exits 3, writing nothing; every other command
either still works or says the same in one line; none ends in a traceback."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.home import Home
from tests.cli.test_wallet_cli import one_error_line
from tests.ledger.ledgerkit import fetch, tables, tamper, temporary_store

RESTORE = "restore it from a backup"
# Each damage: the SQL that does it (SQLite's, then PostgreSQL's where it differs), what
# verify names, and what the other commands name when they fail for it.
DAMAGES = {
    "head row deleted": (
        ["DELETE FROM ledger_head"],
        "has no head row (ledger_head): the store is damaged",
        "has no head row (ledger_head)",
    ),
    "format row deleted": (
        ["DELETE FROM ledger_format"],
        "has no format row (ledger_format): the store is damaged",
        "has no format row (ledger_format)",
    ),
    "raw stored as text": (
        [
            "UPDATE ledger_entries SET raw = CAST(raw AS TEXT) WHERE pulse = 3",
            "ALTER TABLE ledger_entries ALTER COLUMN raw TYPE TEXT USING convert_from(raw, 'UTF8')",
        ],
        "holds text in ledger_entries.raw at Pulse",
        "holds text in ledger_entries.raw at Pulse",
    ),
    "tiles table dropped": (
        ["DROP TABLE ledger_tiles"],
        "has lost its ledger_tiles table: the store is damaged",
        "has lost its ledger_tiles table",
    ),
    "checkpoint note garbled": (
        ["UPDATE ledger_checkpoints SET note = 'not a signed note'"],
        "stored checkpoint 1 of 1 is not a checkpoint: not a signed note",
        "not a checkpoint",
    ),
}
# What a user runs on such a store, besides verify.
OTHERS = [
    ("ledger", "log"),
    ("ledger", "show", "3"),
    ("ledger", "export", "-"),
    ("ledger", "checkpoint"),
    ("wallet", "list"),
    ("wallet", "fund", "alice", "1"),
]


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, agentd, home: Home, tmp_path: Path, monkeypatch) -> Iterator[str]:
    """The URL of the store of a home with a short log (genesis, a mint, a transfer)."""
    with temporary_store(request.param, tmp_path / "store") as url:
        if request.param == "postgres":
            monkeypatch.setenv("AGENTD_LEDGER_URL", url)
        for name in ("alice", "bob"):
            assert agentd("wallet", "new", name).code == 0
        assert agentd("wallet", "fund", "alice", "10").code == 0
        assert agentd("wallet", "transfer", "alice", "bob", "1").code == 0
        yield home.ledger_url


def _held(url: str) -> dict[str, list[tuple[object, ...]]]:
    """Every table of the store and every row in it."""
    return {table: sorted(map(tuple, fetch(url, f"SELECT * FROM {table}")), key=repr) for table in sorted(tables(url))}


@pytest.mark.parametrize("damage", DAMAGES)
def test_verify_names_the_damage_in_one_line_writes_nothing_and_no_command_ends_in_a_traceback(
    agentd, store_url: str, damage: str
) -> None:
    statements, named, others_name = DAMAGES[damage]
    tamper(store_url, statements[-1] if store_url.startswith("postgres") else statements[0])
    before = _held(store_url)

    line = one_error_line(agentd("ledger", "verify"), code=3, prefix="agentd: check failed: ")
    assert named in line and RESTORE in line
    report = agentd("ledger", "verify", "--json")
    assert report.code == 3 and "Traceback" not in report.err
    found = json.loads(report.out)
    assert found["ok"] is False and named in found["problem"]
    assert _held(store_url) == before  # an audit writes nothing: no row, no table made anew

    for args in OTHERS:
        r = agentd(*args)
        assert r.code == 0 or others_name in one_error_line(r), (args, r.err)
