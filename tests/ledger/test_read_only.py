"""A ledger opened read-only: an auditor's SQLite copy on a read-only disk is read and
verified, and on either backend nothing is written or created."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ledger import MINT, Ledger, LedgerError, Wallet, open_store
from tests.ledger.ledgerkit import footprint, funds_rules, tables
from tests.mounts import read_only_view


def _log(folder: Path) -> tuple[str, Wallet]:
    folder.mkdir()
    key = Wallet.generate("log")
    with Ledger.open(f"sqlite:///{folder / 'ledger.db'}", funds_rules(), key) as ledger:
        ledger.append(key, MINT, {"to": key.id, "cents": 250})
        ledger.checkpoint()
    return key.id, key


def test_a_copy_on_a_read_only_disk_is_read_and_verified(tmp_path: Path) -> None:
    authority, key = _log(tmp_path / "log")
    with read_only_view(tmp_path / "log") as view:
        ledger = Ledger(open_store(f"sqlite:///{view / 'ledger.db'}", read_only=True), funds_rules(), key)
        try:
            assert ledger.size == 2 and ledger.state().balance(authority) == 250
            assert ledger.verify().ok and len(ledger.checkpoints()) == 1
            assert ledger.checkpoint() == ledger.checkpoints()[0]  # already signed: nothing to write
            with pytest.raises(LedgerError, match="read-only here"):
                ledger.append(key, MINT, {"to": authority, "cents": 1})
        finally:
            ledger.close()
        assert sorted(os.listdir(view)) == ["ledger.db"]
    fresh = Ledger.open(f"sqlite:///{tmp_path / 'log' / 'ledger.db'}", funds_rules(), key)
    assert fresh.size == 2 and fresh.verify().ok
    fresh.close()


def test_read_only_on_a_writable_disk_still_writes_nothing(tmp_path: Path) -> None:
    authority, key = _log(tmp_path / "log")
    ledger = Ledger(open_store(f"sqlite:///{tmp_path / 'log' / 'ledger.db'}", read_only=True), funds_rules(), key)
    try:
        with pytest.raises(LedgerError, match="read-only here"):
            ledger.append(key, MINT, {"to": authority, "cents": 1})
        assert ledger.size == 2
    finally:
        ledger.close()


def test_a_missing_file_is_not_created(tmp_path: Path) -> None:
    with pytest.raises(LedgerError, match="no ledger at"):
        open_store(f"sqlite:///{tmp_path / 'ledger.db'}", read_only=True)
    assert not list(tmp_path.iterdir())


def test_a_store_opened_read_only_writes_nothing_on_either_backend(store_url: str, log_key: Wallet) -> None:
    with Ledger.open(store_url, funds_rules(), log_key) as writer:
        writer.append(log_key, MINT, {"to": log_key.id, "cents": 250})
    before = footprint(store_url), tables(store_url)
    ledger = Ledger(open_store(store_url, read_only=True), funds_rules(), log_key)
    try:
        assert ledger.size == 2 and ledger.verify().ok
        with pytest.raises(LedgerError, match=r"read-only here .*: this command needs to write to it"):
            ledger.append(log_key, MINT, {"to": log_key.id, "cents": 1})
    finally:
        ledger.close()
    assert (footprint(store_url), tables(store_url)) == before


def test_an_empty_store_opened_read_only_is_no_ledger_and_stays_empty(store_url: str) -> None:
    with pytest.raises(LedgerError, match="no ledger at"):
        open_store(store_url, read_only=True)
    if store_url.startswith("sqlite:///"):
        assert not Path(store_url.removeprefix("sqlite:///")).exists()
    else:
        assert tables(store_url) == set()
