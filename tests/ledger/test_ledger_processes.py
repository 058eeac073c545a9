"""Real processes against one store: concurrent appenders and a SIGKILL mid-append."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from ledgerkit import funds_rules, ledger, log_key, store_url  # noqa: F401 (fixtures)

from ledger import MINT, Ledger, Wallet

APPENDER = Path(__file__).parent / "appender.py"


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
    procs = [_start(store_url, w, sink.id, 1000, batch, f"p{i}") for i, (w, batch) in enumerate(zip(senders, (1, 1, 10)))]
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
def test_a_process_killed_mid_append_leaves_a_log_that_verifies(store_url: str, ledger: Ledger, log_key: Wallet) -> None:
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
