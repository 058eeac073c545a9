"""The store's layout, on SQLite and PostgreSQL alike: it holds each author's sequence
number once (so the same entry is refused by the store itself, naming where it is),
finds claim ids across SQLite's index generations, and a store of layout 2 (claim keys
held unique) is read as it is and carried over the first time it is opened to write."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ledger import MINT, TRANSFER, Entry, Head, Ledger, LedgerError, LedgerReader, Wallet
from ledger.sqlite import GENERATION
from ledger.store import FORMAT, Record
from ledger.stores import open_store
from tests.ledger.ledgerkit import fetch, funds_rules, tamper

# Layout 2's entries table, as that version made it: a unique key of each claim id.
LAYOUT_2 = {
    "sqlite": """CREATE TABLE ledger_entries (
        pulse INTEGER PRIMARY KEY, raw BLOB NOT NULL, leaf BLOB NOT NULL, chain BLOB NOT NULL,
        kind TEXT NOT NULL, author TEXT NOT NULL, claim INTEGER NOT NULL UNIQUE)""",
    "postgres": """CREATE TABLE ledger_entries (
        pulse BIGINT PRIMARY KEY, raw BYTEA NOT NULL, leaf BYTEA NOT NULL, chain BYTEA NOT NULL,
        kind TEXT NOT NULL, author TEXT NOT NULL, claim BIGINT NOT NULL UNIQUE)""",
}
LAYOUT_2_INDEXES = (
    "CREATE INDEX ledger_entries_kind ON ledger_entries (kind, pulse)",
    "CREATE INDEX ledger_entries_author ON ledger_entries (author, pulse)",
)


@pytest.fixture
def ledger(store_url: str, log_key: Wallet) -> Iterator[Ledger]:
    with Ledger.open(store_url, funds_rules(), log_key) as opened:
        yield opened


def _transfers(ledger: Ledger, log_key: Wallet, count: int = 6) -> Wallet:
    alice = Wallet.generate("alice")
    ledger.append(log_key, MINT, {"to": alice.id, "cents": 10_000})
    ledger.append_many([(alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": str(i)}) for i in range(count)])
    return alice


def _backend(url: str) -> str:
    return "sqlite" if url.startswith("sqlite:") else "postgres"


def _record_again(url: str, entry: Entry) -> None:
    """Writes `entry` after the head through the store alone, as a ledger whose fold went
    wrong would: the store's own index is what must refuse it."""
    store = open_store(url)
    try:
        with store.transaction() as txn:
            size = txn.head.size + 1
            row = Record(size, entry.raw, entry.leaf_hash, bytes(32), entry.kind, entry.author, entry.seq)
            txn.add([row], Head(size, bytes(32)), [])
    finally:
        store.close()


def test_the_store_holds_an_author_s_number_once_and_names_the_row(
    store_url: str, ledger: Ledger, log_key: Wallet
) -> None:
    alice = _transfers(ledger, log_key)
    third = ledger.get(3)
    with pytest.raises(LedgerError, match="already on the log at Pulse 3: an entry is recorded once"):
        _record_again(store_url, third)
    # Other bytes under the same author and number: refused too, naming the row that holds them.
    other = Entry.create(alice, TRANSFER, {"to": "1" * 32, "cents": 2}, log=ledger.origin, seq=third.seq)
    with pytest.raises(LedgerError, match=rf"sequence number {third.seq} of wallet {alice.id}, which Pulse 3 holds"):
        _record_again(store_url, other)
    assert ledger.size == 8 and fetch(store_url, "SELECT max(pulse) FROM ledger_entries") == [(8,)]
    assert ledger.verify().ok


