"""A loop's runs through the trial queue (agentd/app/trialqueue.py): the executor on the
loop's side, which stays the only writer of the ledger.

Each run is a procrastinate job on the queue naming what it needs by digest; a worker
claims it, runs it and leaves its answer, the `RunResult` signed by its wallet, under
this loop's own name for its answers, announced on the channel of that name, where the
loop listens. An answer is taken only when its signature holds, it is for a job
this loop is waiting on, from the worker holding that job (procrastinate's own claim),
for the inputs the job was given, and, for a sealed task, from a worker the seal's owner
trusts. Anything else is refused, named in a line, and the run waits on.

A lease is a job: a run whose worker stops beating (killed, cut off, stopped for longer
than `lease` seconds), or whose job ended without an answer taken, is handed out again
as a new job, and what the old one says afterwards is refused as a stale lease. So a
trial's counts are as if the lost worker had never claimed it. After `LEASES` leases
without an answer the run is counted errored, never failed.

Sealed tasks go only to workers the seal's owner names in `[trials] trusted` (wallet ids
or names), on a queue of their own that only `agentd worker --sealed` claims from; with
none named they run here. A sealed run is handed out encrypted to its trusted workers'
keys and answered encrypted to this loop's (agentd/app/queuesealing.py). A watcher looks
every quarter second: the loop's kill switch halts the queue (`agentd_halts`, which
workers read before each claim) and its jobs; a database that no longer answers stops
the trial with one line. Every tenth of a lease it looks at the jobs' workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import psycopg
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from psycopg import sql

from agentd.app.agent import AGENT, model_factory
from agentd.app.keydocs import public_hex
from agentd.app.queuesealing import envelope, open_answer
from agentd.app.trialqueue import (
    RUN_TASK,
    QueueAddress,
    Refused,
    blob,
    candidate_spec,
    new_reply,
    opened_result,
    prepare,
    put_blobs,
    reaching,
    set_halt,
    terse_job,
)
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.wallets import wallet_id_of
from improver import (
    RUN_RETRIES,
    Agent,
    Candidate,
    EpisodeLimits,
    Executor,
    ExecutorFailed,
    Halted,
    ImproverError,
    LocalExecutor,
    Run,
    RunResult,
    Task,
    Variant,
    canonical,
    memoized_models,
    run_result_from_json,
)

LEASE = 30.0  # seconds without a worker's heartbeat before its runs are handed out again (procrastinate's own)
LEASES = 3  # times a run is handed out before it is counted errored
WATCH = 0.25  # seconds between the watcher's looks
REPLY_POLL = 1.0  # seconds between looks for answers when no notice came (as a worker's CLAIM_POLL)
T = TypeVar("T")

# The jobs this loop waits on: their status, and whether the worker holding one stopped beating.
JOBS = """
SELECT j.id, j.status::text AS status, j.worker_id,
       j.status = 'doing' AND (w.id IS NULL OR w.last_heartbeat < now() - make_interval(secs => %(lease)s)) AS lost
  FROM procrastinate_jobs j LEFT JOIN procrastinate_workers w ON w.id = j.worker_id
 WHERE j.id = ANY(%(ids)s)
"""

# The answers left for this loop, taken (removed), each with the database's word on who holds
# the job it names, read in the same statement (whatever the answer itself says).
TAKE = """
DELETE FROM agentd_answers a WHERE a.reply = %(reply)s
RETURNING a.job, a.signed, (SELECT j.worker_id FROM procrastinate_jobs j WHERE j.id = a.job) AS held_by
"""

# What a loop leaves on the queue when it ends: its answers no one took, its sealed tasks'
# envelopes, and the jobs it gave out that have ended.
TIDY = """
WITH left_over AS (DELETE FROM agentd_answers WHERE reply = %(reply)s),
     envelopes AS (DELETE FROM agentd_blobs WHERE digest = ANY(%(envelopes)s))
