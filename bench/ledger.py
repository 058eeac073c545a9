"""How fast the ledger appends and verifies, beside the raw Ed25519 rates it is bound by.

Prints, in one run:
1. `append_many` throughput on SQLite (batches of 1,000 transfers, until the ledger
   holds --entries entries), beside the raw Ed25519 sign rate (`cryptography`, one call
   per message of the size an entry's signature covers, ten keys), measured in rounds
   between the batches: the median round;
2. full `verify` throughput on that ledger with 1 and with 2 jobs, beside the raw
   verify rate measured just before and after each (the median round);
3. single-entry `append` throughput (each its own transaction, synchronous=FULL).

Goals: batched append >= 50% of the raw sign rate; verify >= 80% of the raw verify rate
x jobs. Other processes on the machine lower every figure, the raw ones included, so
compare the ratios, and rerun on a quiet machine.

    python bench/ledger.py                  # 100,000 entries, about a minute
    python bench/ledger.py --entries 20000  # a quicker look
"""

from __future__ import annotations

import argparse
import base64
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from ledger import MINT, TRANSFER, Entry, Ledger, RuleSet, Wallet, register_funds  # noqa: E402
from ledger.entry import PAYLOAD_TYPE, pae  # noqa: E402

BATCH = 1000
SINGLES = 500


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--entries", type=int, default=100_000, help="size of the ledger to build and verify")
    args = parser.parse_args()

    wallets = [Wallet.generate(f"w{i}") for i in range(10)]
    raw = Raw(wallets)
    print(f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; signed message: {raw.size} bytes")
    with tempfile.TemporaryDirectory() as tmp:
        rules = RuleSet()
        register_funds(rules)
        key = Wallet.generate("log")
        with Ledger.open(f"sqlite:///{Path(tmp) / 'bench.db'}", rules, key) as ledger:
            ledger.append_many([(key, MINT, {"to": w.id, "cents": 10**12}) for w in wallets])
            rate = append_many_rate(ledger, wallets, args.entries - ledger.size, raw)
            print(f"raw Ed25519 sign:   {raw.sign_rate():9,.0f} /s")
            _line("append_many (batches of 1,000)", rate, raw.sign_rate(), 0.5, "raw sign")
            for jobs in (1, 2):
                raw.measure_verify()
                rate = verify_rate_of(ledger, jobs)
                raw.measure_verify()
                if jobs == 1:
                    print(f"raw Ed25519 verify: {raw.verify_rate():9,.0f} /s")
                label = f"verify, {jobs} job{'s' if jobs > 1 else ''} ({ledger.size:,} entries)"
                _line(label, rate, raw.verify_rate() * jobs, 0.8, f"raw verify x {jobs}")
                if jobs > 1:
                    together = raw.verify_rate_in(jobs)
                    print(f"  (raw verify in {jobs} processes at once, on this machine now: {together:,.0f} /s; "
                          f"verify reached {rate / together:.1%} of that)")
            print(f"append (one entry per transaction): {append_rate(ledger, wallets):9,.0f} /s")


class Raw:
    """Bare `cryptography` calls on messages of the ledger's size, measured in rounds
    between the ledger's own work so both see the same load on the machine."""

    def __init__(self, wallets: list[Wallet]) -> None:
        messages = [_message(wallets, i) for i in range(1000)]
        self.size = len(messages[0])
        keys = [Ed25519PrivateKey.from_private_bytes(w.seed) for w in wallets]
        self._to_sign = [(keys[i % 10], m) for i, m in enumerate(messages)]
        self._to_verify = [(k.public_key(), k.sign(m), m) for k, m in self._to_sign]
        self._sign: list[float] = []
        self._verify: list[float] = []

    def measure_sign(self) -> None:
        start = time.perf_counter()
        for key, message in self._to_sign:
            key.sign(message)
        self._sign.append(len(self._to_sign) / (time.perf_counter() - start))

    def measure_verify(self) -> None:
        for _ in range(3):
            start = time.perf_counter()
            for public, signature, message in self._to_verify:
                public.verify(signature, message)
            self._verify.append(len(self._to_verify) / (time.perf_counter() - start))

    def verify_rate_in(self, processes: int) -> float:
        """The raw verify rate of `processes` processes at once: what the machine can give now."""
        _FORKED[:] = self._to_verify  # keys do not pickle; forked workers inherit them
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            start = time.perf_counter()
            done = sum(pool.map(_verify_forked, range(processes * 5)))
            return done / (time.perf_counter() - start)

    def sign_rate(self) -> float:
        return statistics.median(self._sign)

    def verify_rate(self) -> float:
        return statistics.median(self._verify)


_FORKED: list = []


def _verify_forked(_: int) -> int:
    for public, signature, message in _FORKED:
        public.verify(signature, message)
    return len(_FORKED)


def _message(wallets: list[Wallet], i: int) -> bytes:
    """What the ledger signs for a typical transfer: the PAE of its payload."""
    entry = Entry.create(wallets[i % 10], TRANSFER, {"to": wallets[(i + 1) % 10].id, "cents": 1, "memo": f"bench {i}"})
    payload = base64.b64decode(json.loads(entry.raw)["payload"])
    return pae(PAYLOAD_TYPE.encode(), payload)


def append_many_rate(ledger: Ledger, wallets: list[Wallet], count: int, raw: Raw) -> float:
    done, elapsed = 0, 0.0
    while done < count:
        n = min(BATCH, count - done)
        items = [(wallets[i % 10], TRANSFER, {"to": wallets[(i + 1) % 10].id, "cents": 1, "memo": f"many {done + i}"}) for i in range(n)]
        raw.measure_sign()
        start = time.perf_counter()
        ledger.append_many(items)  # signing is part of append_many, so it is timed
        elapsed += time.perf_counter() - start
        done += n
        if done % 20_000 == 0:
            print(f"  appended {done:,}", file=sys.stderr)
    return count / elapsed


def append_rate(ledger: Ledger, wallets: list[Wallet]) -> float:
    start = time.perf_counter()
    for i in range(SINGLES):
        ledger.append(wallets[i % 10], TRANSFER, {"to": wallets[(i + 1) % 10].id, "cents": 1, "memo": f"single {i}"})
    return SINGLES / (time.perf_counter() - start)


def verify_rate_of(ledger: Ledger, jobs: int) -> float:
    start = time.perf_counter()
    report = ledger.verify(jobs=jobs)
    elapsed = time.perf_counter() - start
    if not report.ok:
        raise SystemExit(f"verify failed: {report.problem}")
    return report.size / elapsed


def _line(what: str, rate: float, limit: float, goal: float, limit_name: str) -> None:
    share = rate / limit
    verdict = "meets" if share >= goal else "MISSES"
    print(f"{what}: {rate:9,.0f} /s = {share:5.1%} of {limit_name} ({limit:,.0f} /s); goal {goal:.0%}: {verdict}")


if __name__ == "__main__":
    main()
