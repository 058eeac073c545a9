"""How the ledger's costs grow with its size, beside the raw Ed25519 rates it is bound by.

One SQLite ledger of transfers is grown to each size asked for (10,000, 100,000 and
1,000,000 entries by default; 10,000,000 is the largest the goals name) with
`append_many` in batches of 1,000, and at each size the bench prints:

1. `append_many`'s rate over the 10,000 entries before the size, beside the raw Ed25519
   sign rate (`cryptography`, one call per message of the size an entry's signature
   covers) measured in rounds between those very batches, and the same by CPU time (on
   a machine others share, the share that holds when cores are free). Goal: 60% of raw
   signing at every size;
2. `verify` with 1 and with 2 jobs, each in a process of its own: entries a second
   beside the raw Ed25519 verify rate of as many processes at once as jobs, measured
   just before and after it (and beside one process's raw rate times the jobs, which two
   processes on a machine of shared cores do not reach); the CPU it used an entry beside
   a raw verify's, measured in the same process just before and after it; and the
   process's peak memory (its peak RSS less that of a process that only opened the
   ledger), which must not grow with the log. Goal: 80% of raw verify, flat memory;
3. a new Ledger object opened on the log (the start-up check included) and one
   append, as each CLI command makes them (median of a few); goal: within 2x from the
   smallest size to the largest;
4. inclusion proof latency at the log's size (median over random Pulses); goal: within 2x.

After them, `agentd --help` and `agentd ledger checkpoint` (on a new home), each a new
process, beside `python3 -c "import click"` in the same rounds (goal: within 0.2 s), once
with the project's bytecode compiled (as an install that compiles it leaves it) and once
with none cached (a fresh checkout, a read-only one, or PYTHONDONTWRITEBYTECODE set): two
copies of its packages, one compiled by compileall and one with no __pycache__, each run
with PYTHONDONTWRITEBYTECODE=1 so that neither changes.

`--only instructions` counts instead what an append executes (`valgrind --tool=cachegrind`:
instructions, the same whatever else the machine does), at each size given, beside a
raw sign's: a process appending one batch after opening the ledger is subtracted from
one appending three, so opening and start-up cancel out. It prints beside them the write
calls and bytes an append leaves the store to write (from /proc/self/io), which the
instruction count does not see (the kernel's work).

Every figure is printed with the load average when it was taken; `--runs 3` runs it all
three times. Other processes on the machine lower every figure, the raw ones included,
so compare the ratios, and rerun on a quiet machine. With --snapshot-costs, also what
reading and writing a large snapshot costs beside folding an entry (ledger.log's
SNAPSHOT_BYTES_PER_ENTRY rests on it). Nothing is kept: the ledgers live in a temporary
folder (a 10,000,000-entry one takes about 10 GB).

    python bench/ledger.py                                      # 10k, 100k, 1M: ten to twenty minutes
    python bench/ledger.py --sizes 10000,100000                 # a quicker look
    python bench/ledger.py --only appends --runs 3 --sizes 10000,100000,1000000,10000000
    python bench/ledger.py --only startup --runs 3
    python bench/ledger.py --only instructions --sizes 20000,1000000
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from ledger import (
    MINT,
    TRANSFER,
    Entry,
    Ledger,
    RuleSet,
    State,
    Wallet,
    open_store,
    register_funds,
    snapshot as snapshots,
)
from ledger.entry import PAYLOAD_TYPE, pae

BATCH = 1000
WINDOW = 10_000  # the entries before each size that append_many's rate there is taken over
OPENS = 5
PROOFS = 200
NOTE = "bench.note/v1"
PARTS = ("all", "appends", "startup", "instructions")
PACKAGES = ("agentd", "improver", "ledger", "sandbox")  # what a start-up compiles when nothing is cached
STARTS = 9
CACHEGRIND_BATCHES = 2  # the batches a counted process appends beyond its first

# Run in a process of its own: verify the ledger and print what it took, with the CPU a
# raw verify takes in the same process just before and after (so both see the same load
# on the machine); the baseline (JOBS 0) makes the raw messages too, so that the memory
# figure is the audit's. argv: URL JOBS ROOT BENCH
VERIFY = """
import importlib.util, json, resource, sys, time
sys.path[:0] = [sys.argv[3]]
from ledger import Ledger, RuleSet, Wallet, register_funds
spec = importlib.util.spec_from_file_location("ledger_bench", sys.argv[4])
bench = sys.modules["ledger_bench"] = importlib.util.module_from_spec(spec)  # its dataclasses look it up
spec.loader.exec_module(bench)
raw = bench.Raw([Wallet.generate(f"w{i}") for i in range(10)])
rules = RuleSet()
register_funds(rules)
with Ledger.open(sys.argv[1], rules, None, check=False) as ledger:
    opened = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    def cpu():
        own, workers = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return own.ru_utime + own.ru_stime + workers.ru_utime + workers.ru_stime
    if int(sys.argv[2]):
        before = raw.verify_cpu()
        start, used = time.perf_counter(), cpu()
        report = ledger.verify(jobs=int(sys.argv[2]))
        seconds, used = time.perf_counter() - start, cpu() - used
        raw_cpu = (before + raw.verify_cpu()) / 2
        assert report.ok, report.problem
    else:
        seconds, used, report, raw_cpu = 0.0, 0.0, None, 0.0
