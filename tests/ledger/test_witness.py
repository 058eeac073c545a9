"""Witnesses cosign checkpoints in the C2SP tlog-cosignature format, only after checking
that the log grew by appends; two checkpoints that conflict make a fork proof anyone
holding the log's key can check."""

from __future__ import annotations

import base64
import hashlib
import json
import sqlite3
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger import (
    MINT,
    CheckpointError,
    Forked,
    ForkProof,
    Ledger,
    LedgerError,
    ProofError,
    Wallet,
    Witness,
    WitnessError,
    Witnessing,
    claimed_cosignatures,
    parse_checkpoint,
    parse_witness_vkey,
)
from ledger.keys import signature_holds
from tests.ledger.ledgerkit import funds_rules


@pytest.fixture
def ledger(tmp_path: Path, log_key: Wallet) -> Iterator[Ledger]:
    with Ledger.open(f"sqlite:///{tmp_path / 'log.db'}", funds_rules(), log_key) as opened:
        yield opened


def _grow(ledger: Ledger, key: Wallet, n: int, tag: str = "") -> str:
    ledger.append_many([(key, MINT, {"to": "0" * 32, "cents": 1, "memo": f"{tag}{i}"}) for i in range(n)])
    return ledger.checkpoint()


def test_a_witness_cosigns_a_growing_log_in_the_c2sp_format(tmp_path: Path, ledger: Ledger, log_key: Wallet) -> None:
    witness = Witness.create(tmp_path / "w", "witness.example/w1", None)
    first = _grow(ledger, log_key, 3)
    cosigned = witness.cosign(first, log_key=log_key.public_key, now=1_700_000_000)
    # The line, checked from the spec rather than through the ledger's own reader.
    text, _, lines = cosigned.rpartition("\n\n")
    name, blob = lines.splitlines()[-1].removeprefix("\u2014 ").split(" ")
    blob = base64.b64decode(blob)
    assert name == "witness.example/w1" and len(blob) == 4 + 8 + 64
    assert blob[:4] == hashlib.sha256(b"witness.example/w1\n\x04" + witness.key.public_key).digest()[:4]
    assert struct.unpack(">Q", blob[4:12]) == (1_700_000_000,)
    message = f"cosignature/v1\ntime 1700000000\n{text}\n".encode()
    assert signature_holds(witness.key.public_key, blob[12:], message)
    assert parse_witness_vkey(witness.vkey) == ("witness.example/w1", witness.key.public_key)
    assert [c.name for c in claimed_cosignatures(cosigned)] == ["witness.example/w1"]

    second = _grow(ledger, log_key, 300, "b")
    with pytest.raises(WitnessError, match="needs a consistency proof from size 4 to size 304"):
        witness.cosign(second)
    with pytest.raises(WitnessError, match="runs from size 2 to 304"):
        witness.cosign(second, ledger.consistency_proof(2, 304))
    assert witness.cosign(second, ledger.consistency_proof(4)) != second
    with pytest.raises(
        WitnessError, match=r"older than the last this witness cosigned .* a witness only moves forward"
    ):
        witness.cosign(first)
    with pytest.raises(WitnessError, match="not the one this witness has held"):
        witness.cosign(second, log_key=Wallet.generate().public_key)
    # What the witness saw survives it; a witness knows a log only by the key it was given.
    again = Witness.open(tmp_path / "w", None)
    assert [(s.origin, s.checkpoint.size) for s in again.logs()] == [(ledger.origin, 304)]
    with pytest.raises(CheckpointError, match="no valid signature"):
        Witness.create(tmp_path / "w2", None, None).cosign(first, log_key=Wallet.generate().public_key)


def _forked(tmp_path: Path, ledger: Ledger, log_key: Wallet) -> tuple[Ledger, str, str]:
    """A second copy of the log's store, grown apart from the first: a fork."""
    _grow(ledger, log_key, 5)
    with sqlite3.connect(tmp_path / "log.db") as source, sqlite3.connect(tmp_path / "fork.db") as copy:
        source.backup(copy)
    fork = Ledger.open(f"sqlite:///{tmp_path / 'fork.db'}", funds_rules(), log_key)
    return fork, _grow(ledger, log_key, 4, "honest"), _grow(fork, log_key, 6, "fork")


