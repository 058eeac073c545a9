"""The fixtures the ledger's tests share: a store of each backend, and a log key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ledger import Wallet
from tests.ledger.ledgerkit import temporary_store


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    with temporary_store(request.param, tmp_path) as url:
        yield url


@pytest.fixture
def log_key() -> Wallet:
    return Wallet.generate("log")
