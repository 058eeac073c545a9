"""A loop's runs through the trial queue (agentd/app/trialqueue.py): the executor on the
loop's side, which stays the only writer of the ledger.

A trial gives this executor all its runs at once (the workers' own concurrency bounds
their sandboxes), and it hands them out as procrastinate jobs of up to `BATCH` runs each,
each run named by what it needs, by digest. A worker claims a job, runs its runs and
leaves one answer, their `RunResult`s signed by its wallet, under this loop's own name
for its answers, announced on the channel of that name, where the loop listens. An
answer is taken only when its signature holds, it is for a job this loop is waiting on,
from the worker holding that job (procrastinate's own claim), for the inputs the job was
given, and, for a sealed task, from a worker the seal's owner trusts. Anything else is
refused, named in a line, and the runs wait on.

A lease is a job: the runs of a job whose worker stops beating (killed, cut off, stopped
for longer than `lease` seconds), or that ended without an answer taken, are handed out
again in new jobs, and what the old one says afterwards is refused as a stale lease. So a
trial's counts are as if the lost worker had never claimed it. A run given `LEASES`
leases without an answer is counted errored, never failed.

Sealed tasks go only to workers the seal's owner names in `[trials] trusted` (wallet ids
or names), on a queue of their own that only `agentd worker --sealed` claims from; with
none named they run here. A sealed run is handed out alone in its job, encrypted to its
trusted workers' keys, and answered encrypted to this loop's (agentd/app/queuesealing.py). A watcher looks
every quarter second: the loop's kill switch halts the queue (`agentd_halts`, which
workers read before each claim) and its jobs; a database that no longer answers stops
the trial with one line. Every tenth of a lease it looks at the jobs' workers.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import procrastinate
import psycopg
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from psycopg import sql

from agentd.app.agent import AGENT, model_factory
from agentd.app.keydocs import public_hex
from agentd.app.queuesealing import envelope, open_answer
from agentd.app.trialqueue import (
    BATCH,
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


@dataclass(eq=False)
class Out:
    """A run on the queue: its inputs, its answer, the lease it is on (none while it waits
    for one) and how many leases it has had."""

    task: Task
    inputs: dict[str, Any]
    sealed: bool
    done: asyncio.Future[RunResult]
    lease: Lease | None = None
    leases: int = 0


@dataclass(eq=False)
class Lease:
    """A job: the runs handed out in it, and when it was first seen ended with no answer taken."""

    job: int
    runs: list[Out]
    ended: float | None = None

    @property
    def open(self) -> bool:
        """Whether a run still waits on this job for its answer."""
        return any(out.lease is self and not out.done.done() for out in self.runs)


@dataclass
class Stock:
    """What a loop's runs name on the queue: each run's inputs, and the blobs they name by
    digest, each stored once (a built tree packed and sent once, whatever runs it)."""

    app: procrastinate.App
    address: QueueAddress
    agent: Agent
    retries: int
    stored: set[str] = field(default_factory=set)
    storing: asyncio.Lock = field(default_factory=asyncio.Lock)
    specs: dict[tuple[Any, ...], tuple[dict[str, Any], dict[str, bytes]]] = field(default_factory=dict)
    variants: dict[Variant, tuple[str, bytes]] = field(default_factory=dict)

    async def inputs(
        self, task: Task, variant: Variant, candidate: Candidate, limits: EpisodeLimits, sealed: bool
    ) -> dict[str, Any]:
        """A run's inputs, what they name stored (but a sealed task, which goes in an envelope)."""
        spec, blobs = self._spec(candidate)
        if variant not in self.variants:
            self.variants[variant] = blob(canonical(variant.to_json()))
        variant_key, variant_body = self.variants[variant]
        blobs = {**blobs, variant_key: variant_body}
        if not sealed:
            blobs[task.digest] = canonical(task.content())
        await self.store(blobs)
        return {
            "task": task.digest,
            "variant": variant_key,
            "candidate": spec,
            "limits": asdict(limits),
            "retries": self.retries,
        }

    async def store(self, blobs: dict[str, bytes]) -> None:
        """The blobs the queue may not hold yet, stored; one run at a time, so that the runs
        a trial starts together send a built tree once, not once each."""
        if self.stored.issuperset(blobs):
            return
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
    batch: int = BATCH

    async def __aenter__(self) -> QueueExecutor:
        await prepare(self.address)
        self.app = self.address.app()
        self.stock = Stock(self.app, self.address, self.agent, self.retries)
        self.reply = new_reply()
        self.leases: dict[int, Lease] = {}  # the jobs runs wait on, by number
        self.given: dict[int, Lease] = {}  # every job handed out
        self.live: set[Out] = set()  # the runs the trial waits for
        self.waiting: deque[Out] = deque()  # runs to hand out, sealed ones aside
        self.sealing = asyncio.Lock()
        self.handing_out: asyncio.Future[None] | None = None
        self.handing = 0  # hand-outs whose job's number has not come back yet
        self.early: list[tuple[Any, Any, Any]] = []  # answers taken before their job's number came back
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
        if self.handing_out is not None:
            self.handing_out.cancel()
        if not isinstance(self.broken, ExecutorFailed):  # the database still answers
            with contextlib.suppress(Exception):
                await self._tidy()
        self.listener.cancel()
        with contextlib.suppress(BaseException):
            await self.listener
        with contextlib.suppress(Exception):
            await self.app.close_async()

    def remote(self, task: Task) -> bool:
        """Every run goes to a worker, whose own concurrency bounds its sandboxes, but a
        sealed task's when no worker is trusted with it. So a trial gives this executor all
        its runs at once: they share jobs, and every worker has runs to claim."""
        return task.digest not in self.sealed or bool(self.trusted)

    async def run(self, task: Task, variant: Variant, candidate: Candidate, limits: EpisodeLimits) -> RunResult:
        sealed = task.digest in self.sealed
        if sealed and not self.trusted:
            return await self.local.run(task, variant, candidate, limits)
        if self.broken is not None:
            raise self.broken
        inputs = await self.stock.inputs(task, variant, candidate, limits, sealed)
        out = Out(task, inputs, sealed, asyncio.get_running_loop().create_future())
        self.live.add(out)
        try:
            if self.broken is not None:
                raise self.broken
            if sealed:  # alone in its job: its envelope is its own
                await self._defer([out])
            else:
                self._wait(out)
            return await out.done
        except asyncio.CancelledError:
            out.done.cancel()
            if out.lease is not None and not out.lease.open:
                await self._call_off(out.lease)
            raise
        finally:
            self.live.discard(out)

    def _wait(self, out: Out) -> None:
        self.waiting.append(out)
        if self.handing_out is None or self.handing_out.done():
            self.handing_out = asyncio.ensure_future(self._hand_out())

    async def _hand_out(self) -> None:
        """The runs waiting handed out, up to `batch` to a job: those that come while one job
        is deferred go together in the next. So the runs a trial gives at once share jobs,
        and a run that comes alone waits for no other."""
        try:
            while self.waiting:
                runs = [self.waiting.popleft()]
                while len(runs) < self.batch and self.waiting and self.waiting[0].task.profile == runs[0].task.profile:
                    runs.append(self.waiting.popleft())
                runs = [out for out in runs if not out.done.done()]
                if runs:
                    await self._defer(runs)
        except ExecutorFailed as exc:
            self._break(exc)
        except Exception as exc:  # the runs would wait for ever: the trial stops instead, none scored
            self._break(ExecutorFailed(f"runs could not be handed out ({type(exc).__name__}: {exc})"))

    async def _defer(self, runs: list[Out]) -> None:
        """A new lease on `runs` (of one profile, or one sealed run): a job a worker may claim."""
        args = {"runs": [out.inputs for out in runs], "profile": runs[0].task.profile, "reply": self.reply}
        if runs[0].sealed:  # one at a time: each may wait for a trusted worker's key
            async with self.sealing:
                key, body = await envelope(
                    self.app.connector, self.address.sealed_queue, self.trusted, runs[0].task, self
                )
            await self.stock.store({key: body})
            self.envelopes.add(key)
            args |= {"envelope": key, "reply_key": public_hex(self.opener)}
        made = terse_job(self.address.sealed_queue if runs[0].sealed else self.address.queue, RUN_TASK, args)
        self.handing += 1
        try:
            with reaching(self.address):
                deferred = await self.app.job_manager.defer_job_async(made)
        finally:
            self.handing -= 1
        assert deferred.id is not None  # a job deferred has its id
        lease = Lease(deferred.id, runs)
        for out in runs:
            out.lease, out.leases = lease, out.leases + 1
        self.leases[lease.job] = self.given[lease.job] = lease
        if not lease.open:  # the trial stopped waiting for its runs meanwhile
            await self._call_off(lease)
        if not self.handing and self.early:
            early, self.early = self.early, []
            for answer in early:
                self._deliver(*answer)

    async def _call_off(self, lease: Lease) -> None:
        """A job whose runs the trial no longer waits for, called off."""
        self.leases.pop(lease.job, None)
        if self.broken is None:
            with contextlib.suppress(Exception):
                await asyncio.shield(self.app.job_manager.cancel_job_by_id_async(lease.job, abort=True))

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
            lease, results = checked(self.given, worker, body, named, held_by, self.trusted)
        except Refused as exc:
            self.on_refused(f"refused {exc}")
        else:
            for out, result in zip(lease.runs, results, strict=True):
                if not out.done.done():
                    out.done.set_result(result)
        watched = self.leases.get(named)
        if watched is not None and not watched.open:  # answered, or its runs errored
            del self.leases[named]

    async def _watch(self) -> None:
        """Every WATCH seconds the kill switch and the answers' listener (which ends when its
        connection to the database fails); every tenth of a lease the jobs' workers, a look
        whose cost grows with the jobs out."""
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
        """Hands out again the runs of each job whose worker stopped beating, or that ended
        with no answer taken."""
        if not self.leases:
            return
        with reaching(self.address):
            rows = await self.app.connector.execute_query_all_async(JOBS, ids=list(self.leases), lease=self.lease)
        now = time.monotonic()
        for row in rows:
            lease = self.leases.get(row["id"])
            if lease is None or not lease.open:
                continue
            if row["lost"]:
                await self._lost(lease, "its worker stopped beating")
            elif row["status"] not in ("todo", "doing"):
                lease.ended = lease.ended or now
                if now - lease.ended >= self.lease:  # its answer, if one was sent, has had time to arrive
                    await self._lost(lease, f"its job ended ({row['status']}) with no answer taken")

    async def _lost(self, lease: Lease, why: str) -> None:
        """The job's runs that wait on it handed out again, or counted errored after LEASES leases."""
        del self.leases[lease.job]
        for out in lease.runs:
            if out.lease is not lease or out.done.done():
                continue
            out.lease = None  # what the job says afterwards is stale
            if out.leases >= LEASES:
                out.done.set_result(_errored(out.task, f"no worker answered it in {LEASES} leases (the last: {why})"))
            elif out.sealed:
                await self._defer([out])
            else:
                self._wait(out)

    async def _halt(self, why: str) -> None:
        """The kill switch: no worker claims from the queue, this loop's jobs are called off,
        and the trial stops as it would here."""
        with contextlib.suppress(Exception):
            await set_halt(self.app, self.address.queue, why)
            for job in list(self.leases):
                await self.app.job_manager.cancel_job_by_id_async(job, abort=True)
        self._break(Halted(why))

    def _break(self, why: ExecutorFailed | Halted) -> None:
        self.broken = why
        for out in list(self.live):
            if not out.done.done():
                out.done.set_exception(why)

    async def _tidy(self) -> None:
        """The jobs this loop gave out that have ended, and the answers no one took, removed."""
        with reaching(self.address):
            await self.app.connector.execute_query_async(
                TIDY, ids=list(self.given), reply=self.reply, envelopes=list(self.envelopes)
            )