def test_a_witness_refuses_a_checkpoint_that_contradicts_the_last_with_a_fork_proof(
    tmp_path: Path, ledger: Ledger, log_key: Wallet
) -> None:
    fork, honest, forked = _forked(tmp_path, ledger, log_key)
    witness = Witness.create(tmp_path / "w", None, None)
    witness.cosign(honest, log_key=log_key.public_key)
    with pytest.raises(
        Forked, match="does not extend the one of size 10 this witness cosigned: the log forked"
    ) as refused:
        witness.cosign(forked, fork.consistency_proof(10))
    a, b = refused.value.proof.check(log_key.public_key)
    assert (a.size, b.size) == (10, 12)
    assert ForkProof.from_json(json.loads(json.dumps(refused.value.proof.to_json()))).check(log_key.public_key) == (
        a,
        b,
    )
    assert witness.seen(ledger.origin).note.startswith(honest)  # it did not move on
    fork.close()


def test_fork_proofs_are_made_from_the_larger_tree_and_checked_offline(
    tmp_path: Path, ledger: Ledger, log_key: Wallet
) -> None:
    fork, honest, forked = _forked(tmp_path, ledger, log_key)
    earlier = parse_checkpoint(honest).size
    assert ledger.fork_proof(ledger.checkpoints()[0], honest) is None  # consistent: no fork
    with pytest.raises(LedgerError, match="the checkpoint's: a fork proof comes from the ledger that holds"):
        ledger.fork_proof(honest, forked)
    proof = fork.fork_proof(honest, forked)
    assert proof is not None and (parse_checkpoint(proof.first).size, parse_checkpoint(proof.second).size) == (
        earlier,
        12,
    )
    proof.check(log_key.public_key)
    with pytest.raises(CheckpointError):
        proof.check(Wallet.generate().public_key)
    bent = ForkProof(proof.first, proof.second, proof.prefix, [bytes(32), *proof.path[1:]])
    with pytest.raises(ProofError):
        bent.check(log_key.public_key)
    honest_prefix = ForkProof(proof.first, proof.second, parse_checkpoint(proof.first).root, proof.path)
    with pytest.raises(ProofError):
        honest_prefix.check(log_key.public_key)
    # Two checkpoints of one size with two roots need nothing more.
    _grow(ledger, log_key, 2, "same")
    same = fork.fork_proof(ledger.checkpoint(), fork.checkpoint())
    assert same is not None and same.path == [] and same.check(log_key.public_key)[0].size == 12
    fork.close()


def test_verify_counts_the_cosignatures_of_the_witnesses_it_is_given(
    tmp_path: Path, ledger: Ledger, log_key: Wallet
) -> None:
    witnesses = [Witness.create(tmp_path / f"w{i}", f"witness.example/w{i}", None) for i in range(3)]
    note = _grow(ledger, log_key, 3)
    for w in witnesses[:2]:
        ledger.add_cosignatures(w.cosign(note, log_key=log_key.public_key))
    _grow(ledger, log_key, 2, "later")
    keys = [parse_witness_vkey(w.vkey) for w in witnesses]
    report = ledger.verify(witnesses=Witnessing(keys, 2))
    assert report.ok and (report.witnessed, report.cosigners) == (4, ["witness.example/w0", "witness.example/w1"])
    report = ledger.verify(witnesses=Witnessing(keys, 3))
    assert not report.ok and "no checkpoint of the log carries 3 valid cosignatures of the 3 witnesses given" in str(
        report.problem
    )
    assert "the most: 2, on the checkpoint at size 4" in str(report.problem)
    # A line under a witness's name that its key did not sign does not count.
    forged = ledger.checkpoints()[-1] + f"\u2014 witness.example/w2 {base64.b64encode(bytes(76)).decode()}\n"
    ledger.add_cosignatures(forged)
    assert not ledger.verify(witnesses=Witnessing(keys, 3)).ok


def test_one_witness_key_trusted_under_two_names_is_refused(tmp_path: Path) -> None:
    witness = Witness.create(tmp_path / "w", "witness.example/w", None)
    name, key = parse_witness_vkey(witness.vkey)
    with pytest.raises(
        CheckpointError, match=r"the witnesses witness.example/w and witness.example/again have one key"
    ):
        Witnessing([(name, key), ("witness.example/again", key)], 2)
