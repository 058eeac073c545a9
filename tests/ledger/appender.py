"""A separate process that appends to a ledger, for the concurrency and crash tests.

    python appender.py URL SEED_HEX TO_ID COUNT BATCH TAG

Waits for a line on stdin (so several start at once), then appends COUNT transfers of
one cent from the wallet with SEED_HEX to TO_ID, BATCH per transaction, printing one
line per attempt: `ok CLAIM PULSE` or `refused REASON`. BATCH 0 loops forever on
batches of 200 (the crash test kills it).
"""

from __future__ import annotations

import sys

from ledger import TRANSFER, Ledger, RuleSet, RuleViolation, Wallet, register_funds


def main(url: str, seed: str, to: str, count: int, batch: int, tag: str) -> None:
    rules = RuleSet()
    register_funds(rules)
    wallet = Wallet.from_seed(bytes.fromhex(seed))
    sys.stdin.readline()
    with Ledger.open(url, rules) as ledger:
        if batch == 0:
            forever(ledger, wallet, to, tag)
        for start in range(0, count, batch):
            items = [
                (wallet, TRANSFER, {"to": to, "cents": 1, "memo": f"{tag} {i}"}) for i in range(start, start + batch)
            ]
            try:
                for entry in ledger.append_many(items):
                    print(f"ok {entry.claim_id} {entry.pulse}", flush=True)
            except RuleViolation as exc:
                print(f"refused {exc}", flush=True)


def forever(ledger: Ledger, wallet: Wallet, to: str, tag: str) -> None:
    n = 0
    while True:
        items = [(wallet, TRANSFER, {"to": to, "cents": 1, "memo": f"{tag} {n + i}"}) for i in range(200)]
        n += 200
        ledger.append_many(items)
        print(f"committed {ledger.size}", flush=True)


if __name__ == "__main__":
    url, seed, to, count, batch, tag = sys.argv[1:]
    main(url, seed, to, int(count), int(batch), tag)