DELETE FROM procrastinate_jobs WHERE id = ANY(%(ids)s) AND status NOT IN ('todo', 'doing')
"""


@dataclass
class Out:
    """A run out on the queue: its current job (lease), every job it was given, its answer."""

    task: Task
    inputs: dict[str, Any]
    queue: str
    sealed: bool
    done: asyncio.Future[RunResult]
    job: int = 0
    jobs: list[int] = field(default_factory=list)
    ended: float | None = None  # when its job was first seen ended with no answer taken


@dataclass
class QueueExecutor:
    """The `Executor` that hands runs to workers; used as `async with` around the loop."""

    address: QueueAddress
    local: Executor  # where a sealed task runs when no worker is trusted with it
    agent: Agent = AGENT  # the in-process candidate a worker runs as its own
    sealed: frozenset[str] = frozenset()  # the sealed tasks' digests
    trusted: frozenset[str] = frozenset()  # the wallet ids trusted with them
    halted: Callable[[], str | None] = lambda: None
    on_refused: Callable[[str], None] = lambda line: None
    lease: float = LEASE
    retries: int = RUN_RETRIES

    async def __aenter__(self) -> QueueExecutor:
        await prepare(self.address)
        self.app = self.address.app()
        self.reply = new_reply()
        self.out: dict[int, Out] = {}  # by current job
        self.given: dict[int, Out] = {}  # by every job handed out
        self.handing = 0  # hand-outs whose job's number has not come back yet
        self.early: list[tuple[Any, Any, Any]] = []  # answers taken before their job's number came back
        self.stored: set[str] = set()
        self.storing = asyncio.Lock()
        self.specs: dict[tuple[Any, ...], tuple[dict[str, Any], dict[str, bytes]]] = {}
        self.variants: dict[Variant, tuple[str, bytes]] = {}
        self.broken: ExecutorFailed | Halted | None = None
        # What sealed runs' answers are encrypted to; their envelopes, removed at the end.
        self.opener, self.envelopes = X25519PrivateKey.generate(), set[str]()
        with reaching(self.address):
            await self.app.open_async()
            if self.halted() is None:  # the kill switch is off: lift a halt it left
                await set_halt(self.app, self.address.queue, None)
            listening = await self.address.connect()
            await listening.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.reply)))
        self.listener = asyncio.ensure_future(take_answers(listening, self.reply, self._deliver))
        self.watcher = asyncio.ensure_future(self._watch())
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.watcher.cancel()
        if not isinstance(self.broken, ExecutorFailed):  # the database still answers
            with contextlib.suppress(Exception):
                await self._tidy()
        self.listener.cancel()
        with contextlib.suppress(BaseException):
            await self.listener
        with contextlib.suppress(Exception):
            await self.app.close_async()

    async def run(self, task: Task, variant: Variant, candidate: Candidate, limits: EpisodeLimits) -> RunResult:
        sealed = task.digest in self.sealed
        if sealed and not self.trusted:
            return await self.local.run(task, variant, candidate, limits)
        if self.broken is not None:
            raise self.broken
        spec, blobs = self._spec(candidate)
        if variant not in self.variants:
            self.variants[variant] = blob(canonical(variant.to_json()))
        variant_key, variant_body = self.variants[variant]
        blobs = {**blobs, variant_key: variant_body}
        if task.digest not in self.stored and not sealed:  # a sealed one goes in an envelope (_hand_out)
            blobs[task.digest] = canonical(task.content())
        inputs = {
            "task": task.digest,
            "variant": variant_key,
            "candidate": spec,
            "limits": asdict(limits),
            "retries": self.retries,
        }
        queue = self.address.sealed_queue if sealed else self.address.queue
        await self._store(blobs)
        out = Out(task, inputs, queue, sealed, asyncio.get_running_loop().create_future())
        await self._hand_out(out)
        try:
            return await out.done
        except asyncio.CancelledError:
            if self.broken is None:
                with contextlib.suppress(Exception):
                    await asyncio.shield(self.app.job_manager.cancel_job_by_id_async(out.job, abort=True))
            raise
        finally:
            self.out.pop(out.job, None)

    async def _store(self, blobs: dict[str, bytes]) -> None:
        """The blobs the queue may not hold yet, stored; one run at a time, so that the runs
        a trial starts together send a built tree once, not once each."""
        async with self.storing:
            missing = {key: body for key, body in blobs.items() if key not in self.stored}
            if missing:
                with reaching(self.address):
                    await put_blobs(self.app, missing)
                self.stored |= missing.keys()

    def _spec(self, candidate: Candidate) -> tuple[dict[str, Any], dict[str, bytes]]:
        """How a worker makes the candidate; a built tree is packed once, whatever runs it."""
        request = getattr(candidate, "request", None)
        key = (
            ("agent", id(candidate))
            if request is None
            else (request.argv, request.tree, request.readable, tuple(sorted(request.env.items())))
        )
        if key not in self.specs:
            self.specs[key] = candidate_spec(candidate, self.agent)
        return self.specs[key]

    async def _hand_out(self, out: Out) -> None:
        """A new lease on the run: a job a worker may claim."""
        args = {**out.inputs, "profile": out.task.profile, "reply": self.reply}
        if out.sealed:
            key, body = await envelope(self.app.connector, self.address.sealed_queue, self.trusted, out.task, self)
            await self._store({key: body})
            self.envelopes.add(key)
            args |= {"envelope": key, "reply_key": public_hex(self.opener)}
        made = terse_job(out.queue, RUN_TASK, args)
        self.handing += 1
        try:
            with reaching(self.address):
                deferred = await self.app.job_manager.defer_job_async(made)
        finally:
            self.handing -= 1
        assert deferred.id is not None  # a job deferred has its id
        job = deferred.id
        self.out.pop(out.job, None)
        out.job, out.ended = job, None
        out.jobs.append(job)
        self.out[job] = out
        self.given[job] = out
        if not self.handing and self.early:
            early, self.early = self.early, []
            for answer in early:
                self._deliver(*answer)

    def _deliver(self, signed: Any, named: Any, held_by: Any) -> None:
        """A worker's answer to job `named`, taken or refused (`held_by` is the database's word
        on who holds that job)."""
        if self.handing and isinstance(named, int) and named not in self.given:
            # A run can be answered before its hand-out has its job's number back (this
            # process busy): the answer waits for the hand-outs under way.
            self.early.append((signed, named, held_by))
            return
        try:
            worker, body = opened_result(open_answer(signed, self.opener, self.reply, named))
            out, result = self._checked(worker, body, named, held_by)
        except Refused as exc:
            self.on_refused(f"refused {exc}")
            return
        if not out.done.done():
            out.done.set_result(result)

    def _checked(self, worker: str, body: dict[str, Any], named: Any, held_by: Any) -> tuple[Out, RunResult]:
        job = body.get("job")
        who = f"worker {worker}'s result for job {job}"
        out = self.given.get(job) if isinstance(job, int) else None
        if out is None:
            raise Refused(f"{who}: this loop gave out no such job")
        if job != out.job:
            raise Refused(f"{who}: its lease is stale (the run was handed out again, as job {out.job})")
        if out.done.done():
            raise Refused(f"{who}: the run has its result already")
        if named != job or held_by is None or held_by != body.get("holder"):
            raise Refused(f"{who}: it holds no lease on that job (another worker claimed it)")
        if body.get("inputs") != out.inputs:
            raise Refused(f"{who}: it is for other inputs than the job's (another job's result)")
        if out.sealed and worker not in self.trusted:
            out.done.set_result(_errored(out.task, f"run by worker {worker}, which is not trusted with sealed tasks"))
            raise Refused(f"{who}: that worker is not trusted with sealed tasks ([trials] trusted)")
        try:
            result = run_result_from_json(body.get("result"))
        except ImproverError as exc:
            raise Refused(f"{who}: {exc}") from None
        if result.task != out.task.name:
            raise Refused(f"{who}: it is a run of task {result.task[:40]}, not of {out.task.name}")
        return out, result

    async def _watch(self) -> None:
        """Every WATCH seconds the kill switch and the answers' listener (which ends when its
        connection to the database fails); every tenth of a lease the jobs' workers, a look
        whose cost grows with the runs out."""
        looked = time.monotonic()
        while True:
            await asyncio.sleep(WATCH)
            why = self.halted()
            if why:
                await self._halt(why)
                return
            if self.listener.done():
                failed = None if self.listener.cancelled() else self.listener.exception()
                self._break(self.address.down(failed or ConnectionError("the answers' listener stopped")))
                return
            if time.monotonic() - looked < self.lease / 10:
                continue
            looked = time.monotonic()
            try:
                async with asyncio.timeout(max(self.lease, 5.0)):
                    await self._leases()
            except ExecutorFailed as exc:
                self._break(exc)
                return
            except TimeoutError:
                self._break(self.address.down(TimeoutError("no answer")))
                return

    async def _leases(self) -> None:
        """Hands out again each run whose worker stopped beating, or whose job ended with no answer taken."""
        if not self.out:
            return
        with reaching(self.address):
            rows = await self.app.connector.execute_query_all_async(JOBS, ids=list(self.out), lease=self.lease)
        now = time.monotonic()
        for row in rows:
            out = self.out.get(row["id"])
            if out is None or out.done.done():
                continue
            if row["lost"]:
                await self._lost(out, "its worker stopped beating")
            elif row["status"] not in ("todo", "doing"):
                out.ended = out.ended or now
                if now - out.ended >= self.lease:  # its answer, if one was sent, has had time to arrive
                    await self._lost(out, f"its job ended ({row['status']}) with no answer taken")

    async def _lost(self, out: Out, why: str) -> None:
        if len(out.jobs) >= LEASES:
            out.done.set_result(_errored(out.task, f"no worker answered it in {LEASES} leases (the last: {why})"))
            return
        await self._hand_out(out)

    async def _halt(self, why: str) -> None:
        """The kill switch: no worker claims from the queue, this loop's jobs are called off,
        and the trial stops as it would here."""
        with contextlib.suppress(Exception):
            await set_halt(self.app, self.address.queue, why)
            for job in list(self.out):
                await self.app.job_manager.cancel_job_by_id_async(job, abort=True)
        self._break(Halted(why))

    def _break(self, why: ExecutorFailed | Halted) -> None:
        self.broken = why
        for out in list(self.out.values()):
            if not out.done.done():
                out.done.set_exception(why)

    async def _tidy(self) -> None:
        """The jobs this loop gave out that have ended, and the answers no one took, removed."""
        with reaching(self.address):
            await self.app.connector.execute_query_async(
                TIDY, ids=list(self.given), reply=self.reply, envelopes=list(self.envelopes)
            )


async def take_answers(
    listening: psycopg.AsyncConnection[Any], reply: str, deliver: Callable[[Any, Any, Any], None]
) -> None:
    """Takes the answers left under `reply` as they come, each given to `deliver` (the
    answer, the job it names, who holds that job): a worker's notice wakes it, and it looks
    every REPLY_POLL seconds whatever came. Ends (with the error) when the database no
    longer answers: the loop's watcher stops the trial then."""
    async with listening:
        while True:
            for job, signed, held_by in await (await listening.execute(TAKE, {"reply": reply})).fetchall():
                deliver(signed, job, held_by)
            async for _ in listening.notifies(timeout=REPLY_POLL, stop_after=1):
                pass


