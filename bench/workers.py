"""Runs/s through workers on the trial queue, beside the local executor, on the same tasks.

The runs are sandboxed ones, as a code round's are: `python3 -m agentd case --stdio` from a
built tree (agentd's four packages built in the sandbox by the code loop's default build,
which compiles agentd, as bench/candidate.py builds it; shipped to each worker once by
digest, its compiled modules with it), in
bubblewrap, on a task of the invoices example answered by a scripted model (three turns,
two tool calls). The same trial runs:

1. here, through the local executor (the figure the workers are held to);
2. through one `agentd worker` (goal: at least 90% of the local figure);
3. through two workers (on one machine they share its cores: this shows what the queue
   costs with two claimants, not what a second machine would add);
4. one run at a time, here and through one worker in turn: the difference of the medians
   is what the queue adds to each run (defer, claim, the signed answer and its checks,
   about four statements to PostgreSQL);
5. the raw limit of the queue itself in the same run: no-op procrastinate jobs deferred
   and run on the same database, jobs/s and ms a job.

Beside 1 to 3, the CPU each run took in the loop (this process), in the workers' processes
(their sandboxes apart) and in PostgreSQL's backends serving each (told apart by their
application_name; where PostgreSQL runs on this machine), and how much of the time the
machine's cores were idle (none: the figures are of CPU spent, not of waiting). After 2,
`--rounds` more rounds of 1 and 2 in turn, so that what others do on a shared machine
weighs on both alike: the share of each round, and their median, which is held to the goal.

Each trial is timed from its first run handed out to its last answer taken, the queue's
executor open: a loop opens it once for all its trials (`improve run`, `code`, `eval`),
so its opening and closing (the schema checked, the connections and the listener made,
the jobs tidied) are timed apart and printed as such.

Every worker and the loop share this machine with PostgreSQL; the load average is printed
before and after. The queue lives in a schema of its own on AGENTD_TEST_POSTGRES (default
the test database at 127.0.0.1:5432), dropped at the end.

    python bench/workers.py            # 192 runs each way, 8 at once (the default), about three minutes
    python bench/workers.py --quick    # 16 runs each way
    python bench/workers.py --at-once 2   # as many at once as this machine has cores
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from candidate import built_tree, candidate
from episodes import example_task
from postgres import POSTGRES_URL

from agentd.app.agent import model_factory
from agentd.app.init import initialise
from agentd.app.queued import QueueExecutor, queue_executor, through
from agentd.app.trialqueue import QueueAddress
from agentd.home import Home
from agentd.wallets import create_wallet
from improver.base.variant import Variant
from improver.episodes.harness import Command
from improver.episodes.trials import CONCURRENCY as TRIAL_CONCURRENCY, TrialResult, run_trials
from improver.tasks.task import Task
from sandbox.choose import make_runner

LOOP, WORKERS = "agentd-bench-loop", "agentd-bench-worker"  # the application_name of each one's connections
TICK = os.sysconf("SC_CLK_TCK")
RUNS = 192  # a trial of 48 tasks, four runs each: long enough that its start and end weigh little


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Fewer runs, for a look.")
    parser.add_argument(
        "--at-once",
        type=int,
        default=TRIAL_CONCURRENCY,
        help="Runs at once, here and on each worker (default: the loop's and a worker's own default).",
    )
    parser.add_argument("--runs", type=int, default=RUNS, help=f"Runs in each trial (default {RUNS}).")
    parser.add_argument("--rounds", type=int, default=5, help="Rounds of 1 and 2 in turn after 2 (default 5).")
    args = parser.parse_args()
    runs, at_once = (16 if args.quick else args.runs), args.at_once
    print(f"load average before: {_load()}; {os.cpu_count()} cores; {runs} runs each way, {at_once} at once")
    with tempfile.TemporaryDirectory() as tmp, _schema() as url:
        home = Home(Path(tmp) / "home")
        os.environ["AGENTD_HOME"] = str(home.root)
        initialise(home)
        task, variant = example_task(home)
        program = candidate(make_runner("bwrap"), built_tree(Path(tmp)))
        bench = Bench(home, task, variant, program, f"{url}&application_name={LOOP}")
        bench.trial(2, at_once, None)  # warm up: the page cache, the sandbox, the first imports
        local = bench.timed("1. here, the local executor", runs, at_once, None)
        worker_url = f"{url}&application_name={WORKERS}"
        with _workers(Path(tmp), worker_url, 1, at_once) as started:
            bench.trial(at_once, at_once, bench.executor())  # the worker's first fetch of the tree
            one = bench.timed("2. through 1 worker", runs, at_once, bench.executor(), local, started.pids)
            share = bench.in_turns(args.rounds, runs, at_once) or local / one
            here, queued = bench.alternating(runs // 2)
        with _workers(Path(tmp), worker_url, 2, max(1, at_once // 2)) as two:
            bench.trial(at_once, at_once, bench.executor())
            bench.timed("3. through 2 workers", runs, at_once, bench.executor(), local, two.pids)
        print(
            f"4. one run at a time, here and through 1 worker in turn, {runs // 2} each: median {here * 1e3:.0f} ms "
            f"here, {queued * 1e3:.0f} ms through the worker: the queue adds {(queued - here) * 1e3:.0f} ms a run"
        )
        print(
            f"   1 worker gives {runs / one:.2f} runs/s against {runs / local:.2f} here: {local / one:.0%}; "
            f"{'in turns, the median' if args.rounds else 'that'} {share:.1%} "
            f"({'meets' if share >= 0.9 else 'misses'} the goal of 90%)"
        )
        print(
            f"   opening and closing the queue's executor, apart from the figures above (a loop does it once): "
            f"median {statistics.median(bench.opened) * 1e3:.0f} ms of {len(bench.opened)}"
        )
        print(f"   workers said: {started.said}")
        _raw_limit(url, 200)
    print(f"load average after: {_load()}")


class Bench:
    def __init__(self, home: Home, task: Task, variant: Variant, candidate: Command, url: str) -> None:
        self.home, self.task, self.variant, self.candidate, self.url = home, task, variant, candidate, url
        self.opened: list[float] = []  # seconds each queue executor took to open and close

    def executor(self) -> QueueExecutor:
        made = queue_executor(self.home, self.url, None, frozenset(), lambda: None, _refused)
        assert made is not None
        return made

    def trial(self, runs: int, at_once: int, executor: QueueExecutor | None, meter: Meter | None = None) -> float:
        """Seconds the trial took, the executor open: a loop opens it once for all its trials
        (improve run, code, eval), so its opening and closing are kept apart, in `opened`."""
        took = 0.0

        async def go() -> TrialResult:
            nonlocal took
            if meter:  # here, where the loop's connections are open
                meter.begin()
            started = time.perf_counter()
            result = await run_trials(
                self.variant,
                [self.task],
                self.candidate,
                model_factory(self.home),
                runs=runs,
                concurrency=at_once,
                retries=0,
                executor=executor,
            )
            took = time.perf_counter() - started
            if meter:
                meter.end()
            return result

        whole = time.perf_counter()
        result = asyncio.run(through(executor, go))
        if executor is not None:
            self.opened.append(time.perf_counter() - whole - took)
        if result.passed != runs:
            raise SystemExit(f"bench: {result.passed} of {runs} runs passed ({result.errors or result.per_task})")
        return took

    def alternating(self, runs: int) -> tuple[float, float]:
        """One run here, then one through the queue, `runs` times: the median of each, so
        what others do on the machine meanwhile weighs on both alike."""
        executor = self.executor()

        async def go() -> tuple[float, float]:
            here: list[float] = []
            queued: list[float] = []
            for _ in range(runs):
                for times, through_queue in ((here, None), (queued, executor)):
                    started = time.perf_counter()
                    await run_trials(
                        self.variant,
                        [self.task],
                        self.candidate,
                        model_factory(self.home),
                        runs=1,
                        retries=0,
                        executor=through_queue,
                    )
                    times.append(time.perf_counter() - started)
            return statistics.median(here), statistics.median(queued)

        return asyncio.run(through(executor, go))

    def timed(
        self,
        what: str,
        runs: int,
        at_once: int,
        executor: QueueExecutor | None,
        local: float | None = None,
        workers: Sequence[int] = (),
    ) -> float:
        with Meter(workers) as meter:
            seconds = self.trial(runs, at_once, executor, meter)
        share = f"; {local / seconds:.0%} of the local executor's" if local else ""
        print(f"{what}: {runs} runs, {at_once} at once: {runs / seconds:.2f} runs/s ({seconds:.2f} s){share}")
        print(f"   CPU a run: {meter.said(runs)}")
        return seconds

    def in_turns(self, rounds: int, runs: int, at_once: int) -> float | None:
        """`rounds` rounds of a trial here and the same through the worker, each round's
        share printed, their median returned."""
        if rounds < 1:
            return None
        shares = []
        for _ in range(rounds):
            here = self.trial(runs, at_once, None)
            shares.append(here / self.trial(runs, at_once, self.executor()))
        each = ", ".join(f"{share:.0%}" for share in shares)
        print(
            f"   in turns, {rounds} rounds of {runs} runs here then through 1 worker: {each}; "
            f"median {statistics.median(shares):.1%}"
        )
        return statistics.median(shares)


class Meter:
    """CPU time over a trial: this process (the loop), the workers' processes (not their
    sandboxes, which are not theirs once reaped by bubblewrap), and PostgreSQL's backends
    serving each, known by their application_name. Its own connection to PostgreSQL is made
    before the timing starts; a look costs a query on it."""

    def __init__(self, workers: Sequence[int]) -> None:
        self.workers = workers
        self.spent: dict[str, float] = {}

    def __enter__(self) -> Meter:
        self.conn = psycopg.connect(POSTGRES_URL, autocommit=True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    def begin(self) -> None:
        self.started = time.process_time(), sum(map(_cpu, self.workers)), self._backends(), _machine()

    def end(self) -> None:
        loop, workers, backends, machine = self.started
        busy, idle = (now - then for now, then in zip(_machine(), machine, strict=True))
        self.idle = idle / (busy + idle)
        self.spent = {"loop": time.process_time() - loop, "workers": sum(map(_cpu, self.workers)) - workers}
        for pid, (name, cpu) in self._backends().items():
            self.spent[name] = self.spent.get(name, 0.0) + cpu - backends.get(pid, (name, 0.0))[1]

    def said(self, runs: int) -> str:
        def ms(key: str) -> str:
            return f"{self.spent.get(key, 0.0) * 1e3 / runs:.1f} ms"

        idle = f"; the machine idle {self.idle:.0%} of the time"
        if not self.workers:
            return f"the loop {ms('loop')} (its sandboxes apart){idle}"
        postgres = f"PostgreSQL {ms(LOOP)} serving the loop, {ms(WORKERS)} the workers"
        if LOOP not in self.spent:
            postgres = "PostgreSQL's backends not seen (not on this machine)"
        return f"the loop {ms('loop')}, the workers {ms('workers')} (their sandboxes apart), {postgres}{idle}"

    def _backends(self) -> dict[int, tuple[str, float]]:
        rows = self.conn.execute(
            "SELECT pid, application_name FROM pg_stat_activity WHERE application_name = ANY(%s)", ([LOOP, WORKERS],)
        ).fetchall()
        found = {}
        for pid, name in rows:
            with contextlib.suppress(OSError, ValueError):
                if Path(f"/proc/{pid}/comm").read_text().strip() == "postgres":
                    found[pid] = (name, _cpu(pid))
        return found


def _cpu(pid: int) -> float:
    """The process's own CPU seconds, user and system."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def _machine() -> tuple[int, int]:
    """The machine's CPU ticks so far, busy and idle (waiting on the disk counted idle)."""
    ticks = [int(n) for n in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]  # guest time is in user's
    idle = ticks[3] + ticks[4]
    return sum(ticks) - idle, idle


