"""What exporting a log and importing the copy cost as the log grows: time and memory,
beside the raw limits measured in the same run.

One SQLite ledger of transfers is grown to each size asked for (10,000 and 100,000
entries by default). At each size, each in a process of its own:

1. export: every entry written to a JSON-lines copy (`ledger.export`, as `agentd ledger
   export` does), entries a second beside reading the same rows from the store alone;
2. import: the copy rebuilt in a fresh ledger (`Ledger.import_entries`, as `agentd ledger
   import` does: every signature and rule checked), entries a second beside the raw
   Ed25519 verify rate of messages of an entry's size in the same process;
3. each one's peak memory above a process that only opened the ledger; goal: at most
   MEMORY_GOAL_MB at every size, however long the log (not the copy, held whole).

Nothing is kept: the ledgers and copies live in a temporary folder.

    python bench/copies.py                        # 10k and 100k: about a minute
    python bench/copies.py --sizes 10000,1000000  # a million: about five minutes more
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from ledger import MINT, TRANSFER, Ledger, RuleSet, Wallet, register_funds

BATCH = 1000
# Far below a copy's size (about 600 bytes an entry), which both held whole before: 232 MB
# to import 100,000 entries.
MEMORY_GOAL_MB = 16

# Run in a process of its own, the raw verify rate measured there just after the import
# (messages of the size an entry's signature covers). argv: ROOT WHAT SOURCE_URL COPY TARGET_URL
MEASURE = """
import json, resource, sys, time
from pathlib import Path
sys.path[:0] = [sys.argv[1]]
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from ledger import Ledger, RuleSet, open_store, read_copy, register_funds
from ledger.export import export_line, write_copy
from ledger.store import pages

def raw_verify_rate(message_bytes=313, calls=3000):
    key = Ed25519PrivateKey.generate()
    public, message = key.public_key(), bytes(message_bytes)
    signature = key.sign(message)
    start = time.perf_counter()
    for _ in range(calls):
        public.verify(signature, message)
    return calls / (time.perf_counter() - start)

rules = RuleSet()
register_funds(rules)
what, source, copy, target = sys.argv[2:6]
with Ledger.open(source, rules, None, check=False) as ledger:
    opened = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.perf_counter()
    if what == "export":
        count = write_copy(Path(copy), (export_line(e) for e in ledger.entries()))
    elif what == "rows":
        count = sum(1 for _ in pages(open_store(source, read_only=True)))
    else:
        with Ledger.open(target, rules, None) as fresh, open(copy) as lines:
            count = fresh.import_entries(read_copy(lines)).size
    seconds = time.perf_counter() - start
print(json.dumps({"count": count, "seconds": seconds, "opened_kb": opened,
                  "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                  "raw_verify": raw_verify_rate() if what == "import" else None}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="ledger sizes to measure at, comma-separated")
    sizes = sorted(int(s) for s in parser.parse_args().sizes.split(","))
    rules = RuleSet()
    register_funds(rules)
    key = Wallet.generate("log")
    wallets = [Wallet.generate(f"w{i}") for i in range(10)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        source = f"sqlite:///{Path(tmp) / 'source.db'}"
        with Ledger.open(source, rules, key) as ledger:
            ledger.append_many([(key, MINT, {"to": w.id, "cents": 10**12}) for w in wallets])
            for size in sizes:
                while ledger.size < size:
                    n, start = min(BATCH, size - ledger.size), ledger.size
                    ledger.append_many(
                        [
                            (
                                wallets[i % 10],
                                TRANSFER,
                                {"to": wallets[(i + 1) % 10].id, "cents": 1, "memo": f"m {start + i}"},
                            )
                            for i in range(n)
                        ]
                    )
                print(f"-- {ledger.size:,} entries built", file=sys.stderr)
                rows.append(measure(Path(tmp), source, ledger.size))
    report(rows)


def measure(tmp: Path, source: str, size: int) -> dict[str, Any]:
    copy = tmp / f"copy-{size}.jsonl"
    target = f"sqlite:///{tmp / f'copy-{size}.db'}"
    row = {"size": size}
    for what in ("rows", "export", "import"):
        row[what] = _run(what, source, copy, target)
    print(json.dumps(row), file=sys.stderr)
    return row


def _run(what: str, source: str, copy: Path, target: str) -> dict[str, Any]:
    argv = [sys.executable, "-c", MEASURE, str(ROOT), what, source, str(copy), target]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(f"bench: {what} failed: {done.stderr}")
    return json.loads(done.stdout)


def report(rows: list[dict[str, Any]]) -> None:
    print(f"{'entries':>10}  {'rows read alone':>16}  {'export':>24}  {'import':>36}")
    for r in rows:
        read, export, imported = r["rows"], r["export"], r["import"]
        rate = imported["count"] / imported["seconds"]
        print(
            f"{r['size']:>10,}  {read['count'] / read['seconds']:>14,.0f}/s  "
            f"{export['count'] / export['seconds']:>9,.0f}/s {_memory(export):>7.1f} MB  "
            f"{rate:>9,.0f}/s {rate / imported['raw_verify']:>4.0%} of raw verify {_memory(imported):>7.1f} MB"
        )
    for what in ("export", "import"):
        memory = [_memory(r[what]) for r in rows]
        sizes = ", ".join(f"{r['size']:,}" for r in rows)
        verdict = "meets" if max(memory) <= MEMORY_GOAL_MB else "MISSES"
        print(
            f"{what}: memory above an opened ledger {', '.join(f'{m:.1f}' for m in memory)} MB at {sizes} entries; "
            f"goal at most {MEMORY_GOAL_MB} MB at every size: {verdict}"
        )


def _memory(done: dict[str, Any]) -> float:
    return (done["peak_kb"] - done["opened_kb"]) / 1024


if __name__ == "__main__":
    main()
