"""Trials through workers on the PostgreSQL trial queue, as an operator runs them: real
worker processes (`agentd worker`), the real database, and the faults a fleet meets.

Each test has a schema of its own on the test database (dropped afterwards), so the
suite runs in parallel. The runs that must be slow enough to interrupt are a candidate
program in the sandbox that sleeps before it answers (a built tree, as a code round's).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import psycopg
import pytest

from agentd.app import killswitch
from agentd.app.agent import model_factory, variant_of
from agentd.app.demo import PROFILE
from agentd.app.examples import install_example
from agentd.app.init import initialise
from agentd.app.queued import QueueExecutor, queue_executor, through
from agentd.app.trialqueue import (
    BATCH,
    DEFER,
    DURABLY,
    QUEUE_LONGEST,
    RUN_TASK,
    QueueAddress,
    prepare,
    set_halt,
    tree_blob,
    unpack_tree,
)
from agentd.errors import WrongValue
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.wallets import create_wallet, load_wallet
from improver import Halted, Stop, Task, Trials, load_tasks
from improver.episodes.harness import Command
from improver.episodes.trials import TrialResult, run_trials
from sandbox import make_runner, shell_request
from tests.examplekit import harvested, sealed
from tests.homekit import run_in_process
from tests.ledger.ledgerkit import temporary_store
from tests.postgres import POSTGRES_URL

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

HEARTBEAT = 0.3  # the workers' beat here: a lease of LEASE seconds is lost after a few missed
LEASE = 1.5
READY = 60.0  # seconds a worker may take to check its sandbox and start claiming
# A candidate that takes SLOW seconds, then says it is done having done nothing: the
# invoices tasks that went badly pass (nothing paid), those that went well fail. It sleeps
# before it reads the task, so its time runs from its start even when the worker that
# started it is stopped before writing the task to it.
PROGRAM = """
import json, os, sys, time
time.sleep(float(os.environ.get("SLOW", "0")))
json.loads(sys.stdin.readline())
print(json.dumps({"done": {"answer": "Nothing paid."}}), flush=True)
"""


class WorkerProcess:
    """`agentd worker` in a home of its own, its stderr read as it comes; `within` is what
    it is started under (`ip netns exec NAME`, for a worker on "another machine")."""

    def __init__(self, root: Path, url: str, *options: str, within: Sequence[str] = ()) -> None:
        self.home = Home(root)
        if not self.home.exists:
            initialise(self.home)
            install_example(self.home, PROFILE)
            create_wallet(self.home, "worker")
        self.wallet = load_wallet(self.home, "worker")
        argv = [*within, sys.executable, "-m", "agentd", "--home", str(root), "worker", "--queue", url]
        argv += ["--heartbeat", str(HEARTBEAT), *options]
        self.process = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, env=_env())
        self.lines: queue.Queue[str] = queue.Queue()
        self.said: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        try:
            self.wait_for("claiming runs", READY)
        except AssertionError:
            self.stop()
            raise

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.put(line.rstrip("\n"))

    def wait_for(self, text: str, seconds: float = 30.0) -> str:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.1)
            except queue.Empty:
                if self.process.poll() is not None and self.lines.empty():
                    break
                continue
            self.said.append(line)
            if text in line:
                return line
        raise AssertionError(f"the worker never said {text!r}; it said: {self.said}")

    def stop(self) -> str:
        """SIGTERM, then what it said last (how many runs it answered)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGCONT)
            self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        time.sleep(0.2)
        while not self.lines.empty():
            self.said.append(self.lines.get())
        return self.said[-1] if self.said else ""


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    env["PYTHONPATH"] = str(Path(__file__).resolve().parents[2])
    return env


@pytest.fixture
def workers(tmp_path: Path, queue_url: str) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start(name: str, *options: str, url: str = queue_url) -> WorkerProcess:
        worker = WorkerProcess(tmp_path / name, url, *options)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.stop()