def _refused(line: str) -> None:
    raise SystemExit(f"bench: a worker's answer was refused: {line}")


class _schema:
    """A trial queue in a schema of its own, dropped afterwards."""

    def __enter__(self) -> str:
        self.name = f"bench_workers_{uuid.uuid4().hex[:10]}"
        return f"{POSTGRES_URL}?schema={self.name}&queue=bench"

    def __exit__(self, *exc: object) -> None:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {self.name} CASCADE")


class _workers:
    """`count` worker processes on the queue, each `at_once` runs at once, stopped afterwards."""

    def __init__(self, tmp: Path, url: str, count: int, at_once: int) -> None:
        self.tmp, self.url, self.count, self.at_once = tmp, url, count, at_once
        self.processes: list[subprocess.Popen[str]] = []
        self.said: list[str] = []

    @property
    def pids(self) -> list[int]:
        return [process.pid for process in self.processes]

    def __enter__(self) -> _workers:
        for n in range(self.count):
            home = Home(self.tmp / f"worker-{len(list(self.tmp.glob('worker-*')))}-{n}")
            initialise(home)
            create_wallet(home, "worker")
            argv = [sys.executable, "-m", "agentd", "--home", str(home.root), "worker", "--queue", self.url]
            argv += ["--concurrency", str(self.at_once)]
            process = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
            self.processes.append(process)
            _wait_for(process, "claiming runs")
        return self

    def __exit__(self, *exc: object) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            _, err = process.communicate(timeout=60)
            self.said += err.strip().splitlines()[-1:]


