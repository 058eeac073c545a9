"""How fast the ledger appends and verifies, beside the raw Ed25519 rates it is bound by.

Prints, in one run:
1. `append_many` throughput on SQLite (batches of 1,000 transfers, until the ledger
   holds --entries entries), beside the raw Ed25519 sign rate (`cryptography`, one call
   per message of the size an entry's signature covers, ten keys), measured in rounds
   between the batches: the median round;
2. full `verify` throughput on that ledger with 1 and with 2 jobs, beside the raw
   verify rate measured just before and after each (the median round);
3. single-entry `append` throughput (each its own transaction, synchronous=FULL) on a
   warm Ledger object;
4. a fresh Ledger object each time, as each CLI command opens one: the open, the
   start-up check (every leaf hash against the head) and one append, on that ledger
   with its snapshot and with the snapshot row deleted (a ledger from before snapshots,
   or one whose snapshot is not trusted: the whole log is replayed), the median of a
   few; and the same on a ledger of as many entries whose state grows with the log (a
   rule that keeps an item per entry, as agent.session/v1 does), with what reading and
   writing its snapshot costs beside folding an entry (ledger.log's
   SNAPSHOT_BYTES_PER_ENTRY rests on those figures).

Goals: batched append >= 50% of the raw sign rate; verify >= 80% of the raw verify rate
x jobs. Other processes on the machine lower every figure, the raw ones included, so
compare the ratios, and rerun on a quiet machine.

    python bench/ledger.py                  # 100,000 entries, two to three minutes
    python bench/ledger.py --entries 20000  # a quicker look
"""

from __future__ import annotations

import argparse
import base64
import json
import multiprocessing
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from ledger import MINT, TRANSFER, Entry, Ledger, Recorder, RuleSet, State, Wallet, open_store, register_funds  # noqa: E402
from ledger import snapshot as snapshots  # noqa: E402
from ledger.entry import PAYLOAD_TYPE, pae  # noqa: E402

BATCH = 1000
SINGLES = 500
FRESH = 5
NOTE = "bench.note/v1"

Item = tuple[Wallet, str, dict[str, Any]]


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
            single = 1 / append_rate(ledger, wallets)
            print(f"append (one entry per transaction): {1 / single:9,.0f} /s")
            url = ledger.url
        print(f"a fresh Ledger each time, on the ledger of {args.entries:,} transfers (median of {FRESH}):")
        transfer = (wallets[0], TRANSFER, {"to": wallets[1].id, "cents": 1})
        fresh_appends(url, rules, key, lambda i: _with_memo(transfer, f"fresh {i}"), single)
        grown(Path(tmp) / "notes.db", args.entries, wallets[0])


def grown(path: Path, entries: int, writer: Wallet) -> None:
    """Section 4 on a ledger whose state keeps an item per entry."""
    rules = RuleSet()
    rules.register(NOTE, _note)
    key = Wallet.generate("log")
    with Ledger.open(f"sqlite:///{path}", rules, key) as ledger:
        for start in range(0, entries, BATCH):
            ledger.append_many([(writer, NOTE, {"n": n}) for n in range(start, min(start + BATCH, entries))])
        single = 1 / append_rate(ledger, [writer], lambda i: (writer, NOTE, {"n": entries + i}))
        url, size = ledger.url, ledger.size
    print(f"a fresh Ledger each time, on a ledger of {size:,} entries whose state keeps one item each "
          f"(warm append: {single * 1e3:.1f} ms):")  # fmt: skip
    fold = fresh_appends(url, rules, key, lambda i: (writer, NOTE, {"n": size + SINGLES + i}), single)
    store = open_store(url)
    try:
        length, read, write = snapshot_costs(store, rules)
    finally:
        store.close()
    print(f"  its snapshot: {length / 1e6:.1f} MB, read and restored in {read * 1e3:.0f} ms, taken and written in "
          f"{write * 1e3:.0f} ms ({write / length * 1e9:.1f} ns a byte); folding an entry: {fold * 1e6:.1f} µs, "
          f"the cost of writing {fold / write * length:,.0f} bytes of snapshot")  # fmt: skip


def fresh_appends(url: str, rules: RuleSet, key: Wallet, item: Callable[[int], Item], single: float) -> float:
    """Prints the open, check and first append of new Ledger objects, with the store's
    snapshot and without it; returns the seconds a full replay took an entry."""
    path = url.removeprefix("sqlite:///")
    runs: dict[str, list[tuple[float, float, float, int]]] = {"with its snapshot": [], "snapshot row deleted": []}
    for i in range(FRESH):
        runs["with its snapshot"].append(fresh_append(url, rules, key, item(2 * i)))
        _drop_snapshot(path)
        runs["snapshot row deleted"].append(fresh_append(url, rules, key, item(2 * i + 1)))
    for label, figures in runs.items():
        opened, checked, appended = (statistics.median(f[j] for f in figures) for j in range(3))
        folded = sorted(f[3] for f in figures)
        print(f"  {label + ':':<22} open {opened * 1e3:5.1f} ms, start-up check {checked * 1e3:6.1f} ms, first append "
              f"{appended * 1e3:7.1f} ms, {opened + checked + appended:6.3f} s in all; entries folded from the store: "
              f"{', '.join(f'{n:,}' for n in folded)}")  # fmt: skip
    full = runs["snapshot row deleted"]
    return statistics.median((f[2] - single) / f[3] for f in full)


def fresh_append(url: str, rules: RuleSet, key: Wallet, item: Item) -> tuple[float, float, float, int]:
    """Seconds to open a new Ledger, run its start-up check and append one entry, and
    the entries it folded from the store to do so."""
    started = time.perf_counter()
    with Ledger.open(url, rules, key, check=False) as ledger:
        opened = time.perf_counter()
        ledger.check()
        checked = time.perf_counter()
        ledger.append(*item)
        appended = time.perf_counter()
        return opened - started, checked - opened, appended - checked, ledger.replayed


def snapshot_costs(store: Recorder, rules: RuleSet) -> tuple[int, float, float]:
    """The stored snapshot's length, the seconds to read and restore it, and the seconds
    to take it again and write it (in a transaction of its own, as an append would)."""
    started = time.perf_counter()
    stored = store.snapshot()
    if stored is None:
        raise SystemExit("bench: the ledger holds no snapshot after its appends")
    state, frontier = snapshots.restore(stored, rules.fingerprint)
    read = time.perf_counter() - started
    started = time.perf_counter()
    with store.transaction() as txn:
        txn.save_snapshot(snapshots.take(state, frontier, stored.chain, rules.fingerprint))
    return len(stored.state), read, time.perf_counter() - started


def _note(state: State, entry: Entry) -> None:
    state.ns("notes")[entry.claim_id[:32]] = {"pulse": entry.pulse, "n": entry.body["n"]}


def _drop_snapshot(path: str) -> None:
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("DELETE FROM ledger_snapshot")
    conn.close()


def _with_memo(item: Item, memo: str) -> Item:
    wallet, kind, body = item
    return wallet, kind, {**body, "memo": memo}


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


def append_rate(ledger: Ledger, wallets: list[Wallet], item: Callable[[int], Item] | None = None) -> float:
    start = time.perf_counter()
    for i in range(SINGLES):
        if item is None:
            ledger.append(wallets[i % 10], TRANSFER, {"to": wallets[(i + 1) % 10].id, "cents": 1, "memo": f"single {i}"})
        else:
            ledger.append(*item(i))
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
