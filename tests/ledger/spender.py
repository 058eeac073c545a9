"""One transfer from a process of its own, as each CLI command makes its append.

    python spender.py URL SEED_HEX TO_ID CENTS

Opens the ledger (start-up check included), appends one transfer of CENTS from the
wallet with SEED_HEX to TO_ID, and prints one JSON line: {"pulse": N} or {"refused":
REASON}, with "replayed", the entries the new Ledger object folded from the store.
"""

from __future__ import annotations

import json
import sys

from ledger import TRANSFER, Ledger, RuleSet, RuleViolation, Wallet, register_funds


def main(url: str, seed: str, to: str, cents: int) -> None:
    rules = RuleSet()
    register_funds(rules)
    wallet = Wallet.from_seed(bytes.fromhex(seed))
    with Ledger.open(url, rules) as ledger:
        try:
            outcome: dict[str, object] = {"pulse": ledger.append(wallet, TRANSFER, {"to": to, "cents": cents}).pulse}
        except RuleViolation as exc:
            outcome = {"refused": str(exc)}
        print(json.dumps({**outcome, "replayed": ledger.replayed}), flush=True)


if __name__ == "__main__":
    url, seed, to, cents = sys.argv[1:]
    main(url, seed, to, int(cents))