print(json.dumps({"seconds": seconds, "cpu": used, "size": report.size if report else 0, "opened_kb": opened,
                  "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "raw_cpu_us": raw_cpu}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000", help="ledger sizes to measure at, comma-separated")
    parser.add_argument(
        "--only", choices=PARTS, default="all", help="one part of the bench (default: all but instructions)"
    )
    parser.add_argument("--runs", type=int, default=1, help="how many times to run it all")
    parser.add_argument("--snapshot-costs", action="store_true", help="also measure a large snapshot's costs")
    parser.add_argument("--worker", nargs=3, metavar=("MODE", "DB", "BATCHES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        mode, db, batches = args.worker
        worker(mode, Path(db), int(batches))
        return
    sizes = sorted(int(s) for s in args.sizes.split(","))
    print(f"machine: {os.cpu_count()} CPUs; {_load()}")
    if args.only == "instructions":
        instructions(sizes)
        return
    for run in range(1, args.runs + 1):
        print(f"== run {run} of {args.runs}; {_load()}")
        with tempfile.TemporaryDirectory() as tmp:
            if args.only in ("all", "appends"):
                grown(Path(tmp), sizes, measuring=args.only == "all", snapshot=args.snapshot_costs)
            if args.only in ("all", "startup"):
                startup(Path(tmp))


def grown(tmp: Path, sizes: list[int], *, measuring: bool, snapshot: bool) -> None:
    """Grows one ledger through `sizes`, taking append_many's rate before each and, when
    `measuring`, verify, opening, an append and proofs at each."""
    wallets, key = bench_wallets()
    raw = Raw(wallets)
    print(f"signed message: {raw.size} bytes")
    rules = RuleSet()
    register_funds(rules)
    url = f"sqlite:///{tmp / 'bench.db'}"
    rates, rows = [], []
    with Ledger.open(url, rules, key) as ledger:
        ledger.append_many([(key, MINT, {"to": w.id, "cents": 10**12}) for w in wallets])
        started, first = time.perf_counter(), ledger.size
        for size in sizes:
            rates.append(grow(ledger, wallets, size, raw))
            print(f"-- {ledger.size:,} entries built; {_load()}", file=sys.stderr)
            if measuring:
                rows.append(measure(url, ledger.size, rules, key, wallets, raw))
                started, first = None, ledger.size  # the measuring came between: no rate over the whole run
        whole = (ledger.size - first) / (time.perf_counter() - started) if started is not None else None
    report_appends(rates, whole)
    if rows:
        report(rows)
    if snapshot:
        snapshot_costs(tmp / "notes.db", sizes[-1], wallets[0])


def bench_wallets() -> tuple[list[Wallet], Wallet]:
    """Ten wallets and the log's key, the same in every process (a counted one reopens the
    ledger another grew)."""
    wallets = [Wallet.from_seed(hashlib.sha256(f"bench wallet {i}".encode()).digest(), f"w{i}") for i in range(10)]
    return wallets, Wallet.from_seed(hashlib.sha256(b"bench log").digest(), "log")


def transfers(wallets: list[Wallet], start: int, count: int = BATCH) -> list[tuple[Wallet, str, dict[str, Any]]]:
    """A batch of transfers around the ten wallets, each with a memo of its own."""
    return [
        (wallets[i % 10], TRANSFER, {"to": wallets[(i + 1) % 10].id, "cents": 1, "memo": f"m {start + i}"})
        for i in range(count)
    ]


@dataclass(frozen=True)
class Appends:
    """append_many over the window before `size`, and raw signing between its batches."""

    size: int
    rate: float  # entries a second, wall time
    cpu_rate: float  # entries a second of this process's CPU
    sign_rate: float  # raw signs a second, the median of the rounds
    sign_cpu_rate: float
    load: float  # the load average at the end of the window


def grow(ledger: Ledger, wallets: list[Wallet], size: int, raw: Raw) -> Appends:
    """Appends transfers until the ledger holds `size` entries, timing the batches of the
    last WINDOW entries, each followed by a round of raw signing."""
    window = max(ledger.size, size - WINDOW)
    took = cpu = 0.0
    timed, rounds = 0, []
    while ledger.size < size:
        items = transfers(wallets, ledger.size, min(BATCH, size - ledger.size))
        began, began_cpu = time.perf_counter(), time.process_time()
        ledger.append_many(items)
        if ledger.size > window:
            took, cpu, timed = (
                took + time.perf_counter() - began,
                cpu + time.process_time() - began_cpu,
                timed + len(items),
            )
            rounds.append(raw.sign_round())
    return Appends(
        size,
        timed / took,
        timed / cpu,
        statistics.median(r[0] for r in rounds),
        statistics.median(r[1] for r in rounds),
        os.getloadavg()[0],
    )


def report_appends(rates: list[Appends], whole: float | None) -> None:
    print(
        f"append_many, batches of {BATCH:,} (signing included), over the {WINDOW:,} entries before each size, beside "
        "raw Ed25519 signing in rounds between those batches (by wall time; by CPU time in parentheses):"
    )
    print(f"{'entries':>11}  {'appends':>9}  {'raw sign':>9}  {'ratio':>5}  {'(by CPU)':>9}  load")
    for a in rates:
        print(
            f"{a.size:>11,}  {a.rate:>7,.0f}/s  {a.sign_rate:>7,.0f}/s  {a.rate / a.sign_rate:>5.0%}  "
            f"({a.cpu_rate / a.sign_cpu_rate:>6.0%})  {a.load:.2f}"
        )
    worst = min(rates, key=lambda a: a.rate / a.sign_rate)
    verdict = "meets" if worst.rate / worst.sign_rate >= 0.6 else "MISSES"
    print(
        f"append_many: at least {worst.rate / worst.sign_rate:.0%} of raw signing (at {worst.size:,} entries); "
        f"goal 60% at every size: {verdict}" + (f"; {whole:,.0f}/s over the whole run" if whole is not None else "")
    )


def measure(url: str, size: int, rules: RuleSet, key: Wallet, wallets: list[Wallet], raw: Raw) -> dict[str, Any]:
    row: dict[str, Any] = {"size": size}
    baseline = _run_verify(url, 0)
    for jobs in (1, 2):
        # The limit for `jobs` jobs is raw verify in that many processes at once, measured
        # just before and after: two processes on this kind of machine reach less than
        # twice one's rate (shared cores and caches), and no audit can beat raw verify.
        before, before_one = raw.verify_rate_in(jobs), raw.verify_rate()
        done = _run_verify(url, jobs)
        after, after_one = raw.verify_rate_in(jobs), raw.verify_rate()
        row[f"verify{jobs}"] = {
            "rate": done["size"] / done["seconds"],
            "limit": (before + after) / 2,
            "single_x_jobs": (before_one + after_one) / 2 * jobs,
            "seconds": done["seconds"],
            "cpu_us": done["cpu"] / done["size"] * 1e6,
            "raw_cpu_us": done["raw_cpu_us"],
            "memory_mb": (done["peak_kb"] - baseline["opened_kb"]) / 1024,
        }
    opens, appends = [], []
    for i in range(OPENS):
        began = time.perf_counter()
        with Ledger.open(url, rules, key) as fresh:
            opened = time.perf_counter()
            fresh.append(
                wallets[i % 10], TRANSFER, {"to": wallets[(i + 1) % 10].id, "cents": 1, "memo": f"fresh {size} {i}"}
            )
            appends.append(time.perf_counter() - opened)
        opens.append(opened - began)
    row["open"], row["append"] = statistics.median(opens), statistics.median(appends)
    with Ledger.open(url, rules, key) as ledger:
        pulses = [random.randint(1, ledger.size) for _ in range(PROOFS)]
        took = []
        for pulse in pulses:
            began = time.perf_counter()
            ledger.inclusion_proof(pulse).verify()
            took.append(time.perf_counter() - began)
    row["proof"] = statistics.median(took)
    print(json.dumps(row), file=sys.stderr)
    return row


def _run_verify(url: str, jobs: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", VERIFY, url, str(jobs), str(ROOT), __file__], capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"bench: verify failed: {done.stderr}")
    return json.loads(done.stdout)


def report(rows: list[dict[str, Any]]) -> None:
    for jobs in (1, 2):
        limits = [r[f"verify{jobs}"]["limit"] for r in rows]
        print(
            f"raw Ed25519 verify in {jobs} process{'es' * (jobs > 1)} at once, this run: "
            f"{min(limits):,.0f}-{max(limits):,.0f}/s (measured before and after each verify)"
        )
    print(f"{'entries':>10}  {'verify, 1 job':>34}  {'verify, 2 jobs':>34}  {'open':>8}  {'append':>8}  {'proof':>8}")
    for r in rows:
        cells = [f"{r['size']:>10,}"]
        for jobs in (1, 2):
            v = r[f"verify{jobs}"]
            cells.append(
                f"{v['rate']:>8,.0f}/s {v['rate'] / v['limit']:>4.0%} {v['seconds']:>6.1f} s {v['memory_mb']:>5.1f} MB"
            )
        cells += [f"{r['open'] * 1e3:>5.1f} ms", f"{r['append'] * 1e3:>5.1f} ms", f"{r['proof'] * 1e6:>5.0f} µs"]
        print("  ".join(cells))
    first, last = rows[0], rows[-1]
    for what in ("open", "append", "proof"):
        growth = last[what] / first[what]
        verdict = "meets" if growth <= 2 else "MISSES"
        print(f"{what}: {growth:.2f}x from {first['size']:,} to {last['size']:,} entries; goal within 2x: {verdict}")
    for jobs in (1, 2):
        cells = [r[f"verify{jobs}"] for r in rows]
        worst = min(c["rate"] / c["limit"] for c in cells)
        naive = min(c["rate"] / c["single_x_jobs"] for c in cells)
        memory = ", ".join(f"{c['memory_mb']:.1f}" for c in cells)
        verdict = "meets" if worst >= 0.8 else "MISSES"
        print(
            f"verify, {jobs} job{'s' * (jobs > 1)}: at least {worst:.0%} of raw verify in {jobs} process"
            f"{'es' * (jobs > 1)} at once ({naive:.0%} of one process's raw rate x {jobs}); goal 80%: {verdict}; "
            f"memory above an opened ledger: {memory} MB"
        )
    for jobs in (1, 2):
        cells = [r[f"verify{jobs}"] for r in rows]
        worst = min(c["raw_cpu_us"] / c["cpu_us"] for c in cells)
        figures = ", ".join(f"{c['cpu_us']:.0f} µs beside {c['raw_cpu_us']:.0f} µs" for c in cells)
        verdict = "meets" if worst >= 0.8 else "MISSES"
        print(
            f"  CPU an entry, verify with {jobs} job{'s' * (jobs > 1)} (all its processes), beside a raw verify in the "
            f"same process around it: {figures}; at least {worst:.0%} (what the rate would be on idle cores); "
            f"goal 80%: {verdict}"
        )


def startup(tmp: Path) -> None:
    """`agentd --help` and `agentd ledger checkpoint` (on a new home), each a process of its
    own as a user starts it, beside a process that only imports click, taken in turns: the
    median of STARTS each, with the project's bytecode compiled and with none cached."""
    home, compiled, source = tmp / "home", tmp / "compiled", tmp / "source"
    for copy in (compiled, source):
        for package in PACKAGES:
            shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(compiled)], check=True)
    env = {**os.environ, "AGENTD_HOME": str(home), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(compiled)}
    for args in (["init"], ["wallet", "new", "alice"], ["wallet", "fund", "alice", "5"]):  # a log, a checkpoint
        _run(args, env, tmp)
    # Each command with the copy it runs from (the bare import reads neither).
    bare = "python3 -c 'import click'"
    commands = [(bare, [sys.executable, "-c", "import click"], compiled)]
    for args in (["--help"], ["ledger", "checkpoint"]):
        for copy, cached in ((compiled, "bytecode compiled"), (source, "no bytecode cached")):
            commands.append((f"agentd {' '.join(args)}, {cached}", [sys.executable, "-m", "agentd", *args], copy))
    took: dict[str, list[float]] = {name: [] for name, _, _ in commands}
    for _ in range(STARTS):
        for name, argv, copy in commands:
            began = time.perf_counter()
            subprocess.run(argv, cwd=tmp, env={**env, "PYTHONPATH": str(copy)}, capture_output=True, check=True)
            took[name].append(time.perf_counter() - began)
    click = statistics.median(took.pop(bare))
    print(f"start-up, each a new process, median of {STARTS}; {_load()}")
    print(f"  {bare:<50} {click:.3f} s")
    for name, seconds in took.items():
        median = statistics.median(seconds)
        verdict = "meets" if median - click <= 0.2 else "MISSES"
        print(f"  {name:<50} {median:.3f} s (+{median - click:.3f} s); goal within 0.2 s: {verdict}")


def _run(args: list[str], env: dict[str, str], cwd: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentd", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if done.returncode:
        raise SystemExit(f"bench: agentd {' '.join(args)} failed: {done.stderr.strip()}")


def instructions(sizes: list[int]) -> None:
    """The instructions an append executes at each size, beside a raw sign's (cachegrind),
    and the writes it leaves the store to make."""
    if shutil.which("valgrind") is None:
        raise SystemExit("bench: --only instructions needs valgrind (apt-get install valgrind)")
    sign = _per_item(["sign", "-", ""], BATCH)
    print(f"a raw Ed25519 sign: {sign:,.0f} instructions; {_load()}")
    wallets, key = bench_wallets()
    rules = RuleSet()
    register_funds(rules)
    with tempfile.TemporaryDirectory() as tmp:
        path, copy = Path(tmp) / "bench.db", Path(tmp) / "counted.db"
        for size in sizes:
            # Closed after each size: the last connection's close leaves the whole log in the file.
            with Ledger.open(f"sqlite:///{path}", rules, key) as ledger:
                if not ledger.size:
                    ledger.append_many([(key, MINT, {"to": w.id, "cents": 10**12}) for w in wallets])
                while ledger.size < size:
                    ledger.append_many(transfers(wallets, ledger.size, min(BATCH, size - ledger.size)))
            appended = _per_item(["append", str(copy), str(path)], BATCH)
            writes = _writes(copy, path)
            print(
                f"an append at {size:,} entries: {appended:,.0f} instructions, {sign / appended:.1%} of them a "
                f"raw sign's; {writes['calls']:.2f} write calls and {writes['bytes']:,.0f} bytes written; {_load()}"
            )


def _per_item(worker_args: list[str], items: int) -> float:
    """Instructions a process doing CACHEGRIND_BATCHES more batches takes over one doing none
    beyond the first, a batch's item each. worker_args: the mode, the copy it works on and
    the ledger each run copies it from."""
    counted = []
    for batches in (0, CACHEGRIND_BATCHES):
        mode, copy, source = worker_args
        if source:
            shutil.copyfile(source, copy)
        done = subprocess.run(
            [
                "valgrind",
                "--tool=cachegrind",
                "--cache-sim=no",
                "--cachegrind-out-file=/dev/null",
                sys.executable,
                __file__,
                "--worker",
                mode,
                copy,
                str(batches),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        refs = next(line for line in done.stderr.splitlines() if "I   refs:" in line or "I refs:" in line)
        counted.append(int(refs.split()[-1].replace(",", "")))
    return (counted[1] - counted[0]) / (CACHEGRIND_BATCHES * items)


def _writes(copy: Path, source: Path) -> dict[str, float]:
    """The write calls and bytes an append makes, from a worker's own /proc/self/io."""
    shutil.copyfile(source, copy)
    done = subprocess.run(
        [sys.executable, __file__, "--worker", "append", str(copy), str(CACHEGRIND_BATCHES)],
        capture_output=True,
        text=True,
        check=True,
    )
    found: dict[str, float] = json.loads(done.stdout)
    return found


def worker(mode: str, db: Path, batches: int) -> None:
    """What a counted process does: a first batch (opening, and everything done once),
    then `batches` more; for appends, the writes those made, as JSON."""
    wallets, key = bench_wallets()
    if mode == "sign":
        raw = Raw(wallets)
        for _ in range(batches + 1):
            raw.sign_round()
        return
    rules = RuleSet()
    register_funds(rules)
    with Ledger.open(f"sqlite:///{db}", rules, key) as ledger:
        # Every batch made first, so that only appending differs between the counted processes.
        made = [transfers(wallets, ledger.size + i * BATCH) for i in range(CACHEGRIND_BATCHES + 1)]
        ledger.append_many(made[0])
        before = _io()
        for items in made[1 : batches + 1]:
            ledger.append_many(items)
        after = _io()
    if batches:
        print(json.dumps({k: (after[k] - before[k]) / (batches * BATCH) for k in ("calls", "bytes")}))


def _io() -> dict[str, int]:
    """This process's write calls and bytes written so far (/proc/self/io)."""
    fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return {"calls": int(fields["syscw"]), "bytes": int(fields["wchar"])}


def _load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def snapshot_costs(path: Path, entries: int, writer: Wallet) -> None:
    """What reading and writing the snapshot of a state that keeps an item per entry
    costs, beside folding an entry."""
    rules = RuleSet()
    rules.register(NOTE, _note)
    key = Wallet.generate("log")
    with Ledger.open(f"sqlite:///{path}", rules, key) as ledger:
        for start in range(0, entries, BATCH):
            ledger.append_many([(writer, NOTE, {"n": n}) for n in range(start, min(start + BATCH, entries))])
        url = ledger.url
    store = open_store(url)
    try:
        started = time.perf_counter()
        stored = store.snapshot()
        if stored is None:
            raise SystemExit("bench: the ledger holds no snapshot after its appends")
        state, frontier = snapshots.restore(stored, rules.fingerprint)
        read = time.perf_counter() - started
        started = time.perf_counter()
        with store.transaction() as txn:
            txn.save_snapshot(snapshots.take(state, frontier, stored.chain, rules.fingerprint))
        write = time.perf_counter() - started
        length = len(stored.state)
    finally:
        store.close()
    with Ledger.open(url, rules, key) as ledger:
        sample = list(ledger.entries(start=ledger.size - 9_999))
    state = State(size=1, origin=sample[0].log)
    started = time.perf_counter()
    for entry in sample:
        _note(state, entry)
    fold = (time.perf_counter() - started) / len(sample)
    print(
        f"a state keeping one item per entry, at {entries:,} entries: snapshot {length / 1e6:.1f} MB, read and "
        f"restored in {read * 1e3:.0f} ms, taken and written in {write * 1e3:.0f} ms ({write / length * 1e9:.1f} ns "
        f"a byte); folding an entry by its rule: {fold * 1e6:.1f} µs, the cost of writing "
        f"{fold / write * length:,.0f} bytes of snapshot"
    )


def _note(state: State, entry: Entry) -> None:
    state.ns("notes")[entry.claim_id[:32]] = {"pulse": entry.pulse, "n": entry.body["n"]}


class Raw:
    """Bare `cryptography` calls on messages of the ledger's size, measured in rounds
    between the ledger's own work so both see the same load on the machine."""

    def __init__(self, wallets: list[Wallet]) -> None:
        messages = [_message(wallets, i) for i in range(1000)]
        self.size = len(messages[0])
        keys = [Ed25519PrivateKey.from_private_bytes(w.seed) for w in wallets]
        self._to_sign = [(keys[i % 10], m) for i, m in enumerate(messages)]
        self._to_verify = [(k.public_key(), k.sign(m), m) for k, m in self._to_sign]

    def sign_round(self) -> tuple[float, float]:
        """Signs a thousand messages: signs a second, by wall time and by CPU time."""
        start, start_cpu = time.perf_counter(), time.process_time()
        for key, message in self._to_sign:
            key.sign(message)
        return len(self._to_sign) / (time.perf_counter() - start), len(self._to_sign) / (
            time.process_time() - start_cpu
        )

    def verify_rate(self) -> float:
        """The median of three rounds, now."""
        rates = []
        for _ in range(3):
            start = time.perf_counter()
            for public, signature, message in self._to_verify:
                public.verify(signature, message)
            rates.append(len(self._to_verify) / (time.perf_counter() - start))
        return statistics.median(rates)

    def verify_cpu(self) -> float:
        """Microseconds of CPU a raw verify takes: the median of three rounds."""
        took = []
        for _ in range(3):
            start = time.process_time()
            for public, signature, message in self._to_verify:
                public.verify(signature, message)
            took.append((time.process_time() - start) / len(self._to_verify) * 1e6)
        return statistics.median(took)

    def verify_rate_in(self, processes: int) -> float:
        """The raw verify rate of `processes` processes at once: what the machine can give now."""
        _FORKED[:] = self._to_verify  # keys do not pickle; forked workers inherit them
        with multiprocessing.get_context("fork").Pool(processes) as pool:
            start = time.perf_counter()
            done = sum(pool.map(_verify_forked, range(processes * 5)))
            return done / (time.perf_counter() - start)


_FORKED: list = []


def _verify_forked(_: int) -> int:
    for public, signature, message in _FORKED:
        public.verify(signature, message)
    return len(_FORKED)


def _message(wallets: list[Wallet], i: int) -> bytes:
    """What the ledger signs for a typical transfer: the PAE of its payload."""
    body = {"to": wallets[(i + 1) % 10].id, "cents": 1, "memo": f"bench {i}"}
    entry = Entry.create(wallets[i % 10], TRANSFER, body, log=f"agentd.ledger/{'0' * 32}/{'0' * 16}", seq=i + 1)
    payload = base64.b64decode(json.loads(entry.raw)["payload"])
    return pae(PAYLOAD_TYPE.encode(), payload)


if __name__ == "__main__":
    main()
