"""The state a ledger gives its readers: one read-only copy of the fold per size of the
log, new once this process, another writer or an import grows the log, and nothing a
reader does to it changes the ledger's own."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from ledger import (
    MINT,
    TRANSFER,
    Entry,
    Ledger,
    LedgerReader,
    RuleSet,
    RuleViolation,
    State,
    Wallet,
    export_line,
    read_copy,
)
from tests.ledger.ledgerkit import funds_rules

TAG = "test.tag/v1"


def _tag(state: State, entry: Entry) -> None:
    """Keeps nested data, as real rules do: a list per wallet inside a dict."""
    tags = state.ns("tags").setdefault(entry.author, {"names": [], "count": 0})
    tags["names"].append(entry.body["name"])
    tags["count"] += 1


def _rules() -> RuleSet:
    rules = funds_rules()
    rules.register(TAG, _tag)
    return rules


@pytest.fixture
def ledger(store_url: str, log_key: Wallet) -> Iterator[Ledger]:
    with Ledger.open(store_url, _rules(), log_key) as opened:
        yield opened


def _funded(ledger: Ledger, log_key: Wallet, cents: int = 500) -> Wallet:
    alice = Wallet.generate("alice")
    ledger.append(log_key, MINT, {"to": alice.id, "cents": cents})
    ledger.append(alice, TAG, {"name": "first"})
    return alice


def test_two_reads_with_no_write_between_give_the_same_state(ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key)
    state = ledger.state()
    assert ledger.state() is state
    assert state.size == ledger.size == 3 and state.balance(alice.id) == ledger.balance(alice.id) == 500
    assert state.ns("tags") == {alice.id: {"names": ["first"], "count": 1}}


def test_an_append_here_gives_the_new_state_and_leaves_the_old_as_it_was(ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key)
    bob = Wallet.generate("bob")
    before = ledger.state()
    ledger.append(alice, TRANSFER, {"to": bob.id, "cents": 120})
    after = ledger.state()
    assert after is not before and after.balances == {alice.id: 380, bob.id: 120}
    assert before.balances == {alice.id: 500} and before.size == 3


def test_a_refused_append_gives_the_state_as_it_was(ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key)
    before = ledger.state()
    with pytest.raises(RuleViolation, match="overdraft"):
        ledger.append(alice, TRANSFER, {"to": log_key.id, "cents": 501})
    assert ledger.state() == before and ledger.state().balance(alice.id) == 500


def test_an_append_by_another_writer_gives_the_new_state(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key)
    with LedgerReader.open(store_url, _rules()) as reader, Ledger.open(store_url, _rules(), log_key) as other:
        assert not hasattr(reader, "append")  # a reader only reads
        seen = reader.state()
        assert seen.balance(alice.id) == 500 and ledger.state().balance(alice.id) == 500
        other.append(alice, TRANSFER, {"to": log_key.id, "cents": 200})
        other.append(alice, TAG, {"name": "second"})
        for each in (reader, ledger):
            state = each.state()
            assert state is not seen and state.balance(alice.id) == 300
            assert state.ns("tags")[alice.id] == {"names": ["first", "second"], "count": 2}


def test_an_import_gives_the_state_of_the_copy(store_url: str, tmp_path: Path, log_key: Wallet) -> None:
    with Ledger.open(f"sqlite:///{tmp_path / 'origin.db'}", _rules(), log_key) as origin:
        alice = _funded(origin, log_key)
        lines = [export_line(e) for e in origin.entries()]
    with Ledger.open(store_url, _rules(), Wallet.generate()) as copied:
        empty = copied.state()
        copied.import_entries(read_copy(lines))
        assert empty.size == 0 and copied.state().balance(alice.id) == 500


def test_changing_what_state_gives_is_refused_and_changes_nothing(ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key)
    given = ledger.state()
    tags = given.ns("tags")[alice.id]
    changes = [
        lambda: given.balances.__setitem__(alice.id, 0),
        lambda: given.sequences.update({alice.id: 99}),
        lambda: given.namespaces.setdefault("mine", {}),
        lambda: tags["names"].append("forged"),
        lambda: tags.__setitem__("count", 7),
        lambda: given.ns("tags").clear(),
        lambda: setattr(given, "size", 0),
    ]
    for change in changes:
        with pytest.raises(TypeError, match="read-only"):
            change()
    assert given.ns("missing") == {} and "missing" not in given.namespaces
    assert ledger.balance(alice.id) == 500 and ledger.next_sequence(alice.id) == 2
    assert ledger.state().ns("tags") == {alice.id: {"names": ["first"], "count": 1}}
    with pytest.raises(RuleViolation, match="overdraft"):
        ledger.append(alice, TRANSFER, {"to": log_key.id, "cents": 501})  # held to the real fold
    assert ledger.verify().ok


def test_a_copy_of_the_state_is_the_caller_s_to_change(ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key)
    for mine in (ledger.state().copy(), copy.deepcopy(ledger.state())):
        mine.balances[alice.id] = 0
        mine.ns("tags")[alice.id]["names"].append("mine")
        mine.ns("mine")["x"] = [1]
    assert ledger.state().balance(alice.id) == 500 and "mine" not in ledger.state().namespaces
    assert ledger.state().ns("tags")[alice.id]["names"] == ["first"]
    # It reads and prints as plain JSON data does.
    assert json.loads(json.dumps(ledger.state().namespaces)) == orjson.loads(orjson.dumps(ledger.state().namespaces))
