"""The server's one writer: entries posted at once are recorded together, and a bad one
among them is refused alone, in the words it would have heard alone."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from agentd.app.ledger import open_ledger
from agentd.home import Home
from agentd.server.ledgers import Ledgers
from agentd.wallets import log_key
from ledger import MINT, TRANSFER, Entry, EntryError, RuleViolation, Wallet
from tests.homekit import run_in_process


def test_a_bad_entry_among_many_posted_at_once_is_refused_alone(tmp_path: Path) -> None:
    home = Home(tmp_path / "home")
    assert run_in_process(["--home", str(home.root), "init"]).code == 0
    wallets = [Wallet.generate() for _ in range(40)]
    with open_ledger(home) as ledger:
        ledger.append_many([(log_key(home), MINT, {"to": w.id, "cents": 10}) for w in wallets])
        origin = ledger.origin
    good = [
        Entry.create(w, TRANSFER, {"to": wallets[0].id if i else wallets[1].id, "cents": 5}, log=origin, seq=1).raw
        for i, w in enumerate(wallets[:-2])
    ]
    overdraft = Entry.create(wallets[-2], TRANSFER, {"to": wallets[0].id, "cents": 11}, log=origin, seq=1).raw
    garbage = b'{"payload": "x"}'
    answers: dict[bytes, object] = {}
    ledgers = Ledgers(home)
    start = threading.Barrier(len(good) + 2)

    def post(raw: bytes) -> None:
        start.wait()
        try:
            answers[raw] = ledgers.append(raw)
        except Exception as exc:
            answers[raw] = exc

    threads = [threading.Thread(target=post, args=(raw,)) for raw in [*good, overdraft, garbage]]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ledgers.close()
    assert all(isinstance(answers[raw], Entry) for raw in good)
    assert len({answers[raw].pulse for raw in good}) == len(good)  # type: ignore[union-attr]
    refused = answers[overdraft]
    assert isinstance(refused, RuleViolation) and str(refused).startswith("overdraft")
    assert isinstance(answers[garbage], EntryError)
    with open_ledger(home) as ledger:
        assert ledger.verify().ok
        claims = {e.claim_id for e in ledger.entries(kind=TRANSFER)}
    assert claims == {Entry.parse(raw).claim_id for raw in good}
    again = Ledgers(home)
    try:
        with pytest.raises(RuleViolation):  # its sequence number was spent by the refusal
            again.append(overdraft)
    finally:
        again.close()