def _wait_for(process: subprocess.Popen[str], text: str) -> None:
    assert process.stderr is not None
    for line in process.stderr:
        if text in line:
            return
    raise SystemExit(f"bench: a worker ended before it said {text!r} (exit {process.wait()})")


def _raw_limit(url: str, jobs: int) -> None:
    """No-op procrastinate jobs through the same database: what the queue costs by itself."""
    address = QueueAddress.parse(url)
    app = address.app()
    done: list[int] = []

    @app.task(name="bench.noop")
    async def noop(n: int) -> None:
        done.append(n)

    async def go() -> tuple[float, float]:
        async with app.open_async():
            started = time.perf_counter()
            for n in range(jobs):
                await app.configure_task("bench.noop", queue="noop").defer_async(n=n)
            deferred = time.perf_counter() - started
            await app.run_worker_async(queues=["noop"], wait=False, concurrency=4, install_signal_handlers=False)
            return deferred, time.perf_counter() - started

    deferred, total = asyncio.run(go())
    assert len(done) == jobs
    print(
        f"5. the raw limit, the queue alone: {jobs} no-op jobs deferred one by one and run by one worker in "
        f"{total:.2f} s: {jobs / total:.0f} jobs/s, {total * 1e3 / jobs:.1f} ms a job ({deferred * 1e3 / jobs:.1f} ms "
        "of it deferring)"
    )


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


if __name__ == "__main__":
    main()