def _errored(task: Task, why: str) -> RunResult:
    return RunResult(task.name, "errored", 0.0, [], Run((), "", "errored"), why, retryable=False)


def queue_executor(
    home: Home,
    url: str | None,
    models_dir: Path | None,
    sealed: frozenset[str],
    halted: Callable[[], str | None],
    on_refused: Callable[[str], None],
) -> QueueExecutor | None:
    """The executor `--queue URL` (else the home's `[trials] queue`) names, with the home's
    `[trials] trusted` and `lease`; None for neither: the runs stay here."""
    url = url or home.trials_queue
    if not url:
        return None
    trusted = home.setting("trials", "trusted") or []
    lease = home.setting("trials", "lease") or LEASE
    if not isinstance(trusted, list) or not all(isinstance(t, str) for t in trusted):
        raise AgentdError(f"{home.config_path}: [trials] trusted must be a list of wallet ids or names")
    if not isinstance(lease, int | float) or isinstance(lease, bool) or lease <= 0:
        raise AgentdError(f"{home.config_path}: [trials] lease must be a number of seconds above 0")
    local = LocalExecutor(memoized_models(model_factory(home, models_dir)))
    return QueueExecutor(
        address=QueueAddress.parse(url),
        local=local,
        sealed=sealed,
        trusted=frozenset(wallet_id_of(home, who) for who in trusted),
        halted=halted,
        on_refused=on_refused,
        lease=float(lease),
    )


async def through(executor: Executor | None, work: Callable[[], Awaitable[T]]) -> T:
    """`work()` with a trial queue's executor open around it (any other: as it is); a
    queue that cannot be reached when it opens is one line."""
    if not isinstance(executor, QueueExecutor):
        return await work()
    try:
        opened = await executor.__aenter__()
    except ExecutorFailed as exc:
        raise AgentdError(str(exc)) from None
    try:
        return await work()
    finally:
        await opened.__aexit__(None, None, None)