def test_claim_ids_are_found_across_generations(store_url: str) -> None:
    store = open_store(store_url)  # rows written straight to the table: only the index is under test
    store.close()
    leaves = {
        pulse: b"\xab" + pulse.to_bytes(4, "big") + bytes(27) for pulse in (1, 2, 1 << GENERATION, 3 << GENERATION)
    }
    leaves[5] = bytes([0xAC]) + bytes(31)
    for pulse, leaf in sorted(leaves.items()):
        tamper(
            store_url,
            "INSERT INTO ledger_entries (pulse, raw, leaf, chain, kind, author, seq) VALUES (?, ?, ?, ?, 'k', 'a', ?)",
            [pulse, b"x", leaf, bytes(32), pulse],
        )
    store = open_store(store_url)
    try:
        everything = (b"\xab" + bytes(31), b"\xab" + b"\xff" * 31)
        assert store.find(*everything, 10) == [1, 2, 1 << GENERATION, 3 << GENERATION]
        assert store.find(*everything, 3) == [1, 2, 1 << GENERATION]
        exact = leaves[3 << GENERATION]
        assert store.find(exact, exact, 2) == [3 << GENERATION]
        assert store.find(leaves[5], leaves[5], 2) == [5]
        assert store.find(b"\xad" + bytes(31), b"\xad" + b"\xff" * 31, 2) == []
    finally:
        store.close()


def _back_to_layout_2(url: str) -> None:
    """Rewrites a store of this layout as layout 2 made it: the claim column and its
    unique index instead of seq, and format 2."""
    rows = fetch(url, "SELECT pulse, raw, leaf, chain, kind, author FROM ledger_entries ORDER BY pulse")
    tamper(url, "DROP TABLE ledger_entries")
    for statement in (LAYOUT_2[_backend(url)], *LAYOUT_2_INDEXES):
        tamper(url, statement)
    for pulse, raw, leaf, chain, kind, author in rows:
        tamper(
            url,
            "INSERT INTO ledger_entries (pulse, raw, leaf, chain, kind, author, claim) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [pulse, bytes(raw), bytes(leaf), bytes(chain), kind, author, int.from_bytes(leaf[:8], "big") - 2**63],
        )
    tamper(url, "UPDATE ledger_format SET version = 2")


def test_a_store_of_layout_2_is_read_as_it_is_and_carried_over_when_written(store_url: str, log_key: Wallet) -> None:
    with Ledger.open(store_url, funds_rules(), log_key) as ledger:
        alice = _transfers(ledger, log_key)
        claims = [e.claim_id for e in ledger.entries()]
        checkpoint = ledger.checkpoint()
    _back_to_layout_2(store_url)

    with LedgerReader.open(store_url, funds_rules()) as reader:  # reading writes nothing
        assert reader.size == 8 and reader.verify(checkpoint=checkpoint).ok
        assert reader.find(claims[4]).pulse == 5 and reader.find(claims[6][:8]).pulse == 7
    assert fetch(store_url, "SELECT version FROM ledger_format") == [(2,)]

    with Ledger.open(store_url, funds_rules(), log_key) as ledger:
        ledger.append(alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": "after"})
        assert ledger.verify(checkpoint=checkpoint).ok
        assert [ledger.find(claim).pulse for claim in claims] == list(range(1, 9))
        seqs = [(e.author, e.seq) for e in ledger.entries()]
        fourth = ledger.get(4)
    assert fetch(store_url, "SELECT version FROM ledger_format") == [(FORMAT,)]
    assert [tuple(r) for r in fetch(store_url, "SELECT author, seq FROM ledger_entries ORDER BY pulse")] == seqs
    with pytest.raises(LedgerError, match="already on the log at Pulse 4"):
        _record_again(store_url, fourth)


def test_a_store_of_layout_2_with_a_damaged_row_is_left_as_it_was(store_url: str, log_key: Wallet) -> None:
    with Ledger.open(store_url, funds_rules(), log_key) as ledger:
        _transfers(ledger, log_key)
    _back_to_layout_2(store_url)
    tamper(store_url, "UPDATE ledger_entries SET raw = ? WHERE pulse = 5", [b"not an entry"])
    with pytest.raises(LedgerError, match="Pulse 5 is corrupt"):
        Ledger.open(store_url, funds_rules(), log_key)
    # Nothing was carried over: the store is still layout 2, and an audit names the row.
    assert fetch(store_url, "SELECT version FROM ledger_format") == [(2,)]
    with LedgerReader.open(store_url, funds_rules(), check=False) as reader:
        report = reader.verify()
    assert report.problem is not None and report.problem.pulse == 5