def rows(url: str, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    schema = QueueAddress.parse(url).schema
    with psycopg.connect(POSTGRES_URL, autocommit=True, options=f"-csearch_path={schema}") as conn:
        return conn.execute(sql, params).fetchall()


def answered(said: str) -> int:
    assert said.startswith("stopped after answering "), said
    return int(said.split()[3])


# The loop through workers decides as it does here.


def test_the_loop_through_two_workers_decides_exactly_as_it_does_here(
    home: Home, tmp_path: Path, queue_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    seal = sealed(home).seal
    here = Home(tmp_path / "here")
    shutil.copytree(home.root, here.root)
    first, second = workers("w1"), workers("w2", "--concurrency", "2")
    args = ["improve", "run", PROFILE, "--proposer", "script:models/proposer.toml", "--rounds", "2"]
    args += ["--runs", "4", "--seed", "7", "--json"]
    through_workers = run_in_process(["--home", str(home.root), *args, "--queue", queue_url])
    assert through_workers.code == 0, through_workers.err
    local = run_in_process(["--home", str(here.root), *args])
    assert local.code == 0, local.err
    assert _decisions(through_workers.out) == _decisions(local.out)
    assert "kept" in [kind for kind, _ in _decisions(local.out)]
    assert answered(first.stop()) > 0 and answered(second.stop()) > 0
    # The sealed tasks ran here: no worker was given one (none is trusted with them).
    stored = {digest for (digest,) in rows(queue_url, "SELECT digest FROM agentd_blobs")}
    assert stored and not stored & {t.digest for t in seal.sealed.tasks}
    assert {t.digest for t in seal.train().tasks} <= stored
    assert rows(queue_url, "SELECT id FROM procrastinate_jobs WHERE status NOT IN ('todo', 'doing')") == []


def _decisions(out: str) -> list[tuple[str, str]]:
    return [(e["event"], e["text"]) for e in map(json.loads, out.splitlines()) if e["event"] != "recorded"]


def test_improve_eval_through_a_worker_reports_what_it_reports_here(
    agentd: Callable[..., Any], home: Home, queue_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    work = harvested(home)
    workers("w1")
    queued = agentd("improve", "eval", PROFILE, "--tasks", work, "--runs", "3", "--k", "1,3", "--queue", queue_url)
    assert queued.code == 0, queued.err
    assert queued.out == agentd("improve", "eval", PROFILE, "--tasks", work, "--runs", "3", "--k", "1,3").out


# A built tree as the candidate, slow enough to interrupt.


def slow_candidate(tmp_path: Path, seconds: float) -> Command:
    tree = tmp_path / "tree"
    tree.mkdir(exist_ok=True)
    (tree / "agent.py").write_text(PROGRAM)
    return Command(make_runner("bwrap"), shell_request("python3 agent.py", tree, SLOW=str(seconds)))


def invoices(home: Home, count: int) -> list[Task]:
    tasks = load_tasks(harvested(home)).tasks
    return [t for t in tasks if t.source.get("outcome") == "good"][:1] + [
        t for t in tasks if t.source.get("outcome") != "good"
    ][: count - 1]


def executor(home: Home, url: str, **fields: Any) -> QueueExecutor:
    made = queue_executor(home, url, None, frozenset(), lambda: killswitch.halted(home), fields.pop("refused"))
    assert made is not None
    made.lease = LEASE
    for name, value in fields.items():
        setattr(made, name, value)
    return made


def trial(home: Home, tasks: list[Task], candidate: Command, runs: int, ex: QueueExecutor | None = None) -> TrialResult:
    profile = load_profile(home, PROFILE)

    async def go() -> TrialResult:
        return await run_trials(
            variant_of(profile),
            tasks,
            candidate,
            model_factory(home, profile.dir),
            runs=runs,
            concurrency=8,
            limits=profile.limits,
            executor=ex,
        )

    return asyncio.run(through(ex, go))


def counts(result: TrialResult) -> dict[str, tuple[int, int, int]]:
    return {name: (t.passed, t.failed, t.errored) for name, t in result.per_task.items()}


def held_by_first(url: str) -> int:
    """How many runs the first worker to start holds now."""
    return rows(
        url,
        "SELECT count(*) FROM procrastinate_jobs WHERE status = 'doing' "
        "AND worker_id = (SELECT min(id) FROM procrastinate_workers)",
    )[0][0]


def sandboxes(pid: int) -> int:
    """How many children the process has now (its candidates' sandboxes)."""
    found = 0
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            found += int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid
        except (OSError, IndexError, ValueError):
            continue
    return found


def when(check: Callable[[], Any], seconds: float = 30.0) -> Any:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("it never happened")


def in_background(work: Callable[[], Any]) -> Callable[[], Any]:
    """`work` on a thread; the returned call waits for its result (or raises its exception)."""
    done: dict[str, Any] = {}

    def run() -> None:
        try:
            done["result"] = work()
        except BaseException as exc:
            done["error"] = exc

    thread = threading.Thread(target=run)
    thread.start()

    def result() -> Any:
        thread.join(timeout=120)
        assert not thread.is_alive(), "the trial never ended"
        if "error" in done:
            raise done["error"]
        return done["result"]

    return result


def test_a_worker_killed_mid_run_changes_no_count(
    home: Home, tmp_path: Path, queue_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    tasks, candidate = invoices(home, 3), slow_candidate(tmp_path, 1.0)
    first = workers("w1", "--concurrency", "4")
    workers("w2", "--concurrency", "2")
    refused: list[str] = []
    result = in_background(lambda: trial(home, tasks, candidate, 2, executor(home, queue_url, refused=refused.append)))
    when(lambda: held_by_first(queue_url) > 0)
    first.process.kill()  # SIGKILL: no goodbye, its beat just stops
    queued = result()
    assert counts(queued) == counts(trial(home, tasks, slow_candidate(tmp_path, 0), 2))
    assert queued.errored == 0 and queued.judged == 6
    assert refused == []


def test_a_trial_s_runs_share_jobs_and_reach_every_worker_whatever_the_loop_s_concurrency(
    home: Home, tmp_path: Path, queue_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    tasks, candidate = invoices(home, 3), slow_candidate(tmp_path, 0.5)
    both = [workers("w1", "--concurrency", "2"), workers("w2", "--concurrency", "2")]
    ex = executor(home, queue_url, refused=print)
    profile = load_profile(home, PROFILE)
    seen: list[tuple[list[int], list[int]]] = []  # each look: jobs' sizes, each worker's sandboxes

    async def go() -> TrialResult:
        trial = asyncio.ensure_future(
            run_trials(
                variant_of(profile),
                tasks,
                candidate,
                model_factory(home, profile.dir),
                runs=4,
                concurrency=1,
                executor=ex,
            )
        )
        while not trial.done():
            sizes = rows(queue_url, "SELECT jsonb_array_length(args->'runs') FROM procrastinate_jobs")
            seen.append(([size for (size,) in sizes], [sandboxes(w.process.pid) for w in both]))
            await asyncio.sleep(0.05)
        return await trial

    queued = asyncio.run(through(ex, go))
    assert counts(queued) == counts(trial(home, tasks, slow_candidate(tmp_path, 0), 4))
    sizes = [size for look, _ in seen for size in look]
    assert 1 < max(sizes) <= BATCH  # runs shared jobs
    running = [each for _, each in seen]
    assert max(min(each) for each in running) > 0  # both workers at once, though the loop ran one
    assert max(max(each) for each in running) == 2  # each as many as its --concurrency, no more
    assert sum(answered(w.stop()) for w in both) == 12


def test_a_job_a_worker_cannot_make_runs_of_is_named_and_left_unanswered(
    home: Home, tmp_path: Path, queue_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    asyncio.run(prepare(QueueAddress.parse(queue_url)))
    reply = "agentd_answers_" + "0" * 16
    run = {"task": "0" * 64, "variant": "0" * 64, "candidate": {"kind": "agent"}, "limits": {}, "retries": 0}
    bad = [
        {"runs": [run], "reply": "nobody"},
        {"runs": "all of them", "reply": reply},
        {"runs": [run] * (BATCH + 1), "reply": reply},
        {"runs": [run], "reply": reply},  # what it names is not on the queue
    ]
    job = {"task_name": RUN_TASK, "priority": 0, "lock": None, "queueing_lock": None, "scheduled_at": None}
    address = QueueAddress.parse(queue_url)
    with psycopg.connect(POSTGRES_URL, autocommit=True, options=f"-csearch_path={address.schema}") as conn:
        for args in bad:
            conn.execute(DEFER, {**job, "queue_name": address.queue, "args": json.dumps(args)})
    worker = workers("w1")
    said = [worker.wait_for(": not run: ") for _ in bad]
    assert any("it names no loop to answer ('nobody')" in line for line in said)
    assert sum(f"it holds no list of 1 to {BATCH} runs" in line for line in said) == 2
    assert any("the queue holds nothing under digest" in line for line in said)
    assert rows(queue_url, "SELECT count(*) FROM agentd_answers") == [(0,)]
    tasks = invoices(home, 1)  # and it goes on claiming
    assert trial(home, tasks, slow_candidate(tmp_path, 0), 2, executor(home, queue_url, refused=print)).judged == 2


def test_a_stale_lease_is_refused_and_named(
    home: Home, tmp_path: Path, queue_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    tasks, candidate = invoices(home, 1), slow_candidate(tmp_path, 2.0)
    both = [workers("w1"), workers("w2")]
    refused: list[str] = []
    result = in_background(lambda: trial(home, tasks, candidate, 1, executor(home, queue_url, refused=refused.append)))
    holder = when(lambda: next((w for w in both if sandboxes(w.process.pid)), None))  # its candidate under way
    holder.process.send_signal(signal.SIGSTOP)  # cut off: no beat, and it cannot answer
    when(lambda: rows(queue_url, "SELECT count(*) FROM procrastinate_jobs WHERE status = 'doing'")[0][0] == 2)
    holder.process.send_signal(signal.SIGCONT)  # back, its candidate done: its answer comes first
    queued = result()
    assert counts(queued) == {tasks[0].name: (0, 1, 0)}
    assert len(refused) == 1
    assert f"worker {holder.wallet.id}'s result for job" in refused[0]
    assert "its lease is stale (the run was handed out again, as job" in refused[0]


def test_an_answer_that_comes_before_its_job_s_number_is_taken_once_the_number_is_back(
    home: Home, tmp_path: Path, queue_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    tasks, candidate = invoices(home, 2), slow_candidate(tmp_path, 0)
    workers("w1")
    refused: list[str] = []
    ex = executor(home, queue_url, refused=refused.append)
    profile = load_profile(home, PROFILE)

    async def go() -> TrialResult:
        defer = ex.app.job_manager.defer_job_async

        async def slow_to_hear(job: Any) -> Any:
            deferred = await defer(job)
            # As a busy process may be: its job's number back only once the answer is taken.
            while rows(
                queue_url, "SELECT 1 FROM procrastinate_jobs WHERE id = %s AND status <> 'succeeded'", deferred.id
            ) or rows(queue_url, "SELECT 1 FROM agentd_answers WHERE job = %s", deferred.id):
                await asyncio.sleep(0.05)
            return deferred

        ex.app.job_manager.defer_job_async = slow_to_hear  # type: ignore[method-assign]
        return await run_trials(
            variant_of(profile), tasks, candidate, model_factory(home, profile.dir), runs=2, executor=ex
        )

    result = asyncio.run(through(ex, go))
    assert refused == []  # not "this loop gave out no such job"
    assert counts(result) == counts(trial(home, tasks, candidate, 2))


def test_an_answer_no_loop_took_for_a_day_is_removed_when_the_next_process_starts(queue_url: str) -> None:
    asyncio.run(prepare(QueueAddress.parse(queue_url)))
    for age in ("2 days", "1 hour"):
        rows(
            queue_url,
            "INSERT INTO agentd_answers (reply, job, signed, at) VALUES (%s, 1, '{}', now() - %s::interval) RETURNING id",
            "agentd_answers_" + "0" * 16,  # a killed loop's
            age,
        )
    asyncio.run(prepare(QueueAddress.parse(queue_url)))
    left = rows(queue_url, "SELECT now() - at < interval '1 day' FROM agentd_answers")
    assert left == [(True,)]


def test_the_queue_keeps_no_history_of_its_jobs(queue_url: str) -> None:
    for _ in range(2):  # the second process to prepare finds it done
        asyncio.run(prepare(QueueAddress.parse(queue_url)))
    (job,) = rows(
        queue_url,
        "SELECT unnest(procrastinate_defer_jobs_v1(ARRAY[ROW('q', %s, 0, NULL, NULL, '{}', NULL)"
        "::procrastinate_job_to_defer_v1]))",
        RUN_TASK,
    )
    for status in ("doing", "succeeded"):  # as procrastinate moves a job on
        rows(queue_url, "UPDATE procrastinate_jobs SET status = %s WHERE id = %s RETURNING id", status, job[0])
    assert rows(queue_url, "SELECT status::text FROM procrastinate_jobs") == [("succeeded",)]
    assert rows(queue_url, "SELECT type::text FROM procrastinate_events") == []


def test_a_built_tree_shipped_to_a_worker_keeps_its_compiled_modules(tmp_path: Path) -> None:
    built = tmp_path / "built" / "pkg"
    built.mkdir(parents=True)
    (built / "__init__.py").write_text("ANSWER = 42\n")
    os.utime(built / "__init__.py", (1_700_000_000, 1_700_000_000))  # as a checkout's time, not now
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(built)], check=True)
    unpack_tree(tree_blob(built.parent)[1], tmp_path / "shipped")
    imported = subprocess.run(
        [sys.executable, "-v", "-c", "import pkg; print(pkg.ANSWER)"],
        cwd=tmp_path / "shipped",
        env={**_env(), "PYTHONPATH": str(tmp_path / "shipped")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert imported.stdout == "42\n"
    shipped_cache = str(tmp_path / "shipped" / "pkg" / "__pycache__")
    assert any(line.startswith(f"# {shipped_cache}") and " matches " in line for line in imported.stderr.splitlines())


def test_a_tree_comes_out_of_the_queue_as_it_went_in_and_packs_the_same_each_time(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "bin").mkdir(parents=True)
    (tree / "bin" / "run").write_text("#!/bin/sh\necho ran\n")
    (tree / "bin" / "run").chmod(0o755)
    (tree / "data.txt").write_bytes(b"\x00 bytes \xff")
    (tree / "again").symlink_to("bin/run")
    os.utime(tree / "data.txt", (1_700_000_000.75, 1_700_000_000.75))
    (key, body), (again, _) = tree_blob(tree), tree_blob(tree)
    assert key == again
    unpack_tree(body, tmp_path / "out")
    out = tmp_path / "out"
    assert (out / "data.txt").read_bytes() == b"\x00 bytes \xff"
    assert (out / "data.txt").stat().st_mtime == 1_700_000_000  # to the second, as a compiled module holds it
    assert os.access(out / "bin" / "run", os.X_OK) and not os.access(out / "data.txt", os.X_OK)
    assert os.readlink(out / "again") == "bin/run"
    assert subprocess.run([str(out / "again")], capture_output=True, text=True).stdout == "ran\n"


def test_the_queue_s_commits_wait_for_no_disk_but_a_halt_s_do(queue_url: str) -> None:
    address = QueueAddress.parse(queue_url)
    asyncio.run(prepare(address))

    async def settings() -> list[Any]:
        app = address.app()
        async with app.open_async():
            said = [await app.connector.execute_query_one_async("SHOW synchronous_commit")]
            said.append(await app.connector.execute_query_one_async(f"SELECT * FROM {DURABLY}"))
            said.append(await app.connector.execute_query_one_async("SHOW synchronous_commit"))
            await set_halt(app, address.queue, "enough")
        async with await address.connect() as listening:  # where a loop takes its answers
            said.append(await (await listening.execute("SHOW synchronous_commit")).fetchone())
        return said

    queue_session, in_a_halt, after_it, taking = asyncio.run(settings())
    assert queue_session == after_it == {"synchronous_commit": "off"} and taking == ("off",)
    assert in_a_halt == {"set_config": "on"}
    assert rows(queue_url, "SELECT reason FROM agentd_halts") == [("enough",)]
    with psycopg.connect(POSTGRES_URL) as other:  # a shared ledger's sessions keep the server's own
        assert other.execute("SHOW synchronous_commit").fetchone() == ("on",)


def test_a_queue_name_is_at_most_what_postgresql_can_announce_a_job_on(queue_url: str) -> None:
    longest = "q" * QUEUE_LONGEST
    address = QueueAddress.parse(f"{queue_url}&queue={longest}")
    asyncio.run(prepare(address))
    job = {"task_name": RUN_TASK, "priority": 0, "lock": None, "queueing_lock": None, "scheduled_at": None}
    with psycopg.connect(POSTGRES_URL, autocommit=True, options=f"-csearch_path={address.schema}") as conn:
        for queue in (address.queue, address.sealed_queue):  # each job announced on its queue's channel
            conn.execute(DEFER, {**job, "queue_name": queue, "args": "{}"})
    with pytest.raises(WrongValue, match=f"is {QUEUE_LONGEST + 1} characters: give at most {QUEUE_LONGEST}"):
        QueueAddress.parse(f"{queue_url}&queue={longest}q")


def test_the_kill_switch_reaches_the_workers_before_their_next_claim(
    home: Home, tmp_path: Path, queue_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    tasks, candidate = invoices(home, 3), slow_candidate(tmp_path, 2.0)
    worker = workers("w1", "--concurrency", "1")
    ex = executor(home, queue_url, refused=print)
    profile = load_profile(home, PROFILE)
    claimed: list[tuple[str, int]] = []

    async def go() -> None:
        run = asyncio.ensure_future(
            run_trials(variant_of(profile), tasks, candidate, model_factory(home, profile.dir), runs=2, executor=ex)
        )
        while not rows(queue_url, "SELECT id FROM procrastinate_jobs WHERE status = 'doing'"):
            await asyncio.sleep(0.05)
        killswitch.turn_on(home, "enough")
        with pytest.raises(Halted, match="the kill switch is on"):
            await run
        claimed.extend(
            rows(
                queue_url,
                "SELECT status::text, count(*), sum(jsonb_array_length(args->'runs')) FROM procrastinate_jobs GROUP BY 1",
            )
        )

    asyncio.run(through(ex, go))
    # One job was under way on the worker's one slot; none of the others was claimed.
    jobs = {status: count for status, count, _ in claimed}
    assert jobs.pop("cancelled", 0) >= 1 and jobs in ({"doing": 1}, {"aborted": 1})
    assert sum(runs for _, _, runs in claimed) == 6
    assert rows(queue_url, "SELECT reason FROM agentd_halts")[0][0].startswith("the kill switch is on")
    worker.wait_for("claiming nothing: the kill switch is on")
    killswitch.turn_off(home)
    again = trial(home, tasks[:1], slow_candidate(tmp_path, 0), 1, executor(home, queue_url, refused=print))
    assert again.judged == 1
    worker.wait_for("claiming runs again")


def test_a_run_is_not_called_off_by_the_kill_switch_of_a_queue_of_its_name_in_another_schema(
    home: Home, tmp_path: Path, queue_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    tasks, candidate = invoices(home, 1), slow_candidate(tmp_path, 2.0)
    workers("w1")
    ex = executor(home, queue_url, refused=print)
    profile = load_profile(home, PROFILE)
    ended: list[tuple[str]] = []

    async def go(elsewhere: str) -> None:
        run = asyncio.ensure_future(
            run_trials(variant_of(profile), tasks, candidate, model_factory(home, profile.dir), runs=1, executor=ex)
        )
        while not (doing := rows(queue_url, "SELECT id FROM procrastinate_jobs WHERE status = 'doing'")):
            await asyncio.sleep(0.05)
        await prepare(QueueAddress.parse(elsewhere))
        # The other queue's loop calls off its run of the same number (its kill switch), which
        # procrastinate announces on the channel both queues' workers hear.
        rows(
            elsewhere,
            "INSERT INTO procrastinate_jobs (id, queue_name, task_name, status) VALUES (%s, 'runs', 'x', 'doing') RETURNING id",
            doing[0][0],
        )
        rows(elsewhere, "SELECT procrastinate_cancel_job_v1(%s, true, false)", doing[0][0])
        await run
        ended.extend(rows(queue_url, "SELECT status::text FROM procrastinate_jobs WHERE task_name = %s", RUN_TASK))

    with temporary_store("postgres", tmp_path / "elsewhere") as store:
        schema = unquote(store).rsplit("search_path=", 1)[1]
        asyncio.run(through(ex, lambda: go(f"{POSTGRES_URL}?schema={schema}&queue=runs")))
    assert ended == [("succeeded",)]  # not called off, then handed out again


# Answers that are not what they say.

ROGUE = """
import asyncio, base64, json, sys
import procrastinate
from psycopg.types.json import Jsonb
from agentd.app.trialqueue import ANNOUNCE, ANSWER, QueueAddress, signed_result
from ledger import Wallet

async def main(url, how):
    address = QueueAddress.parse(url)
    app = address.app()
    async with app.open_async():
        me = await app.job_manager.register_worker()
        job = None
        while job is None:
            job = await app.job_manager.fetch_job([address.queue], me)
            await asyncio.sleep(0.05)
        args = dict(job.task_kwargs)
        body = {"job": job.id, "holder": me, "runs": args["runs"], "results": [{}]}
        wallet = Wallet.generate("rogue")
        if how == "forged":
            signed = signed_result(wallet, body)
            signed["key"] = base64.b64encode(Wallet.generate().public_key).decode()
        elif how == "short":
            body["results"] = []
            signed = signed_result(wallet, body)
        elif how == "other-inputs":
            body["runs"][0]["task"] = "0" * 64
            signed = signed_result(wallet, body)
        else:  # a job it does not hold
            body["holder"] = me + 1000
            signed = signed_result(wallet, body)
        await app.connector.execute_query_async(
            f"WITH answer AS ({ANSWER}) SELECT {ANNOUNCE}", reply=args["reply"], job_id=job.id, signed=Jsonb(signed)
        )
        await app.job_manager.finish_job(job, procrastinate.jobs.Status.SUCCEEDED, delete_job=False)
        print(wallet.id, flush=True)

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@pytest.mark.parametrize(
    ("how", "said"),
    [
        ("forged", "a result whose signature does not hold"),
        ("other-inputs", "it is for other inputs than the job's (another job's result)"),
        ("short", "it does not give one result for each of the job's 1 runs"),
        ("not-held", "it holds no lease on that job (another worker claimed it)"),
    ],
)
def test_a_result_that_is_not_what_it_says_is_refused_and_named(
    home: Home, tmp_path: Path, queue_url: str, workers: Callable[..., WorkerProcess], how: str, said: str
) -> None:
    tasks, candidate = invoices(home, 1), slow_candidate(tmp_path, 0)
    refused: list[str] = []
    rogue = subprocess.Popen(
        [sys.executable, "-c", ROGUE, queue_url, how], stdout=subprocess.PIPE, text=True, env=_env()
    )
    result = in_background(lambda: trial(home, tasks, candidate, 1, executor(home, queue_url, refused=refused.append)))
    rogue_id = rogue.communicate(timeout=60)[0].strip()
    workers("w1")  # an honest worker, for the run handed out again
    queued = result()
    assert counts(queued) == {tasks[0].name: (0, 1, 0)}
    assert len(refused) == 1 and said in refused[0]
    if how != "forged":
        assert f"refused worker {rogue_id}'s result for job" in refused[0]


# Sealed tasks go only to workers the seal's owner trusts.


def test_sealed_runs_go_only_to_a_trusted_worker_and_never_sit_in_the_queue_in_the_clear(
    home: Home, tmp_path: Path, queue_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    seal = sealed(home).seal
    task = next(t for t in seal.real_tasks)
    candidate = slow_candidate(tmp_path, 0)
    written = kept_writes(queue_url)
    # A worker that claims sealed runs, not trusted: nothing is sealed to its key, so the
    # runs wait for a trusted one, and none is handed out meanwhile.
    untrusted = workers("untrusted", "--sealed")
    trusted_home = Home(tmp_path / "trusted")
    initialise(trusted_home)
    install_example(trusted_home, PROFILE)
    home.config_path.write_text(f'[trials]\ntrusted = ["{create_wallet(trusted_home, "worker").id}"]\n')
    refused: list[str] = []
    ex = queue_executor(Home(home.root), queue_url, None, frozenset({task.digest}), lambda: None, refused.append)
    assert ex is not None
    result = in_background(lambda: trial(home, [task], candidate, 2, ex))
    time.sleep(3)
    assert rows(queue_url, "SELECT count(*) FROM procrastinate_jobs") == [(0,)]
    assert answered(untrusted.stop()) == 0
    trusted = workers("trusted", "--sealed")
    queued = result()
    assert answered(trusted.stop()) == 2 and refused == []
    assert counts(queued) == counts(trial(home, [task], candidate, 2))
    # What the queue's database was given: the envelopes and the answers, none in the clear.
    sealed_parts = [json.loads(w) for w in written() if w.startswith(b"{") and b'"sealed' in w]
    assert len([p for p in sealed_parts if "sealed_task" in p]) == 2  # an envelope a hand-out
    assert len([p for p in sealed_parts if set(p) == {"sealed"}]) == 2  # an answer a run
    assert not any(task.task.encode() in w for w in written())  # the task's words, in no form
    assert rows(queue_url, "SELECT count(*) FROM agentd_blobs WHERE body LIKE '%%sealed_task%%'") == [(0,)]


def test_a_worker_a_sealed_run_was_not_sealed_to_leaves_it_to_one_it_was(
    home: Home, tmp_path: Path, queue_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    task = next(t for t in sealed(home).seal.real_tasks)
    candidate = slow_candidate(tmp_path, 0)
    untrusted, trusted = workers("untrusted", "--sealed"), workers("trusted", "--sealed")
    home.config_path.write_text(f'[trials]\ntrusted = ["{trusted.wallet.id}"]\n')
    when(lambda: rows(queue_url, "SELECT count(*) FROM agentd_keys") == [(2,)])
    trusted.process.send_signal(signal.SIGSTOP)  # so the untrusted one claims the runs first
    refused: list[str] = []
    ex = queue_executor(Home(home.root), queue_url, None, frozenset({task.digest}), lambda: None, refused.append)
    assert ex is not None
    ex.lease = LEASE
    result = in_background(lambda: trial(home, [task], candidate, 2, ex))
    said = untrusted.wait_for("claiming no sealed run for 60 s")
    assert "was not sealed to this worker's key" in said
    trusted.process.send_signal(signal.SIGCONT)
    queued = result()  # handed out again after a lease, and left to the trusted worker
    assert counts(queued) == counts(trial(home, [task], candidate, 2)) and not queued.errors
    assert answered(trusted.stop()) == 2 and answered(untrusted.stop()) == 0 and refused == []


def kept_writes(url: str) -> Callable[[], list[bytes]]:
    """Every blob and answer written to the queue's tables from now on, kept aside by a
    trigger of the test's (the loop removes its answers and envelopes once done)."""
    asyncio.run(prepare(QueueAddress.parse(url)))
    schema = QueueAddress.parse(url).schema
    with psycopg.connect(POSTGRES_URL, autocommit=True, options=f"-csearch_path={schema}") as conn:
        conn.execute("CREATE TABLE kept_writes (what bytea)")
        conn.execute(
            """CREATE FUNCTION keep_write() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
                   IF TG_TABLE_NAME = 'agentd_blobs' THEN INSERT INTO kept_writes VALUES (NEW.body);
                   ELSE INSERT INTO kept_writes VALUES (convert_to(NEW.signed::text, 'UTF8'));
                   END IF;
                   RETURN NEW; END $$"""
        )
        for table in ("agentd_blobs", "agentd_answers"):
            conn.execute(
                f"CREATE TRIGGER keep_write AFTER INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION keep_write()"
            )
    return lambda: [bytes(what) for (what,) in rows(url, "SELECT what FROM kept_writes")]


# The database down.


def test_a_worker_whose_connections_the_server_ended_claims_on_with_new_ones(
    home: Home, tmp_path: Path, queue_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    tasks, candidate = invoices(home, 2), slow_candidate(tmp_path, 0)
    name = f"agentd-test-{tmp_path.name[-12:]}"  # its connections' name, so that they can be ended
    worker = workers("w1", "--concurrency", "2", url=f"{queue_url}&application_name={name}")
    first = trial(home, tasks, candidate, 2, executor(home, queue_url, refused=print))
    ended = rows(
        queue_url, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = %s", name
    )[0][0]
    assert ended >= 2  # its pool's and the one it listens on: as a restart of PostgreSQL ends them
    again = trial(home, tasks, candidate, 2, executor(home, queue_url, refused=print))
    assert counts(again) == counts(first) == counts(trial(home, tasks, candidate, 2))
    assert answered(worker.stop()) == 8


def test_a_queue_that_cannot_be_reached_is_one_line(agentd: Callable[..., Any], home: Home) -> None:
    work = harvested(home)
    r = agentd(
        "improve", "eval", PROFILE, "--tasks", work, "--runs", "1", "--queue", "postgresql://agentd@127.0.0.1:1/x"
    )
    assert r.code == 1
    assert r.err.startswith("agentd: error: the trial queue at postgresql://agentd@127.0.0.1:1/x cannot be reached (")
    assert r.err.rstrip().endswith("; start its database") and r.err.count("\n") == 1


class Proxy:
    """A TCP relay to the test database, listening on `host`: the only way to it for those
    given its port, cut when `cut` is called."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.server = socket.create_server((host, 0))
        self.port = self.server.getsockname()[1]
        self.open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", 5432))
            self.open += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self.server.close()
        for s in self.open:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)


def test_the_database_going_down_stops_the_trial_with_one_line(
    home: Home, tmp_path: Path, queue_url: str, workers: Callable[..., WorkerProcess]
) -> None:
    tasks, candidate = invoices(home, 2), slow_candidate(tmp_path, 2.0)
    workers("w1")
    proxy = Proxy()
    through_proxy = queue_url.replace("127.0.0.1:5432", f"127.0.0.1:{proxy.port}")
    ex = executor(home, through_proxy, refused=print)
    profile = load_profile(home, PROFILE)
    trials = Trials(
        candidate=lambda variant: candidate,
        models=model_factory(home, profile.dir),
        limits=profile.limits,
        concurrency=8,
        halted=lambda: None,
        left_as="the archive and the seal are as the last finished step left them",
        executor=ex,
    )

    async def go() -> None:
        run = asyncio.ensure_future(trials.trial(variant_of(profile), tasks, 2))
        while not rows(queue_url, "SELECT id FROM procrastinate_jobs WHERE status = 'doing'"):
            await asyncio.sleep(0.05)
        proxy.cut()
        with pytest.raises(Stop) as stopped:
            await run
        said = str(stopped.value)
        assert said.startswith(
            f"the trial queue at postgresql://postgres@127.0.0.1:{proxy.port}/test cannot be reached ("
        )
        assert said.endswith("; start its database; the archive and the seal are as the last finished step left them")
        assert "\n" not in said

    asyncio.run(through(ex, go))
