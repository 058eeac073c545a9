"""The contract every ledger store keeps, run against SQLite and PostgreSQL alike:
appends and reads, refusals that write nothing, proofs and checkpoints, audits that name
the first bad Pulse after the store is tampered with, the snapshot new Ledger objects
start from (and do not trust when it does not hold), and real processes appending at
once or killed mid-append."""

from __future__ import annotations

import base64
import json
import logging
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import orjson
import pytest
import rfc8785

from ledger import (
    GENESIS,
    MAX_ENTRY_BYTES,
    MINT,
    TRANSFER,
    CheckpointPolicy,
    DamagedStore,
    Entry,
    EntryError,
    EntryTooLarge,
    Ledger,
    LedgerError,
    LedgerReader,
    Promise,
    ProofError,
    Receipt,
    RefusalRecorded,
    RuleSet,
    RuleViolation,
    State,
    Wallet,
    merkle,
    snapshot as snapshots,
    tiles,
)
from ledger.audit import check_row, check_rows
from ledger.checkpoint import parse as parse_checkpoint
from ledger.entry import PAYLOAD_TYPE, leaf_hash, pae
from ledger.export import export_line, read_copy
from ledger.fold import refusal_body
from ledger.log import IMPORT_BATCH, SNAPSHOT_BYTES_PER_ENTRY
from ledger.rules import MAX_CENTS
from ledger.store import CHAIN_START, Snapshot, chain
from ledger.stores import open_store
from tests.ledger.ledgerkit import fetch, footprint, funds_rules, tables, tamper

APPENDER = Path(__file__).parent / "appender.py"
SPENDER = Path(__file__).parent / "spender.py"


@pytest.fixture
def ledger(store_url: str, log_key: Wallet) -> Iterator[Ledger]:
    with Ledger.open(store_url, funds_rules(), log_key) as opened:
        yield opened


def _funded(ledger: Ledger, log_key: Wallet, cents: int = 10_000) -> Wallet:
    alice = Wallet.generate("alice")
    ledger.append(log_key, MINT, {"to": alice.id, "cents": cents})
    return alice


def _signed_elsewhere(ledger: Ledger, wallet: Wallet, kind: str, body: dict, seq: int | None = None) -> Entry:
    """An entry signed outside the ledger, as a remote signer makes one: for this log, with
    the author's next sequence number unless told otherwise."""
    return Entry.create(wallet, kind, body, log=ledger.origin, seq=seq or ledger.next_sequence(wallet.id))


def test_appends_number_entries_from_one(ledger: Ledger, log_key: Wallet) -> None:
    assert ledger.size == 0
    alice = _funded(ledger, log_key)
    bob = Wallet.generate("bob")
    sent = ledger.append(alice, TRANSFER, {"to": bob.id, "cents": 250, "memo": "lunch"})
    assert ledger.size == 3
    genesis = ledger.get(1)
    assert (genesis.kind, genesis.author, genesis.body) == (GENESIS, log_key.id, {"origin": ledger.origin})
    assert ledger.origin.startswith(f"agentd.ledger/{log_key.id}/")
    assert (sent.pulse, sent.kind, sent.author) == (3, TRANSFER, alice.id)
    # Every entry names the log, and each author's entries count 1, 2, 3, …
    assert [(e.log, e.author, e.seq) for e in ledger.entries()] == [
        (ledger.origin, log_key.id, 1),
        (ledger.origin, log_key.id, 2),
        (ledger.origin, alice.id, 1),
    ]
    assert (ledger.next_sequence(alice.id), ledger.next_sequence(bob.id)) == (2, 1)
    again = ledger.get(3)
    assert again.raw == sent.raw and again.claim_id == sent.claim_id and again.body == sent.body
    assert ledger.find(sent.claim_id).pulse == 3
    assert ledger.find(sent.claim_id[:10].upper()).pulse == 3
    state = ledger.state()
    assert state.balances == {alice.id: 9_750, bob.id: 250}
    assert (state.size, state.authority) == (3, log_key.id)


def test_reading_by_kind_author_and_start(ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key)
    bob = Wallet.generate()
    ledger.append_many([(alice, TRANSFER, {"to": bob.id, "cents": 1, "memo": str(i)}) for i in range(5)])
    assert [e.pulse for e in ledger.entries()] == list(range(1, 8))
    assert [e.pulse for e in ledger.entries(kind=TRANSFER)] == [3, 4, 5, 6, 7]
    assert [e.pulse for e in ledger.entries(author=log_key.id)] == [1, 2]
    assert [e.pulse for e in ledger.entries(kind=TRANSFER, start=6)] == [6, 7]
    assert list(ledger.entries(author=bob.id)) == []
    # Read back from the end: the last matches at or before a Pulse, newest first.
    assert [e.pulse for e in ledger.entries_back(7, 2, kind=TRANSFER)] == [7, 6]
    assert [e.pulse for e in ledger.entries_back(4, 10, author=alice.id)] == [4, 3]
    assert [e.pulse for e in ledger.entries_back(5, 3, TRANSFER, alice.id)] == [5, 4, 3]
    assert ledger.entries_back(2, 5, kind=TRANSFER) == [] and ledger.entries_back(7, 5, author=bob.id) == []


def test_raw_rows_are_the_rows_pulse_leaf_chain_and_bytes_as_stored(
    store_url: str, ledger: Ledger, log_key: Wallet
) -> None:
    alice = _funded(ledger, log_key)
    bob = Wallet.generate()
    ledger.append_many([(alice, TRANSFER, {"to": bob.id, "cents": 1, "memo": str(i)}) for i in range(5)])
    ledger.close()
    reads = [
        (1, False, {}),
        (4, False, {"limit": 2}),
        (1, False, {"kind": TRANSFER, "author": alice.id}),
        (6, True, {"limit": 3}),
        (7, True, {"author": log_key.id}),
        (2, True, {"kind": TRANSFER}),
        (8, False, {}),
    ]
    with closing(open_store(store_url, read_only=True)) as store:
        for pulse, back, asked in reads:
            rows = (store.rows_back if back else store.rows)(pulse, **asked)
            assert store.raw_rows(pulse, back=back, **asked) == [(r.pulse, r.leaf, r.chain, r.raw) for r in rows]
    sqlite_sql, postgres_sql, said = RETYPED["raw"]
    tamper(store_url, sqlite_sql if store_url.startswith("sqlite") else postgres_sql)
    with closing(open_store(store_url, read_only=True)) as store:  # handed over unchecked; `rows` names the damage
        assert [type(raw) for *_, raw in store.raw_rows(1, limit=2)] == [str, str]
        with pytest.raises(DamagedStore, match=re.escape(said)):
            store.rows(1, limit=2)


def test_lookups_that_find_nothing_say_so(ledger: Ledger, log_key: Wallet) -> None:
    _funded(ledger, log_key)
    with pytest.raises(LedgerError, match="no Pulse 9"):
        ledger.get(9)
    with pytest.raises(LedgerError, match="no claim"):
        ledger.find("abcdabcd" if not ledger.get(1).claim_id.startswith("abcdabcd") else "dcbadcba")
    with pytest.raises(LedgerError, match="not a claim id"):
        ledger.find("xyz")


def test_many_entries_go_in_order_in_one_batch(ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key, 500)
    bob = Wallet.generate()
    recorded = ledger.append_many([(alice, TRANSFER, {"to": bob.id, "cents": 100, "memo": str(i)}) for i in range(5)])
    assert [e.pulse for e in recorded] == [3, 4, 5, 6, 7]
    assert ledger.state().balance(alice.id) == 0


def _refused_and_nothing_written(ledger: Ledger, error: type[Exception], match: str, action) -> None:
    size, root = ledger.size, ledger.root() if ledger.size else None
    with pytest.raises(error, match=match):
        action()
    assert ledger.size == size
    if root is not None:
        assert ledger.root() == root


def test_a_bad_signature_is_refused(ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key)
    doc = json.loads(_signed_elsewhere(ledger, alice, TRANSFER, {"to": "0" * 32, "cents": 1}).raw)
    doc["signatures"][0]["sig"] = base64.b64encode(Wallet.generate().sign(b"other")).decode()
    _refused_and_nothing_written(ledger, EntryError, "bad signature", lambda: ledger.append_raw([rfc8785.dumps(doc)]))


def test_non_canonical_bytes_are_refused(ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key)
    raw = _signed_elsewhere(ledger, alice, TRANSFER, {"to": "0" * 32, "cents": 1}).raw
    spaced = json.dumps(json.loads(raw), indent=2).encode()
    _refused_and_nothing_written(ledger, EntryError, "canonical", lambda: ledger.append_raw([spaced]))


def test_an_unknown_kind_is_refused(ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key)
    _refused_and_nothing_written(
        ledger, RuleViolation, "unknown kind", lambda: ledger.append(alice, "agent.unheard-of/v1", {})
    )


def test_rule_breaking_bodies_are_refused(ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key, 100)
    bob = Wallet.generate()
    cases = [
        (alice, TRANSFER, {"to": bob.id, "cents": 101}, "overdraft"),
        (alice, TRANSFER, {"to": bob.id, "cents": 0}, "above 0"),
        (alice, TRANSFER, {"to": bob.id, "cents": "5"}, "whole number"),
        (alice, TRANSFER, {"to": "bob", "cents": 5}, "wallet id"),
        (alice, TRANSFER, {"to": alice.id, "cents": 5}, "itself"),
        (alice, MINT, {"to": alice.id, "cents": 5}, "only by the log's key"),
        (log_key, GENESIS, {"origin": "again"}, "only the first entry"),
    ]
    for wallet, kind, body, reason in cases:
        _refused_and_nothing_written(
            ledger, RuleViolation, reason, lambda w=wallet, k=kind, b=body: ledger.append(w, k, b)
        )