def checked(
    given: dict[int, Lease], worker: str, body: dict[str, Any], named: Any, held_by: Any, trusted: frozenset[str]
) -> tuple[Lease, list[RunResult]]:
    """The job a worker's answer is for, and the results it gives its runs; Refused naming
    the worker and why not. (A sealed run answered by a worker not trusted with it is
    counted errored too: its task was opened where it should not have been.)"""
    job = body.get("job")
    who = f"worker {worker}'s result for job {job}"
    lease = given.get(job) if isinstance(job, int) else None
    if lease is None:
        raise Refused(f"{who}: this loop gave out no such job")
    moved = [out.lease for out in lease.runs if out.lease is not lease]
    if moved:
        again = f", as job {moved[0].job}" if moved[0] is not None else ""
        raise Refused(f"{who}: its lease is stale (the run was handed out again{again})")
    if not lease.open:
        raise Refused(f"{who}: its runs have their results already")
    if named != job or held_by is None or held_by != body.get("holder"):
        raise Refused(f"{who}: it holds no lease on that job (another worker claimed it)")
    if body.get("runs") != [out.inputs for out in lease.runs]:
        raise Refused(f"{who}: it is for other inputs than the job's (another job's result)")
    if lease.runs[0].sealed and worker not in trusted:
        for out in lease.runs:
            if not out.done.done():
                out.done.set_result(
                    _errored(out.task, f"run by worker {worker}, which is not trusted with sealed tasks")
                )
        raise Refused(f"{who}: that worker is not trusted with sealed tasks ([trials] trusted)")
    results = body.get("results")
    if not isinstance(results, list) or len(results) != len(lease.runs):
        raise Refused(f"{who}: it does not give one result for each of the job's {len(lease.runs)} runs")
    try:
        made = [run_result_from_json(result) for result in results]
    except ImproverError as exc:
        raise Refused(f"{who}: {exc}") from None
    for out, result in zip(lease.runs, made, strict=True):
        if result.task != out.task.name:
            raise Refused(f"{who}: it is a run of task {result.task[:40]}, not of {out.task.name}")
    return lease, made


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