def test_a_batch_is_all_or_nothing(ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key, 300)
    bob = Wallet.generate()
    batch = [(alice, TRANSFER, {"to": bob.id, "cents": 100, "memo": str(i)}) for i in range(4)]
    _refused_and_nothing_written(ledger, RuleViolation, "entry 4 of 4 .*overdraft", lambda: ledger.append_many(batch))
    assert ledger.state().balance(alice.id) == 300


def test_an_entry_is_recorded_once(ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key)
    entry = _signed_elsewhere(ledger, alice, TRANSFER, {"to": "0" * 32, "cents": 1})
    ledger.append_raw([entry.raw])
    # Replaying someone's signed transfer must not move the money twice.
    _refused_and_nothing_written(
        ledger, LedgerError, "already on the log at Pulse 3", lambda: ledger.append_raw([entry.raw])
    )
    _refused_and_nothing_written(ledger, LedgerError, "twice", lambda: ledger.append_raw([entry.raw, entry.raw]))


def test_an_empty_log_needs_its_key_to_start(store_url: str) -> None:
    with Ledger.open(store_url, funds_rules(), None) as keyless:
        with pytest.raises(LedgerError, match="log's key"):
            keyless.append(Wallet.generate(), TRANSFER, {"to": "0" * 32, "cents": 1})
        assert keyless.size == 0


def test_later_packages_register_their_own_kinds(store_url: str, log_key: Wallet) -> None:
    rules = funds_rules()

    def note(state: State, entry: Entry) -> None:
        if not isinstance(entry.body.get("text"), str):
            raise RuleViolation("a note has text")
        state.ns("notes")[entry.claim_id] = entry.pulse

    rules.register("test.note/v1", note)
    with pytest.raises(LedgerError, match="already has a rule"):
        rules.register("test.note/v1", note)
    with Ledger.open(store_url, rules, log_key) as ledger:
        written = ledger.append(Wallet.generate(), "test.note/v1", {"text": "hello"})
        with pytest.raises(RuleViolation, match="a note has text"):
            ledger.append(Wallet.generate(), "test.note/v1", {})
        assert ledger.state().ns("notes") == {written.claim_id: 2}
        assert ledger.verify().ok
    with Ledger.open(store_url, funds_rules(), log_key) as without:
        report = without.verify()
        assert (report.problem.pulse, "unknown kind test.note/v1" in report.problem.reason) == (2, True)


def test_an_import_must_bring_its_own_genesis_entry(store_url: str, log_key: Wallet, tmp_path) -> None:
    rules = funds_rules()
    rules.register("test.note/v1", lambda state, entry: None)
    with Ledger.open(f"sqlite:///{tmp_path / 'origin.db'}", rules, log_key) as origin:
        origin.append_many([(Wallet.generate(), "test.note/v1", {"n": i}) for i in range(3)])
        lines = [export_line(e) for e in origin.entries()]
    headless = [json.dumps({**json.loads(x), "pulse": json.loads(x)["pulse"] - 1}) for x in lines[1:]]
    with Ledger.open(store_url, rules, Wallet.generate()) as copy:
        with pytest.raises(LedgerError, match="the copy does not start with its genesis entry"):
            copy.import_entries(read_copy(headless))
        assert copy.size == 0
        assert copy.import_entries(read_copy(lines)).size == 4 and copy.size == 4
        assert copy.state().authority == log_key.id


def test_no_balance_may_exceed_the_largest_safe_integer(ledger: Ledger, log_key: Wallet) -> None:
    alice, bob = Wallet.generate(), Wallet.generate()
    ledger.append(log_key, MINT, {"to": alice.id, "cents": MAX_CENTS - 1})
    ledger.append(log_key, MINT, {"to": bob.id, "cents": 2})
    _refused_and_nothing_written(
        ledger, RuleViolation, "may not exceed", lambda: ledger.append(log_key, MINT, {"to": alice.id, "cents": 2})
    )
    _refused_and_nothing_written(
        ledger, RuleViolation, "may not exceed", lambda: ledger.append(bob, TRANSFER, {"to": alice.id, "cents": 2})
    )
    ledger.append(bob, TRANSFER, {"to": alice.id, "cents": 1})
    assert ledger.state().balances == {alice.id: MAX_CENTS, bob.id: 1}
    assert ledger.verify().ok


def test_a_store_that_cannot_be_read_is_a_ledger_error(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    _funded(ledger, log_key)
    tamper(store_url, "DROP TABLE ledger_entries")
    with pytest.raises(LedgerError, match="ledger_entries"):
        list(ledger.entries())
    with pytest.raises(LedgerError, match="ledger_entries"):
        ledger.append(log_key, MINT, {"to": log_key.id, "cents": 1})


def test_another_ledger_object_sees_and_extends_the_same_log(store_url: str, log_key: Wallet) -> None:
    first, second = Ledger.open(store_url, funds_rules(), log_key), Ledger.open(store_url, funds_rules(), log_key)
    try:
        alice = _funded(first, log_key, 100)
        bob = Wallet.generate()
        second.append(alice, TRANSFER, {"to": bob.id, "cents": 60})
        # first's cached state is behind; the append must catch up before it checks the rule.
        with pytest.raises(RuleViolation, match="holds 40 cents"):
            first.append(alice, TRANSFER, {"to": bob.id, "cents": 50})
        first.append(alice, TRANSFER, {"to": bob.id, "cents": 40})
        assert second.state().balances == {alice.id: 0, bob.id: 100}
    finally:
        first.close()
        second.close()


def test_proofs_check_out(ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key)
    ledger.append_many([(alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": str(i)}) for i in range(9)])
    size = ledger.size
    for pulse in (1, 5, size):
        proof = ledger.inclusion_proof(pulse)
        proof.verify()
        assert (proof.size, proof.leaf_hash, proof.root) == (size, ledger.get(pulse).leaf_hash, ledger.root())
    old = ledger.inclusion_proof(3, size=6)
    old.verify()
    assert old.root == ledger.root(6)
    for m in range(1, size + 1):
        proof = ledger.consistency_proof(m)
        proof.verify()
        assert (proof.old_root, proof.new_root) == (ledger.root(m), ledger.root())
    with pytest.raises(LedgerError, match="not in a tree"):
        ledger.inclusion_proof(size + 1)
    with pytest.raises(LedgerError, match="outside the log"):
        ledger.consistency_proof(2, size + 5)


def test_checkpoints_are_signed_kept_and_never_contradicted(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    with pytest.raises(LedgerError, match="empty"):
        ledger.checkpoint()
    alice = _funded(ledger, log_key)
    first = ledger.checkpoint()  # the first append signed it
    assert ledger.checkpoints() == [first] and ledger.checkpoint() == first
    cp = parse_checkpoint(first)
    assert (cp.origin, cp.size, cp.root) == (ledger.origin, 2, ledger.root())
    ledger.append(alice, TRANSFER, {"to": "0" * 32, "cents": 1})
    second = ledger.checkpoint()
    assert parse_checkpoint(second).size == 3
    assert ledger.checkpoints() == [first, second]
    # Rewrite history under the log's feet, fixing up everything the store holds: the
    # log must refuse to sign anything for a head that contradicts its checkpoints.
    forged = _signed_elsewhere(ledger, alice, TRANSFER, {"to": "1" * 32, "cents": 2}, seq=1)
    _replace_row(store_url, 3, forged.raw)
    _forge_consistent(store_url)
    with pytest.raises(LedgerError, match="do not hash to its head"):
        ledger.append(alice, TRANSFER, {"to": "0" * 32, "cents": 3})  # its cached tree disagrees
    with Ledger.open(store_url, funds_rules(), log_key) as reopened:
        with pytest.raises(LedgerError, match="does not extend its last checkpoint"):
            reopened.append(alice, TRANSFER, {"to": "0" * 32, "cents": 3})
        with pytest.raises(LedgerError, match="does not extend its last checkpoint"):
            reopened.checkpoint()
    assert ledger.checkpoints() == [first, second] and ledger.size == 3


def test_another_key_cannot_sign_the_log_s_checkpoints(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key)
    with Ledger.open(store_url, funds_rules(), Wallet.generate()) as stranger:
        sent = stranger.append(alice, TRANSFER, {"to": "0" * 32, "cents": 1})
        assert sent.receipt is not None and (sent.receipt.checkpoint, sent.receipt.promise) == (None, None)
        with pytest.raises(LedgerError, match="only the log's key"):
            stranger.checkpoint()
        assert stranger.sign_due() is None
    assert ledger.checkpoints() == [ledger.checkpoints()[0]]


def test_verify_passes_on_an_honest_log(ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key)
    ledger.append_many([(alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": str(i)}) for i in range(30)])
    note = ledger.checkpoint()
    ledger.append(alice, TRANSFER, {"to": "0" * 32, "cents": 1})
    for jobs in (1, 2):
        report = ledger.verify(jobs=jobs, checkpoint=note)
        assert report.ok, report.problem
        assert (report.size, report.signatures, report.root, report.checkpoints) == (33, 33, ledger.root(), [2, 32, 32])
        assert report.snapshot == 33


def test_verify_with_workers_reads_back_every_body_exactly(store_url: str, log_key: Wallet) -> None:
    # Workers send the fields of the entries they checked as one JSON array; a body nested
    # as deep as an entry allows is too deep for that array, and goes back as it is.
    deep: object = "bottom"
    while True:
        try:
            Entry.create(log_key, "test.any/v1", {"d": [deep]}, log="x", seq=1)
        except LedgerError:
            break
        deep = [deep]
    bodies = [{"d": deep}, {"f": 0.1, "i": -(2**53) + 1, "s": "é\U0001f600\n", "n": None, "b": [True, {}]}]
    written = [json.dumps(body, sort_keys=True) for body in bodies]

    def same(state: State, entry: Entry) -> None:
        # On append and on every replay, each body must read back as it was written.
        if json.dumps(entry.body, sort_keys=True) != written[entry.seq - 1]:
            raise RuleViolation("the body read back is not the one written")

    rules = funds_rules()
    rules.register("test.any/v1", same)
    with Ledger.open(store_url, rules, log_key) as ledger:
        writer = Wallet.generate()
        for body in bodies:
            ledger.append(writer, "test.any/v1", body)
        rows = [(e.raw, e.leaf_hash) for e in ledger.entries()]
        assert isinstance(check_rows(rows), list) and isinstance(check_rows(rows[:1] + rows[-1:]), bytes)
        for jobs in (1, 2):
            report = ledger.verify(jobs=jobs)
            assert report.ok and report.size == 3, report.problem


def test_verify_refuses_a_signed_payload_in_another_spelling(ledger: Ledger, log_key: Wallet) -> None:
    # Signed by its author, so only the canonical-form check can refuse it, in this
    # process or in a worker's.
    alice = _funded(ledger, log_key)
    good = ledger.append(alice, TRANSFER, {"to": "0" * 32, "cents": 1})
    payload = base64.b64decode(json.loads(good.raw)["payload"]).replace(b'"cents":1', b'"cents":1.0')
    envelope = json.loads(good.raw)
    envelope["payload"] = base64.b64encode(payload).decode()
    envelope["signatures"][0]["sig"] = base64.b64encode(alice.sign(pae(PAYLOAD_TYPE.encode(), payload))).decode()
    raw = rfc8785.dumps(envelope)
    rows = [(e.raw, e.leaf_hash) for e in ledger.entries()] + [(raw, leaf_hash(raw))]
    assert isinstance(check_rows(rows), bytes)
    checked = orjson.loads(check_rows(rows))
    assert "canonical" in checked[-1] and all(isinstance(c, list) for c in checked[:-1])
    assert "canonical" in str(check_row(raw, leaf_hash(raw)))


def test_export_and_import_rebuild_the_same_log(tmp_path, ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key)
    ledger.append_many([(alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": str(i)}) for i in range(5)])
    lines = [export_line(e) for e in ledger.entries()]
    with Ledger.open(f"sqlite:///{tmp_path / 'copy.db'}", funds_rules(), Wallet.generate()) as copy:
        imported = copy.import_entries(read_copy(lines))
        assert imported.size == 7 and [e.pulse for e in copy.entries()] == list(range(1, 8))
        assert imported.checkpoint is None and "only self-consistency was checked" in imported.scope
        assert copy.root() == ledger.root()
        assert copy.state().balances == ledger.state().balances
        assert copy.verify(checkpoint=ledger.checkpoint()).ok
        with pytest.raises(LedgerError, match="not empty"):
            copy.import_entries(read_copy(lines))
    with Ledger.open(f"sqlite:///{tmp_path / 'gap.db'}", funds_rules(), Wallet.generate()) as gap:
        with pytest.raises(LedgerError, match="Pulse 3 should be"):
            gap.import_entries(read_copy(lines[:2] + lines[3:]))
        assert gap.size == 0


def test_a_copy_longer_than_a_batch_imports_whole_or_not_at_all(tmp_path, ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key, cents=10**9)
    ledger.append_many(
        [(alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": str(i)}) for i in range(IMPORT_BATCH * 2 + 500)]
    )
    lines = [export_line(e) for e in ledger.entries()]
    with Ledger.open(f"sqlite:///{tmp_path / 'copy.db'}", funds_rules(), Wallet.generate()) as copy:
        imported = copy.import_entries(read_copy(lines), checkpoint=ledger.checkpoint())
        assert imported.size == ledger.size and copy.root() == ledger.root() and copy.verify().ok
        assert copy.inclusion_proof(ledger.size - 1) == ledger.inclusion_proof(ledger.size - 1)  # tiles across batches
    # A bad entry in the last batch: nothing of the earlier batches is recorded either.
    bad = json.loads(lines[-2])
    bad["entry"] = base64.b64encode(base64.b64decode(bad["entry"]).replace(b'"sig"', b'"sig" ')).decode()
    with Ledger.open(f"sqlite:///{tmp_path / 'bad.db'}", funds_rules(), Wallet.generate()) as copy:
        with pytest.raises(LedgerError, match=f"Pulse {len(lines) - 1} refused"):
            copy.import_entries(read_copy([*lines[:-2], json.dumps(bad), lines[-1]]))
        assert copy.size == 0 and list(copy.entries()) == []


# Faults: the store is changed behind the ledger's back; verify names the first bad Pulse.


def _honest_log(ledger: Ledger, log_key: Wallet, transfers: int = 10) -> Wallet:
    alice = _funded(ledger, log_key)
    ledger.append_many([(alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": str(i)}) for i in range(transfers)])
    return alice


def _replace_row(url: str, pulse: int, raw: bytes) -> None:
    tamper(url, "UPDATE ledger_entries SET raw = ?, leaf = ? WHERE pulse = ?", [raw, leaf_hash(raw), pulse])


def _forge_consistent(url: str, tree: bool = True) -> None:
    """A careful forger's finish: the running digests and the head made again from the
    rows as they now stand, and with `tree` the stored tiles too."""
    link, leaves = CHAIN_START, []
    for pulse, leaf in fetch(url, "SELECT pulse, leaf FROM ledger_entries ORDER BY pulse"):
        link = chain(link, bytes(leaf))
        leaves.append(bytes(leaf))
        tamper(url, "UPDATE ledger_entries SET chain = ? WHERE pulse = ?", [link, pulse])
    tamper(url, "UPDATE ledger_head SET size = ?, root = ?", [len(leaves), merkle.root(leaves)])
    if tree:
        frontier = merkle.Frontier()
        completed = frontier.keep(tiles.HEIGHT)
        for leaf in leaves:
            frontier.append(leaf)
        tamper(url, "DELETE FROM ledger_tiles")
        for tile in tiles.updates(lambda level, index: None, 0, leaves, completed):
            tamper(
                url,
                "INSERT INTO ledger_tiles (level, idx, hashes) VALUES (?, ?, ?)",
                [tile.level, tile.index, tile.hashes],
            )


def _problem(url: str, checkpoint: str | None = None) -> tuple[int | None, str]:
    with Ledger.open(url, funds_rules(), None, check=False) as opened:
        report = opened.verify(checkpoint=checkpoint)
    assert not report.ok
    assert report.problem is not None
    return report.problem.pulse, report.problem.reason


def test_a_flipped_byte_is_found(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    _honest_log(ledger, log_key)
    raw = bytearray(ledger.get(6).raw)
    raw[40] ^= 1
    tamper(store_url, "UPDATE ledger_entries SET raw = ? WHERE pulse = 6", [bytes(raw)])
    pulse, reason = _problem(store_url)
    assert pulse == 6 and "changed after it was appended" in reason


def test_a_replaced_entry_with_a_matching_leaf_is_found(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    _honest_log(ledger, log_key)
    doc = json.loads(ledger.get(5).raw)
    doc["signatures"][0]["sig"] = base64.b64encode(bytes(64)).decode()
    _replace_row(store_url, 5, rfc8785.dumps(doc))
    pulse, reason = _problem(store_url)
    assert pulse == 5 and "out of place" in reason


def test_a_deleted_entry_is_found(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    _honest_log(ledger, log_key)
    tamper(store_url, "DELETE FROM ledger_entries WHERE pulse = 5")
    pulse, reason = _problem(store_url)
    assert pulse == 5 and "missing" in reason
    # Opening reads only the log's end: a missing last row is found there, others by verify.
    tamper(store_url, "DELETE FROM ledger_entries WHERE pulse = 12")
    with pytest.raises(LedgerError, match="holds rows up to Pulse 11 but its head records 12"):
        Ledger.open(store_url, funds_rules(), log_key)


def test_two_swapped_entries_are_found(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    _honest_log(ledger, log_key)
    _swap(store_url, 4, 8)
    pulse, reason = _problem(store_url)
    assert pulse == 4 and "out of place" in reason


def _swap(url: str, a: int, b: int) -> None:
    for old, new in ((a, -a), (b, a), (-a, b)):
        tamper(url, "UPDATE ledger_entries SET pulse = ? WHERE pulse = ?", [new, old])


def _two_spenders(ledger: Ledger, log_key: Wallet) -> tuple[Wallet, Wallet]:
    """A log where Pulses 5 and 6 are the first transfers of two different wallets:
    swapping them keeps every sequence number and every balance rule."""
    bob, carol = Wallet.generate("bob"), Wallet.generate("carol")
    ledger.append_many([(log_key, MINT, {"to": w.id, "cents": 100}) for w in (bob, carol)])
    ledger.append(log_key, MINT, {"to": bob.id, "cents": 1, "memo": "pad"})
    ledger.append(bob, TRANSFER, {"to": carol.id, "cents": 5})
    ledger.append(carol, TRANSFER, {"to": bob.id, "cents": 7})
    ledger.append(bob, TRANSFER, {"to": carol.id, "cents": 1})
    return bob, carol


def test_a_swap_with_the_running_digests_recomputed_names_its_pulse(
    store_url: str, ledger: Ledger, log_key: Wallet
) -> None:
    _honest_log(ledger, log_key)
    _swap(store_url, 4, 8)
    _forge_consistent(store_url, tree=False)
    # The same author's entries out of order: the sequence rule names the first.
    pulse, reason = _problem(store_url)
    assert pulse == 4 and "skipped ahead: its next sequence number is 2, not 6" in reason


def test_a_swap_of_two_authors_entries_with_digests_recomputed_names_its_pulse(
    store_url: str, ledger: Ledger, log_key: Wallet
) -> None:
    _two_spenders(ledger, log_key)
    assert [ledger.get(p).seq for p in (5, 6)] == [1, 1]
    _swap(store_url, 5, 6)
    _forge_consistent(store_url, tree=False)
    # Sequences and balances still hold; the stored tree the proofs come from does not.
    pulse, reason = _problem(store_url)
    assert pulse == 5 and "out of place: the log's stored tree holds another entry at this Pulse" in reason


def test_a_duplicate_at_the_tip_is_named(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    _honest_log(ledger, log_key)
    # The same signed transfer again at Pulse 13, with its digests, head and tree made to fit:
    # the store's unique index is no help once a forger writes another sequence number in its row.
    fifth = fetch(store_url, "SELECT raw, leaf, kind, author FROM ledger_entries WHERE pulse = 5")[0]
    tamper(
        store_url,
        "INSERT INTO ledger_entries (pulse, raw, leaf, chain, kind, author, seq) VALUES (13, ?, ?, ?, ?, ?, 42)",
        [bytes(fifth[0]), bytes(fifth[1]), bytes(32), fifth[2], fifth[3]],
    )
    _forge_consistent(store_url)
    pulse, reason = _problem(store_url)
    assert pulse == 13 and "recorded once" in reason and "already used sequence number 3" in reason


def test_a_row_beyond_the_head_is_named(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    alice = _honest_log(ledger, log_key)
    extra = _signed_elsewhere(ledger, alice, TRANSFER, {"to": "0" * 32, "cents": 1})
    tamper(
        store_url,
        "INSERT INTO ledger_entries (pulse, raw, leaf, chain, kind, author, seq) VALUES (13, ?, ?, ?, ?, ?, ?)",
        [extra.raw, extra.leaf_hash, chain(ledger.get(12).leaf_hash, extra.leaf_hash), TRANSFER, alice.id, extra.seq],
    )
    pulse, reason = _problem(store_url)
    assert pulse == 13 and "beyond the head: the store holds rows up to Pulse 13 but its head records 12" in reason
    with pytest.raises(LedgerError, match="holds rows up to Pulse 13 but its head records 12"):
        Ledger.open(store_url, funds_rules(), log_key)


def test_a_damaged_stored_tree_is_named(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    _honest_log(ledger, log_key, transfers=300)
    # The first hash of the first level-1 tile is the node over leaves 1..16.
    assert tiles.WIDTH == 16
    hashes = fetch(store_url, "SELECT hashes FROM ledger_tiles WHERE level = 1 AND idx = 0")[0][0]
    tamper(
        store_url, "UPDATE ledger_tiles SET hashes = ? WHERE level = 1 AND idx = 0", [bytes(32) + bytes(hashes)[32:]]
    )
    pulse, reason = _problem(store_url)
    assert pulse == 1 and "stored tree disagrees with the entries from here to Pulse 16" in reason
    with pytest.raises(ProofError):  # the proofs it serves no longer hold
        ledger.inclusion_proof(20).verify()


def test_a_truncated_tail_is_found(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    _honest_log(ledger, log_key)
    tamper(store_url, "DELETE FROM ledger_entries WHERE pulse > 9")
    pulse, reason = _problem(store_url)
    assert pulse == 10 and "truncated" in reason


def test_truncation_below_a_saved_checkpoint_is_caught_by_consistency(
    store_url: str, ledger: Ledger, log_key: Wallet
) -> None:
    alice = _honest_log(ledger, log_key)
    saved = ledger.checkpoint()
    ledger.append(alice, TRANSFER, {"to": "0" * 32, "cents": 1})
    # A careful forger cuts the log to 7 entries and fixes everything the store holds.
    root7 = ledger.root(7)
    tamper(store_url, "DELETE FROM ledger_entries WHERE pulse > 7")
    tamper(store_url, "UPDATE ledger_head SET size = 7, root = ?", [root7])
    tamper(store_url, "DELETE FROM ledger_checkpoints")
    assert _problem(store_url) == (
        None,
        "the store's snapshot describes 13 entries and the log holds 7: the store is corrupt",
    )
    tamper(store_url, "DELETE FROM ledger_snapshot")
    with Ledger.open(store_url, funds_rules(), None) as forged:
        assert forged.verify().ok  # nothing inside the store betrays it...
    pulse, reason = _problem(store_url, checkpoint=saved)  # ...but the auditor's checkpoint does
    assert pulse == 8 and "covers 12 entries" in reason


@pytest.mark.parametrize("table", ["ledger_head", "ledger_format"])
def test_a_store_missing_its_head_or_format_row_is_named_damaged_and_nothing_is_made_anew(
    store_url: str, ledger: Ledger, log_key: Wallet, table: str
) -> None:
    _honest_log(ledger, log_key)
    ledger.close()
    tamper(store_url, f"DELETE FROM {table}")
    said = f"has no {'head' if table == 'ledger_head' else 'format'} row ({table}): the store is damaged"
    with pytest.raises(DamagedStore, match=re.escape(said)):  # as `ledger verify` opens and audits it
        LedgerReader.open(store_url, funds_rules(), check=False).verify()
    with pytest.raises(DamagedStore, match=re.escape(said)):  # a writer, on opening or on its first append
        Ledger.open(store_url, funds_rules(), None).append(log_key, MINT, {"to": "0" * 32, "cents": 1})
    assert fetch(store_url, f"SELECT * FROM {table}") == []  # an audit, or a writer, made nothing anew


@pytest.mark.parametrize("table", ["ledger_tiles", "ledger_head", "ledger_checkpoints"])
def test_a_store_that_lost_a_table_is_named_damaged_and_nothing_is_made_anew(
    store_url: str, ledger: Ledger, log_key: Wallet, table: str
) -> None:
    _honest_log(ledger, log_key)
    ledger.close()
    tamper(store_url, f"DROP TABLE {table}")
    said = f"has lost its {table} table: the store is damaged; restore it from a backup"
    for read_only in (True, False):  # as `ledger verify` opens it, and as a writer does
        with pytest.raises(DamagedStore, match=re.escape(said)):
            open_store(store_url, read_only=read_only)
    assert table not in tables(store_url)


# A column given another type behind the ledger's back: SQLite's way, then PostgreSQL's.
RETYPED = {
    "raw": (
        "UPDATE ledger_entries SET raw = CAST(raw AS TEXT)",
        "ALTER TABLE ledger_entries ALTER COLUMN raw TYPE TEXT USING convert_from(raw, 'UTF8')",
        "holds text in ledger_entries.raw at Pulse 1, where it keeps bytes",
    ),
    "note": (
        "UPDATE ledger_checkpoints SET note = CAST(note AS BLOB)",
        "ALTER TABLE ledger_checkpoints ALTER COLUMN note TYPE BYTEA USING convert_to(note, 'UTF8')",
        "holds bytes in ledger_checkpoints.note, where it keeps text",
    ),
    "root": (
        "UPDATE ledger_head SET root = hex(root)",
        "ALTER TABLE ledger_head ALTER COLUMN root TYPE TEXT USING encode(root, 'hex')",
        "holds text in ledger_head.root, where it keeps bytes",
    ),
}


@pytest.mark.parametrize("column", RETYPED)
def test_a_value_of_another_type_is_named_damaged(store_url: str, ledger: Ledger, log_key: Wallet, column: str) -> None:
    _honest_log(ledger, log_key)
    ledger.close()
    sqlite_sql, postgres_sql, said = RETYPED[column]
    tamper(store_url, sqlite_sql if store_url.startswith("sqlite") else postgres_sql)
    with (
        LedgerReader.open(store_url, funds_rules(), check=False) as reader,
        pytest.raises(DamagedStore, match=re.escape(f"{said}: the store is damaged")),
    ):
        reader.verify()


def test_a_garbled_stored_checkpoint_is_a_finding_of_verify(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    _honest_log(ledger, log_key)
    ledger.checkpoint()
    tamper(store_url, "UPDATE ledger_checkpoints SET note = ?", ["not a signed note at all"])
    pulse, reason = _problem(store_url)
    assert pulse is None and re.fullmatch(
        r"stored checkpoint 1 of \d+ is not a checkpoint: not a signed note: .*", reason
    )


def test_a_rewritten_history_contradicts_a_saved_checkpoint(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    alice = _honest_log(ledger, log_key, transfers=3)
    saved = ledger.checkpoint()
    # Rebuild the same-length log with a different third entry, keeping every store invariant.
    forged = _signed_elsewhere(ledger, alice, TRANSFER, {"to": "1" * 32, "cents": 7}, seq=1)
    _replace_row(store_url, 3, forged.raw)
    tamper(store_url, "DELETE FROM ledger_checkpoints")
    tamper(store_url, "DELETE FROM ledger_snapshot")
    _forge_consistent(store_url, tree=False)
    pulse, reason = _problem(store_url, checkpoint=saved)  # the tree the proofs come from still tells
    assert pulse == 3 and "stored tree holds another entry at this Pulse" in reason
    _forge_consistent(store_url)
    with Ledger.open(store_url, funds_rules(), None) as opened:
        assert opened.verify().ok  # nothing inside the store betrays it now...
    pulse, reason = _problem(store_url, checkpoint=saved)  # ...but a checkpoint held elsewhere does
    assert pulse is None and "not consistent with the checkpoint at size 5" in reason


def test_a_checkpoint_from_another_log_is_refused(store_url: str, ledger: Ledger, log_key: Wallet, tmp_path) -> None:
    _honest_log(ledger, log_key, transfers=1)
    other_key = Wallet.generate()
    with Ledger.open(f"sqlite:///{tmp_path / 'other.db'}", funds_rules(), other_key) as other:
        _funded(other, other_key)
        foreign = other.checkpoint()
    pulse, reason = _problem(store_url, checkpoint=foreign)
    assert pulse is None and "checkpoint refused" in reason


# Replays: an entry names its log and its author's next sequence number, and counts once.


def test_a_transfer_refused_for_an_overdraft_is_not_accepted_once_the_sender_is_funded(
    store_url: str, ledger: Ledger, log_key: Wallet
) -> None:
    bob = _funded(ledger, log_key, 100)  # a wallet the log knows: it was funded
    signed = _signed_elsewhere(ledger, bob, TRANSFER, {"to": "0" * 32, "cents": 500})
    with pytest.raises(
        RefusalRecorded, match=r"overdraft.*the refusal is recorded at Pulse 3, which spends sequence number 1"
    ):
        ledger.append_raw([signed.raw])
    refusal = ledger.get(3)
    assert (refusal.kind, refusal.author, refusal.body["entry"]) == (
        "ledger.refusal/v1",
        log_key.id,
        base64.b64encode(signed.raw).decode(),
    )
    ledger.append(log_key, MINT, {"to": bob.id, "cents": 1000})
    size = ledger.size
    with pytest.raises(RuleViolation, match=r"recorded once: wallet .* already used sequence number 1"):
        ledger.append_raw([signed.raw])
    assert ledger.size == size and ledger.state().balance(bob.id) == 1100
    assert ledger.next_sequence(bob.id) == 2
    assert ledger.verify().ok  # the refusal replays: the transfer did break a rule at Pulse 3


# What a wallet may make the log store: nothing for a wallet the log does not know, one
# bounded entry at a time for the others.


def _notes_rules() -> RuleSet:
    """The funds rules and a kind any wallet may write, funded or not."""
    rules = funds_rules()
    rules.register("test.note/v1", lambda state, entry: None)
    return rules


def test_fresh_keys_posting_refused_transfers_cost_the_log_nothing(
    store_url: str, ledger: Ledger, log_key: Wallet
) -> None:
    alice = _funded(ledger, log_key)
    before = footprint(store_url)
    assert before["ledger_entries"][0] == 2
    attackers = [Wallet.generate() for _ in range(50)]
    for key in attackers:
        signed = _signed_elsewhere(ledger, key, TRANSFER, {"to": alice.id, "cents": 1_000_000, "memo": "x" * 500})
        with pytest.raises(RuleViolation, match="overdraft") as refused:
            ledger.append_raw([signed.raw])
        assert not isinstance(refused.value, RefusalRecorded)
        assert str(refused.value).endswith(
            f"; nothing is recorded, not even the refusal, and sequence number 1 of wallet {key.id} is not spent: "
            "the log knows nothing of the wallet (no entry of its own, never funded)"
        )
    assert footprint(store_url) == before  # not a row, not a byte
    assert ledger.size == 2 and ledger.root() == ledger.root(2)
    assert all(not ledger.knows(k.id) and ledger.next_sequence(k.id) == 1 for k in attackers)
    assert ledger.knows(alice.id) and ledger.knows(log_key.id)
    with Ledger.open(store_url, funds_rules(), log_key) as fresh:  # a new process sees the same log
        assert fresh.size == 2 and fresh.verify().ok
    assert ledger.verify().ok


def test_a_refusal_is_kept_for_every_wallet_the_log_knows(store_url: str, log_key: Wallet) -> None:
    with Ledger.open(store_url, _notes_rules(), log_key) as ledger:
        funded = _funded(ledger, log_key, 100)
        spent = _funded(ledger, log_key, 5)
        ledger.append(spent, TRANSFER, {"to": funded.id, "cents": 5})  # it holds 0 now, but was funded
        writer = Wallet.generate()
        ledger.append(writer, "test.note/v1", {"text": "hello"})  # never funded, but an entry of its own
        assert ledger.state().balance(spent.id) == 0 and ledger.state().balance(writer.id) == 0
        for wallet in (funded, spent, writer):
            assert ledger.knows(wallet.id)
            signed = _signed_elsewhere(ledger, wallet, TRANSFER, {"to": "0" * 32, "cents": 1_000})
            size = ledger.size
            with pytest.raises(RefusalRecorded, match=f"overdraft.*recorded at Pulse {size + 1}"):
                ledger.append_raw([signed.raw])
            assert ledger.get(size + 1).kind == "ledger.refusal/v1"
            assert ledger.next_sequence(wallet.id) == signed.seq + 1  # spent: the transfer can never come back
        assert ledger.verify().ok


def test_old_logs_holding_refusals_of_unknown_wallets_still_verify(
    store_url: str, log_key: Wallet, tmp_path: Path
) -> None:
    # What earlier versions recorded: the refusal of a transfer by a wallet the log knew nothing of.
    with Ledger.open(store_url, funds_rules(), log_key) as ledger:
        alice = _funded(ledger, log_key)
        stranger = Wallet.generate()
        refused = _signed_elsewhere(ledger, stranger, TRANSFER, {"to": alice.id, "cents": 500})
        ledger.append(log_key, "ledger.refusal/v1", refusal_body(refused, "overdraft: as an earlier version said"))
        ledger.append(alice, TRANSFER, {"to": stranger.id, "cents": 1})
        assert ledger.verify().ok
        assert ledger.next_sequence(stranger.id) == 2  # the old refusal spent its number
        lines = [export_line(e) for e in ledger.entries()]
    with Ledger.open(store_url, funds_rules(), log_key) as replayed:  # a new object folds every entry again
        assert replayed.size == 4 and replayed.verify().ok
    with Ledger.open(f"sqlite:///{tmp_path / 'copy.db'}", funds_rules(), Wallet.generate()) as copy:
        assert copy.import_entries(read_copy(lines)).size == 4 and copy.verify().ok
    # A wallet whose only entries were refused is not one the log knows, until it is funded.
    rules = _notes_rules()
    with Ledger.open(store_url, rules, log_key) as ledger:
        other = Wallet.generate()
        old = _signed_elsewhere(ledger, other, TRANSFER, {"to": alice.id, "cents": 7})
        ledger.append(log_key, "ledger.refusal/v1", refusal_body(old, "overdraft"))
        assert ledger.next_sequence(other.id) == 2 and not ledger.knows(other.id)
        before = footprint(store_url)
        with pytest.raises(RuleViolation, match="nothing is recorded"):
            ledger.append_raw([_signed_elsewhere(ledger, other, TRANSFER, {"to": alice.id, "cents": 7}).raw])
        assert footprint(store_url) == before
        assert ledger.knows(stranger.id)  # funded since, by alice


def test_an_entry_over_the_size_bound_is_refused_before_anything_is_written(store_url: str, log_key: Wallet) -> None:
    limit = re.escape(f"over the {MAX_ENTRY_BYTES:,} an entry may hold (MAX_ENTRY_BYTES)")
    with Ledger.open(store_url, _notes_rules(), log_key) as ledger:
        alice = _funded(ledger, log_key)
        big = {"text": "x" * MAX_ENTRY_BYTES}
        before = footprint(store_url)
        # Signed here, alone or in a batch...
        for action, match in [
            (lambda: ledger.append(alice, "test.note/v1", big), f"^the entry is 1,[0-9,]+ bytes, {limit}$"),
            (
                lambda: ledger.append_many([(alice, "test.note/v1", {}), (alice, "test.note/v1", big)]),
                f"^entry 2 of 2 \\(test.note/v1\\): the entry is 1,[0-9,]+ bytes, {limit}$",
            ),
        ]:
            _refused_and_nothing_written(ledger, EntryTooLarge, match, action)
        # ...or signed elsewhere, by a wallet the log knows: refused, and no refusal kept.
        raw = Entry.create(alice, "test.note/v1", big, log=ledger.origin, seq=1).raw
        _refused_and_nothing_written(
            ledger,
            EntryTooLarge,
            f"^entry 1 refused: it is {len(raw):,} bytes, {limit}$",
            lambda: ledger.append_raw([raw]),
        )
        assert footprint(store_url) == before and ledger.next_sequence(alice.id) == 1
        # Honest entries are far smaller; one of over 900 kB (a seal of 10,000 tasks) is still recorded.
        large = _signed_elsewhere(ledger, alice, "test.note/v1", {"text": "x" * 700_000})
        assert 900_000 < len(large.raw) <= MAX_ENTRY_BYTES
        assert ledger.append_raw([large.raw])[0].pulse == 3
        assert ledger.verify().ok


def test_the_size_bound_holds_appends_not_what_a_log_already_holds(
    store_url: str, ledger: Ledger, log_key: Wallet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = _funded(ledger, log_key)
    long = _signed_elsewhere(ledger, alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": "y" * 500})
    ledger.append_raw([long.raw])
    lines = [export_line(e) for e in ledger.entries()]
    monkeypatch.setattr("ledger.entry.MAX_ENTRY_BYTES", len(long.raw) - 1)  # a later, smaller bound
    with Ledger.open(store_url, funds_rules(), log_key) as reopened:
        assert reopened.size == 3 and reopened.verify().ok
        again = _signed_elsewhere(reopened, alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": "z" * 500})
        _refused_and_nothing_written(
            reopened, EntryTooLarge, f"over the {len(long.raw) - 1:,}", lambda: reopened.append_raw([again.raw])
        )
        # A known wallet's refused entry just under the bound: its refusal, the ledger's own
        # entry holding it, is kept though it is larger.
        under = _signed_elsewhere(reopened, alice, TRANSFER, {"to": "0" * 32, "cents": 10**6, "memo": "w" * 480})
        assert len(under.raw) < len(long.raw) - 1
        with pytest.raises(RefusalRecorded):
            reopened.append_raw([under.raw])
        assert len(reopened.get(4).raw) > len(long.raw)
    with Ledger.open(f"sqlite:///{tmp_path / 'copy.db'}", funds_rules(), Wallet.generate()) as copy:
        assert copy.import_entries(read_copy(lines)).size == 3 and copy.verify().ok


def test_a_refusal_must_hold_an_entry_that_breaks_a_rule(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key)
    # The log's key cannot spend a wallet's sequence number with a made-up refusal.
    good = _signed_elsewhere(ledger, alice, TRANSFER, {"to": "0" * 32, "cents": 1})
    body = {"entry": base64.b64encode(good.raw).decode(), "reason": "made up"}
    _refused_and_nothing_written(
        ledger, RuleViolation, "keeps every rule here", lambda: ledger.append(log_key, "ledger.refusal/v1", body)
    )
    # Nor may anyone but the log's key record one.
    _refused_and_nothing_written(
        ledger, RuleViolation, "only by the log's key", lambda: ledger.append(alice, "ledger.refusal/v1", body)
    )
    _refused_and_nothing_written(
        ledger,
        RuleViolation,
        "only this ledger's own key writes",
        lambda: ledger.append_raw([_signed_elsewhere(ledger, alice, "ledger.refusal/v1", body).raw]),
    )
    assert ledger.append_raw([good.raw])[0].seq == 1


def test_a_transfer_for_one_log_is_refused_by_another(store_url: str, log_key: Wallet, tmp_path) -> None:
    alice = Wallet.generate("alice")
    # Two logs started by the same key, alice funded on both: still two origins.
    with (
        Ledger.open(store_url, funds_rules(), log_key) as first,
        Ledger.open(f"sqlite:///{tmp_path / 'second.db'}", funds_rules(), log_key) as second,
    ):
        for log in (first, second):
            log.append(log_key, MINT, {"to": alice.id, "cents": 100})
        assert first.origin != second.origin
        signed = _signed_elsewhere(first, alice, TRANSFER, {"to": "0" * 32, "cents": 60})
        first.append_raw([signed.raw])
        _refused_and_nothing_written(
            second,
            RuleViolation,
            f"signed for log {first.origin}, not this one",
            lambda: second.append_raw([signed.raw]),
        )
        assert second.state().balance(alice.id) == 100 and second.next_sequence(alice.id) == 1


def test_sequence_numbers_reused_skipped_or_out_of_order_are_refused(
    store_url: str, ledger: Ledger, log_key: Wallet
) -> None:
    alice = _funded(ledger, log_key)
    to = {"to": "0" * 32, "cents": 1}
    first = _signed_elsewhere(ledger, alice, TRANSFER, to)
    ledger.append_raw([first.raw])
    reused = _signed_elsewhere(ledger, alice, TRANSFER, {**to, "memo": "again"}, seq=1)
    _refused_and_nothing_written(
        ledger, RuleViolation, "already used sequence number 1", lambda: ledger.append_raw([reused.raw])
    )
    skipped = _signed_elsewhere(ledger, alice, TRANSFER, to, seq=3)
    _refused_and_nothing_written(
        ledger,
        RuleViolation,
        "skipped ahead: its next sequence number is 2, not 3",
        lambda: ledger.append_raw([skipped.raw]),
    )
    second = _signed_elsewhere(ledger, alice, TRANSFER, to, seq=2)
    _refused_and_nothing_written(
        ledger, RuleViolation, "entry 1 of 2 .*skipped ahead", lambda: ledger.append_raw([skipped.raw, second.raw])
    )  # out of order in one batch
    assert [e.seq for e in ledger.append_raw([second.raw, skipped.raw])] == [2, 3]
    # Nothing was spent by these refusals: the ledger's own rules refused them.
    assert [e.kind for e in ledger.entries()].count("ledger.refusal/v1") == 0


def test_a_ledger_of_the_first_format_is_refused_in_one_line(store_url: str) -> None:
    tamper(
        store_url,
        "CREATE TABLE ledger_entries (pulse INTEGER PRIMARY KEY, raw BLOB)".replace(
            "BLOB", "BYTEA" if "postgres" in store_url else "BLOB"
        ),
    )
    tamper(store_url, "CREATE TABLE ledger_head (id INTEGER PRIMARY KEY, size INTEGER, root TEXT)")
    # Empty, it is made anew: nothing is lost.
    with Ledger.open(store_url, funds_rules(), Wallet.generate()) as fresh:
        assert fresh.size == 0
    tamper(store_url, "DROP TABLE ledger_format")
    tamper(
        store_url,
        "INSERT INTO ledger_entries (pulse, raw, leaf, chain, kind, author, seq) VALUES (1, ?, ?, ?, 'k', 'a', 1)",
        [b"x", b"x", b"x"],
    )
    with pytest.raises(LedgerError) as refused:
        Ledger.open(store_url, funds_rules(), Wallet.generate())
    line = str(refused.value)
    assert "\n" not in line and "holds 1 entries in format v1" in line and "move it aside" in line


# Receipts: each append returns the checkpoint that covers it, or a signed promise of one.


class _Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_appends_sign_checkpoints_every_n_entries_or_t_seconds(store_url: str, log_key: Wallet) -> None:
    clock = _Clock()
    policy = CheckpointPolicy(every=5, seconds=30)
    with Ledger(open_store(store_url), funds_rules(), log_key, policy=policy, clock=clock) as ledger:
        alice = _funded(ledger, log_key)  # the first append signs at once
        assert [parse_checkpoint(n).size for n in ledger.checkpoints()] == [2]
        sent = [ledger.append(alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": str(i)}) for i in range(3)]
        assert all(e.receipt.checkpoint is None for e in sent)
        promise = Promise.parse(sent[-1].receipt.promise)
        assert (promise.origin, promise.size, promise.root, promise.deadline) == (
            ledger.origin,
            5,
            ledger.root(),
            int(clock.now) + 30,
        )
        # The fifth entry since the last checkpoint brings the next one, in its own transaction.
        covered = ledger.append_many(
            [(alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": f"b{i}"}) for i in range(2)]
        )
        assert [parse_checkpoint(n).size for n in ledger.checkpoints()] == [2, 7]
        assert all(e.receipt.checkpoint == ledger.checkpoints()[-1] for e in covered)
        # Quiet for the policy's seconds: the next append signs, whatever the count.
        clock.now += 31
        late = ledger.append(alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": "late"})
        assert parse_checkpoint(late.receipt.checkpoint).size == 8
        # A promise left pending past its deadline is kept by sign_due, which a server runs on a timer.
        pending = ledger.append(alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": "pending"})
        assert ledger.sign_due() is None
        clock.now += 31
        kept = ledger.sign_due()
        assert kept is not None and parse_checkpoint(kept).size == 9 and ledger.sign_due() is None
        assert Promise.parse(pending.receipt.promise).deadline <= clock.now
        assert ledger.verify().checkpoints == [2, 7, 8, 9]


def test_a_receipt_binds_its_entry_into_a_signed_tree(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key)
    for entry in (ledger.get(2), ledger.append(alice, TRANSFER, {"to": "0" * 32, "cents": 1})):
        receipt = entry.receipt if entry.receipt else _funded_receipt(ledger)
        size, root = receipt.check(log_key.public_key, ledger.origin)
        proof = ledger.inclusion_proof(receipt.pulse, size)
        assert (proof.root, proof.leaf_hash) == (root, receipt.leaf_hash)
        proof.verify()
        with pytest.raises(LedgerError, match="no valid signature"):
            receipt.check(Wallet.generate().public_key, ledger.origin)


def _funded_receipt(ledger: Ledger) -> Receipt:
    """Entries read back from the store carry no receipt; the first append's was its checkpoint."""
    return Receipt(2, ledger.get(2).leaf_hash, checkpoint=ledger.checkpoints()[0])


def test_cosignatures_are_kept_on_the_log_s_own_checkpoint(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    _funded(ledger, log_key)
    note = ledger.checkpoint()
    line = f"\u2014 witness.example/w1 {base64.b64encode(bytes(76)).decode()}\n"
    stored = ledger.add_cosignatures(note + line)
    assert stored == note + line and ledger.checkpoint() == stored and ledger.latest_checkpoint() == stored
    assert ledger.add_cosignatures(note + line) == stored  # once each
    other = note.replace(note.splitlines()[2], base64.b64encode(bytes(32)).decode())
    with pytest.raises(LedgerError, match="not the one this log signed"):
        ledger.add_cosignatures(other)


# Proofs come from the stored tree: a few reads whatever the size.


class _Counting:
    """A recorder that counts the reads a ledger makes of it."""

    def __init__(self, store) -> None:
        self._store = store
        self.reads: Counter[str] = Counter()

    def __getattr__(self, name: str):
        self.reads[name] += 1
        return getattr(self._store, name)


def test_proofs_and_roots_come_from_the_stored_tree_in_a_few_reads(store_url: str, log_key: Wallet) -> None:
    with Ledger.open(store_url, funds_rules(), log_key) as writer:
        alice = _funded(writer, log_key, 10**6)
        writer.append_many([(alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": str(i)}) for i in range(1200)])
        leaves = [e.leaf_hash for e in writer.entries()]
    counting = _Counting(open_store(store_url))
    with Ledger(counting, funds_rules(), log_key) as ledger:  # type: ignore[arg-type]
        size = ledger.size
        assert size == len(leaves) == 1202
        for pulse, tree in ((1, size), (257, size), (700, 1000), (size, size), (3, 3)):
            counting.reads.clear()
            proof = ledger.inclusion_proof(pulse, tree)
            assert set(counting.reads) <= {"head", "tile"} and counting.reads["tile"] <= 6, counting.reads
            assert proof.path == merkle.inclusion_proof(leaves[:tree], pulse - 1)
            assert (proof.leaf_hash, proof.root) == (leaves[pulse - 1], merkle.root(leaves[:tree]))
            proof.verify()
        for old in (1, 255, 256, 257, 1000, size):
            counting.reads.clear()
            proof = ledger.consistency_proof(old)
            assert counting.reads["tile"] <= 8 and "rows" not in counting.reads
            assert proof.path == (merkle.consistency_proof(leaves, old) if old < size else [])
            assert proof.old_root == merkle.root(leaves[:old])
            proof.verify()
        counting.reads.clear()
        ledger.check()
        assert "rows" not in counting.reads


# Imports: a copy checked against a checkpoint the importer trusts.


def _exported(ledger: Ledger) -> list[dict]:
    return [json.loads(export_line(e)) for e in ledger.entries()]


def _copy(lines: list[dict]) -> list[str]:
    """The lines with Pulses numbered again 1, 2, 3, …, as a copy made to look whole would be."""
    return [json.dumps({**line, "pulse": i}) for i, line in enumerate(lines, 1)]


def test_an_import_checked_against_a_checkpoint_refuses_a_copy_cut_pruned_or_reordered(
    store_url: str, ledger: Ledger, log_key: Wallet, tmp_path
) -> None:
    bob, carol = _two_spenders(ledger, log_key)
    ledger.append(carol, TRANSFER, {"to": bob.id, "cents": 2})
    note = ledger.checkpoint()
    lines = _exported(ledger)  # Pulses 1..8
    copies = {
        "truncated": (lines[:6], "Pulse 7: missing: the checkpoint covers 8 entries and the copy holds 6"),
        "pruned": (lines[:4] + lines[5:], "Pulse 6 refused: wallet .* skipped ahead"),
        "reordered": (
            [*lines[:4], lines[6], lines[5], lines[4], *lines[7:]],
            "Pulse 5 refused: wallet .* skipped ahead",
        ),
        "pruned at an author's last entry": (lines[:7], "Pulse 8: missing"),
        "two authors swapped": ([*lines[:4], lines[5], lines[4], *lines[6:]], "do not hash to the checkpoint's root"),
    }
    for i, (what, (copy, reason)) in enumerate(copies.items()):
        with Ledger.open(f"sqlite:///{tmp_path / f'copy{i}.db'}", funds_rules(), None) as target:
            with pytest.raises(LedgerError, match=reason):
                target.import_entries(read_copy(_copy(copy)), checkpoint=note)
            assert target.size == 0, what
    with Ledger.open(
        store_url.replace("ledger.db", "whole.db") if "sqlite" in store_url else f"sqlite:///{tmp_path / 'whole.db'}",
        funds_rules(),
        None,
    ) as target:
        imported = target.import_entries(read_copy(_copy(lines)), checkpoint=note)
        assert imported.checkpoint == 8 and imported.scope == "consistent with the checkpoint at size 8"
    with Ledger.open(f"sqlite:///{tmp_path / 'unchecked.db'}", funds_rules(), None) as target:
        cut = target.import_entries(read_copy(_copy(lines[:6])))
        assert cut.size == 6 and "only self-consistency was checked" in cut.scope
    with Ledger.open(f"sqlite:///{tmp_path / 'foreign.db'}", funds_rules(), None) as target:
        other_key = Wallet.generate()
        with Ledger.open(f"sqlite:///{tmp_path / 'other.db'}", funds_rules(), other_key) as other:
            _funded(other, other_key)
            foreign = other.checkpoint()
        with pytest.raises(LedgerError, match="is for log"):
            target.import_entries(read_copy(_copy(lines)), checkpoint=foreign)


# The snapshot: new Ledger objects start from it, and replay the whole log when it does not hold.


def _stored_snapshot(url: str) -> Snapshot:
    store = open_store(url)
    try:
        stored = store.snapshot()
    finally:
        store.close()
    assert stored is not None
    return stored


def _put_snapshot(url: str, snapshot: Snapshot) -> None:
    tamper(url, "DELETE FROM ledger_snapshot")
    tamper(
        url,
        "INSERT INTO ledger_snapshot (id, size, root, chain, frontier, rules, state, digest) VALUES (1, ?, ?, ?, ?, ?, ?, ?)",
        [
            snapshot.size,
            snapshot.root,
            snapshot.chain,
            snapshot.frontier,
            snapshot.rules,
            snapshot.state,
            snapshot.digest,
        ],
    )


def _with_balance(url: str, wallet: Wallet, cents: int) -> Snapshot:
    """The stored snapshot with `wallet` holding `cents`, digest and all made again: a
    forger's snapshot."""
    stored = _stored_snapshot(url)
    state, frontier = snapshots.restore(stored, funds_rules().fingerprint)
    state.balances[wallet.id] = cents
    return snapshots.take(state, frontier, stored.chain, stored.rules)


def _spend(url: str, wallet: Wallet, to: str, cents: int) -> dict:
    """One transfer made by a process of its own, as a CLI command makes it."""
    args = [sys.executable, str(SPENDER), url, wallet.seed.hex(), to, str(cents)]
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return {**json.loads(done.stdout), "stderr": done.stderr}


def test_a_new_ledger_object_appends_from_the_snapshot(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    alice = _honest_log(ledger, log_key, transfers=30)
    assert ledger.snapshot_size == ledger.size == 32
    with Ledger.open(store_url, funds_rules(), log_key) as second:
        second.append(alice, TRANSFER, {"to": "0" * 32, "cents": 5})
        assert second.replayed == 0
        assert second.state().balance(alice.id) == 10_000 - 35
    # The first object folds only the entry the second one appended.
    ledger.append(alice, TRANSFER, {"to": "0" * 32, "cents": 1})
    assert ledger.replayed == 1 and ledger.snapshot_size == 34


def test_a_fresh_process_appends_from_the_snapshot_and_keeps_the_rules(
    store_url: str, ledger: Ledger, log_key: Wallet
) -> None:
    alice = _funded(ledger, log_key, 100)
    ledger.append_many([(log_key, MINT, {"to": Wallet.generate().id, "cents": 1, "memo": str(i)}) for i in range(40)])
    bob = Wallet.generate()
    assert _spend(store_url, alice, bob.id, 60) == {"pulse": 43, "replayed": 0, "stderr": ""}
    # Another process, after the first one's transfer: 40 cents are left, whatever it was told before.
    refused = _spend(store_url, alice, bob.id, 50)
    assert refused["replayed"] == 0 and "overdraft" in refused["refused"] and "holds 40 cents" in refused["refused"]
    assert _spend(store_url, alice, bob.id, 40)["pulse"] == 44
    assert ledger.state().balances[alice.id] == 0 and ledger.replayed == 2


def test_a_large_state_is_snapshotted_every_so_many_entries(store_url: str, log_key: Wallet) -> None:
    rules = funds_rules()

    def note(state: State, entry: Entry) -> None:
        state.ns("notes")[entry.claim_id] = entry.body["text"]

    rules.register("test.note/v1", note)
    writer = Wallet.generate()
    with Ledger.open(store_url, rules, log_key) as first:
        notes = 0
        while first.size - first.snapshot_size < 2:  # a few notes of 1 kB and the snapshot lags
            first.append(writer, "test.note/v1", {"text": f"{notes} " + "x" * 1000})
            notes += 1
            assert notes < 100
        size, taken = first.size, first.snapshot_size
    # Rewriting a snapshot this large after each entry would cost more than replaying a few.
    assert size - taken < len(_stored_snapshot(store_url).state) // SNAPSHOT_BYTES_PER_ENTRY
    with Ledger.open(store_url, rules, log_key) as second:
        assert len(second.state().ns("notes")) == notes
        assert second.replayed == size - taken
        while second.snapshot_size == taken:
            second.append(writer, "test.note/v1", {"text": f"more {second.size}"})
        assert second.replayed == size - taken
    with Ledger.open(store_url, rules, log_key) as third:
        lag = third.size - third.snapshot_size
        third.append(writer, "test.note/v1", {"text": "last"})
        assert third.replayed == lag


def test_a_snapshot_with_a_changed_state_is_not_trusted(
    store_url: str, ledger: Ledger, log_key: Wallet, caplog
) -> None:
    alice = _funded(ledger, log_key, 100)
    bob = Wallet.generate()
    ledger.append(alice, TRANSFER, {"to": bob.id, "cents": 60})
    stored = _stored_snapshot(store_url)
    lie = stored.state.replace(b'"%s":40' % alice.id.encode(), b'"%s":40000' % alice.id.encode())
    assert lie != stored.state
    tamper(store_url, "UPDATE ledger_snapshot SET state = ?", [lie])

    with caplog.at_level(logging.WARNING, logger="ledger"), Ledger.open(store_url, funds_rules(), log_key) as fresh:
        with pytest.raises(RuleViolation, match="holds 40 cents"):
            fresh.append(alice, TRANSFER, {"to": bob.id, "cents": 500})
        assert fresh.replayed == 3  # the whole log, not the snapshot's word
    assert "does not use its stored snapshot (of 3 entries): its contents do not match its digest" in caplog.text
    assert _problem(store_url) == (
        None,
        "the store's snapshot of the first 3 entries disagrees with the replay: its contents do not match its digest "
        "(appends ignore it and replay the whole log); the store is corrupt",
    )
    refused = _spend(store_url, alice, bob.id, 500)
    assert refused["replayed"] == 3 and "holds 40 cents" in refused["refused"]
    assert "does not use its stored snapshot" in refused["stderr"]
    # The next append that commits writes a good snapshot again.
    with Ledger.open(store_url, funds_rules(), log_key) as fresh:
        fresh.append(alice, TRANSFER, {"to": bob.id, "cents": 40})
    assert _spend(store_url, alice, bob.id, 1)["replayed"] == 0
    with Ledger.open(store_url, funds_rules(), None, check=False) as auditor:
        report = auditor.verify()
    assert report.ok and report.snapshot == 4


def test_a_snapshot_of_another_log_is_not_trusted(
    store_url: str, ledger: Ledger, log_key: Wallet, tmp_path, caplog
) -> None:
    alice = _honest_log(ledger, log_key, transfers=3)
    other_key = Wallet.generate()
    with Ledger.open(f"sqlite:///{tmp_path / 'other.db'}", funds_rules(), other_key) as other:
        _honest_log(other, other_key, transfers=3)
    _put_snapshot(store_url, _stored_snapshot(f"sqlite:///{tmp_path / 'other.db'}"))
    with caplog.at_level(logging.WARNING, logger="ledger"), Ledger.open(store_url, funds_rules(), log_key) as fresh:
        assert fresh.state().balances == ledger.state().balances
        assert fresh.replayed == 5
        fresh.append(alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": "a"})
    assert "Pulse 5 on the log is not the entry it was folded up to" in caplog.text
    tamper(store_url, "UPDATE ledger_snapshot SET size = 9")
    with caplog.at_level(logging.WARNING, logger="ledger"), Ledger.open(store_url, funds_rules(), log_key) as fresh:
        fresh.append(alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": "b"})
        assert fresh.replayed == 6
    assert "does not use its stored snapshot (of 9 entries): its contents do not match its digest" in caplog.text


def test_verify_names_a_forged_snapshot(store_url: str, ledger: Ledger, log_key: Wallet, tmp_path) -> None:
    alice = _honest_log(ledger, log_key, transfers=3)
    _put_snapshot(store_url, _with_balance(store_url, alice, 10**6))
    assert _problem(store_url) == (
        None,
        "the store's snapshot of the first 5 entries disagrees with the replay: its balances field differs from the replay's; "
        "the store is corrupt",
    )
    other_key = Wallet.generate()
    with Ledger.open(f"sqlite:///{tmp_path / 'other.db'}", funds_rules(), other_key) as other:
        _honest_log(other, other_key, transfers=3)
    _put_snapshot(store_url, _stored_snapshot(f"sqlite:///{tmp_path / 'other.db'}"))
    pulse, reason = _problem(store_url)
    assert pulse is None and "its tree or running digest is not the log's at that size" in reason
    tamper(store_url, "DELETE FROM ledger_snapshot")
    with Ledger.open(store_url, funds_rules(), None, check=False) as auditor:
        report = auditor.verify()
    assert report.ok and report.snapshot is None


def test_an_older_snapshot_is_caught_up_from(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key)
    older = _stored_snapshot(store_url)
    ledger.append_many([(alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": str(i)}) for i in range(7)])
    _put_snapshot(store_url, older)
    with Ledger.open(store_url, funds_rules(), log_key) as fresh:
        assert fresh.state().balance(alice.id) == 10_000 - 7
        assert fresh.replayed == 7
    with Ledger.open(store_url, funds_rules(), None, check=False) as auditor:
        assert auditor.verify().snapshot == 2


def test_a_snapshot_of_other_rules_is_not_used(store_url: str, ledger: Ledger, log_key: Wallet, caplog) -> None:
    alice = _honest_log(ledger, log_key, transfers=3)
    rules = funds_rules()
    rules.register("test.note/v1", lambda state, entry: None)
    with caplog.at_level(logging.WARNING, logger="ledger"), Ledger.open(store_url, rules, log_key) as other:
        other.append(alice, TRANSFER, {"to": "0" * 32, "cents": 1})
        assert other.replayed == 5
    assert "folded by another rule set" in caplog.text
    # verify leaves a snapshot of other rules alone: no ledger with its own rules would use it.
    with Ledger.open(store_url, funds_rules(), None, check=False) as auditor:
        report = auditor.verify()
    assert report.ok and report.snapshot is None


def test_a_ledger_from_before_snapshots_opens_and_gets_one(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    alice = _honest_log(ledger, log_key, transfers=3)
    tamper(store_url, "DROP TABLE ledger_snapshot")
    with Ledger.open(store_url, funds_rules(), log_key) as old:
        assert old.snapshot_size == 0
        assert old.state().balance(alice.id) == 10_000 - 3 and old.replayed == 5
        old.append(alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": "old"})
        assert old.snapshot_size == 6
    with Ledger.open(store_url, funds_rules(), log_key) as new:
        new.append(alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": "new"})
        assert new.replayed == 0
        assert new.verify().snapshot == 7


def test_rules_may_keep_only_json_in_the_state(store_url: str, log_key: Wallet) -> None:
    rules = funds_rules()
    rules.register("test.tags/v1", lambda state, entry: state.ns("tags").setdefault("all", set()).add(entry.claim_id))
    with Ledger.open(store_url, rules, log_key) as ledger:
        with pytest.raises(LedgerError, match="a rule kept data that is not JSON in the ledger's state"):
            ledger.append(Wallet.generate(), "test.tags/v1", {})
        assert ledger.size == 0


def test_a_refused_append_leaves_the_fold_as_it_was(ledger: Ledger, log_key: Wallet) -> None:
    alice = _funded(ledger, log_key, 100)
    bob = Wallet.generate()
    batch = [(alice, TRANSFER, {"to": bob.id, "cents": 60, "memo": str(i)}) for i in range(2)]
    with pytest.raises(RuleViolation, match="entry 2 of 2"):
        ledger.append_many(batch)  # the first transfer was folded before the second was refused
    assert ledger.state().balances == {alice.id: 100}
    ledger.append(alice, TRANSFER, {"to": bob.id, "cents": 100})
    assert ledger.state().balances == {alice.id: 0, bob.id: 100}


# Real processes: appenders at once, and one killed mid-append.


def _start(url: str, wallet: Wallet, to: str, count: int, batch: int, tag: str) -> subprocess.Popen:
    args = [sys.executable, str(APPENDER), url, wallet.seed.hex(), to, str(count), str(batch), tag]
    return subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _run_together(procs: list[subprocess.Popen]) -> list[list[str]]:
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    outputs = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err
        outputs.append(out.splitlines())
    return outputs


@pytest.mark.slow
def test_concurrent_appenders_never_fork_or_lose_an_entry(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    senders = [Wallet.generate() for _ in range(3)]
    sink = Wallet.generate()
    ledger.append_many([(log_key, MINT, {"to": w.id, "cents": 1000}) for w in senders])
    # Two appenders one entry at a time, one in batches of ten: the most interleaving.
    procs = [
        _start(store_url, w, sink.id, 1000, batch, f"p{i}")
        for i, (w, batch) in enumerate(zip(senders, (1, 1, 10), strict=False))
    ]
    outputs = _run_together(procs)

    claims = [line.split()[1] for out in outputs for line in out]
    assert all(line.startswith("ok ") for out in outputs for line in out)
    assert len(claims) == 3000
    with Ledger.open(store_url, funds_rules(), log_key) as after:
        entries = list(after.entries())
        assert [e.pulse for e in entries] == list(range(1, 3005))
        on_log = Counter(e.claim_id for e in entries)
        assert all(on_log[c] == 1 for c in claims) and max(on_log.values()) == 1
        assert after.state().balances == {**{w.id: 0 for w in senders}, sink.id: 3000}
        assert after.verify(jobs=2).ok


@pytest.mark.slow
def test_concurrent_spenders_of_one_wallet_never_overdraw(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
    shared, sink = Wallet.generate(), Wallet.generate()
    ledger.append(log_key, MINT, {"to": shared.id, "cents": 150})
    outputs = _run_together([_start(store_url, shared, sink.id, 100, 1, f"p{i}") for i in range(2)])
    lines = [line for out in outputs for line in out]
    assert sum(line.startswith("ok ") for line in lines) == 150
    assert sum("overdraft" in line for line in lines) == 50
    with Ledger.open(store_url, funds_rules(), log_key) as after:
        assert after.state().balances == {shared.id: 0, sink.id: 150}
        assert after.verify().ok


@pytest.mark.slow
def test_a_process_killed_mid_append_leaves_a_log_that_verifies(
    store_url: str, ledger: Ledger, log_key: Wallet
) -> None:
    sender, sink = Wallet.generate(), Wallet.generate()
    ledger.append(log_key, MINT, {"to": sender.id, "cents": 10**9})
    proc = _start(store_url, sender, sink.id, 0, 0, "crash")
    proc.stdin.write("go\n")
    proc.stdin.flush()
    committed = 0
    for line in proc.stdout:
        committed = int(line.split()[1])
        if committed >= 2 + 5 * 200:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    with Ledger.open(store_url, funds_rules(), log_key) as after:  # the start-up check passes
        size = after.size
        assert size >= committed and (size - 2) % 200 == 0  # whole batches only
        report = after.verify()
        assert report.ok and report.size == size
        after.append(sender, "funds.transfer/v1", {"to": sink.id, "cents": 1, "memo": "after the crash"})


def test_a_sqlite_ledger_never_loads_the_postgresql_driver(tmp_path) -> None:
    script = f"""
import sys
from ledger import MINT, Ledger, RuleSet, Wallet, register_funds
rules = RuleSet()
register_funds(rules)
key = Wallet.generate()
with Ledger.open("sqlite:///{tmp_path / "l.db"}", rules, key) as ledger:
    ledger.append(key, MINT, {{"to": key.id, "cents": 1}})
    assert ledger.verify().ok
print(sorted(m for m in sys.modules if m.split(".")[0] in ("psycopg", "ledger")))
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.replace("'", '"'))
    assert "ledger.sqlite" in loaded and "ledger.postgres" not in loaded and "psycopg" not in loaded
