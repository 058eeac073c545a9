"""`agentd worker`: a trial queue's runs (agentd/app/trialqueue.py) run on this machine,
in its own sandbox, with its own models, each answer signed by its wallet.

At start it runs the escape probes of `agentd sandbox check` in its sandbox and runs
nothing if one got out; it makes the queue's tables when they are missing. Then it
claims jobs through procrastinate's worker until SIGTERM or Ctrl-C, which let the runs
under way finish. A job holds up to BATCH runs; the worker runs at most `--concurrency`
at once, whatever jobs they are of, claims no job while it holds as many runs not yet
run, and answers each job once, when its last run ends. `--sealed` claims the sealed
tasks' runs too (a loop takes those only from workers its owner trusts, encrypted to the
key the worker publishes: queuesealing).
Before each claim it asks whether the queue is halted (the kill switch of the loop that
gave the runs) or this home's own kill switch is on: then it claims nothing until both
are off.

A run's task, variant and, for a code round, built tree are fetched by digest and held
to it (a task to its digest, a tree unpacked once into a scratch folder removed when
the worker stops). Its models are made from this home's providers, a `script:` model's
rules read from this home's copy of the task's profile. A job it cannot make a run of
(its inputs missing or not what they say) is answered with nothing: the loop hands its
runs out again. After a sealed run that was not sealed to its key it claims no sealed run
for SEALED_REST seconds, so that the run handed out again goes to a worker it was sealed to.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from procrastinate.connector import BaseConnector
from procrastinate.job_context import JobContext
from procrastinate.jobs import Job, Status
from procrastinate.manager import NotificationCallback
from psycopg.types.json import Jsonb

from agentd.app import killswitch
from agentd.app.agent import AGENT, users_factory
from agentd.app.queuesealing import REFRESH, NotSealedHere, open_task, publish_key, seal_answer, withdraw_key
from agentd.app.runners import sandbox_runner
from agentd.app.trialqueue import (
    ANNOUNCE,
    ANSWER,
    BATCH,
    REPLY,
    RUN_TASK,
    QueueAddress,
    QueueJobs,
    TerseJob,
    blob,
    get_blob,
    prepare,
    reaching,
    signed_result,
    unpack_tree,
)
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.wallets import load_wallet
from improver import (
    TRIAL_CONCURRENCY,
    Candidate,
    Command,
    EpisodeLimits,
    ExecutorFailed,
    ImproverError,
    ModelFactory,
    Task,
    Variant,
    loads_bounded,
    memoized_models,
    parse_task,
    run_result_to_json,
    run_task,
)
from ledger import Wallet
from sandbox import Runner, check_escapes, shell_request

# Seconds between looks for a run to claim when no notice came: a notice of a new job wakes the
# worker at once (none is lost, trialqueue.QueueJobs); a look finds what came while it was not
# listening (its connection to the database lost and made again) and runs a lifted halt let through.
CLAIM_POLL = 1.0
# Seconds a worker claims no sealed run after one was not sealed to its key: it is not trusted
# by that loop, or started after the run was handed out. Meanwhile the run, handed out again,
# is left to a worker it was sealed to, rather than claimed and left again until its leases
# are spent.
SEALED_REST = 60.0
INPUTS = ("task", "variant", "candidate", "limits", "retries")  # what a run's inputs name
# A worker starting removes the rows of workers silent this long. Long, whatever this one's
# beat: a row removed under a live worker (a loop's own, beating every 10 s) fails its next claim.
PRUNE = 600.0


@dataclass(frozen=True)
class Made:
    """A run made from its inputs, ready to run."""

    task: Task
    variant: Variant
    candidate: Candidate
    limits: EpisodeLimits
    retries: int


class SandboxUnsafe(AgentdError):
    """A probe got out of the sandbox: the worker runs nothing (exit 3, as `sandbox check`)."""

    exit_code = 3


@dataclass(frozen=True)
class WorkerRequest:
    queue: str
    wallet: str = "worker"
    concurrency: int = TRIAL_CONCURRENCY
    sealed: bool = False
    heartbeat: float = 10.0  # seconds between the worker's beats; a loop's lease must be longer


def checked_runner(home: Home) -> Runner:
    """The home's sandbox runner, every escape probe held in it; SandboxUnsafe naming those that got out."""
    runner = sandbox_runner(home)
    got_out = [probe.name for probe, verdict in check_escapes(runner, lambda probe, verdict: None) if not verdict.held]
    if got_out:
        raise SandboxUnsafe(
            f"{len(got_out)} escape probes got out of the {runner.name} sandbox ({', '.join(got_out)}): "
            "this worker runs nothing; see agentd sandbox check"
        )
    return runner


def run_worker(home: Home, request: WorkerRequest, say: Callable[[str], None]) -> int:
    """Claims and runs the queue's runs until stopped; returns how many it answered."""
    if request.concurrency < 1 or request.heartbeat <= 0:
        raise AgentdError("--concurrency must be at least 1 and --heartbeat above 0")
    address = QueueAddress.parse(request.queue)
    wallet = load_wallet(home.require(), request.wallet)
    runner = checked_runner(home)
    say(f"worker {wallet.id} ({request.wallet}): every escape probe held in the {runner.name} sandbox")
    scratch = Path(tempfile.mkdtemp(prefix="agentd-worker-"))
    worker = Worker(home, address, wallet, runner, scratch, say, request.concurrency)
    try:
        asyncio.run(worker.serve(request))
    except ExecutorFailed as exc:
        raise AgentdError(str(exc)) from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return worker.answered


# A claim, unless a halt names the queue, in one statement: procrastinate's own claim (the function
# its fetch calls, with the columns it reads) given no queue to claim from while a halt is there.
CLAIM = """
WITH halt AS (SELECT reason FROM agentd_halts WHERE queue = %(queue)s)
SELECT job.id, job.status, job.task_name, job.priority, job.lock, job.queueing_lock, job.args,
       job.scheduled_at, job.queue_name, job.attempts, job.worker_id, (SELECT reason FROM halt) AS halted
  FROM procrastinate_fetch_job_v2(
       CASE WHEN EXISTS (SELECT FROM halt) THEN '{}' ELSE %(queues)s END::varchar[], %(worker_id)s) AS job
"""


# A run's answer left and announced in the statement that finishes its job (with procrastinate's
# own function, the one its finish calls): one round trip.
FINISH_ANSWERED = (
    f"WITH answer AS ({ANSWER}) SELECT procrastinate_finish_job_v1(%(job_id)s, %(status)s, %(delete_job)s), {ANNOUNCE}"
)


class Claims(QueueJobs):
    """The worker's job manager: no claim while `here` (this home's kill switch) says why
    not, or a halt names the queue (`noted` hears each change of why), none from the
    sealed runs' queue until `sealed_rest`, and none while the runs it holds and has not
    run are `room` or more (a job holds up to BATCH: so a worker holds fewer runs
    than room + BATCH, and a run ending makes it look again). A job's answer is sent as
    the job is finished."""

    def __init__(
        self,
        connector: BaseConnector,
        address: QueueAddress,
        room: int,
        here: Callable[[], str | None],
        noted: Callable[[str | None], None],
    ) -> None:
        super().__init__(connector)
        self.address, self.room, self.here, self.noted = address, room, here, noted
        self.answers: dict[int, tuple[str, dict[str, Any], int]] = {}  # by job: where to, the answer, its runs
        self.answered = 0  # runs
        self.sealed_rest = 0.0  # until when (monotonic) it claims no sealed run
        self.holding: dict[int, int] = {}  # runs not yet run, by job
        self.full = False  # whether a claim was left out for want of room
        self.wake: Callable[[], Awaitable[None]] | None = None
        self.waking: asyncio.Future[None] | None = None

    async def listen_for_jobs(
        self, *, on_notification: NotificationCallback, queues: Iterable[str] | None = None
    ) -> None:
        # procrastinate's worker looks for a job when told of one: told too when room is made.
        self.wake = lambda: on_notification(channel="", notification={"type": "job_inserted", "job_id": 0})
        await super().listen_for_jobs(on_notification=on_notification, queues=queues)

    async def fetch_job(self, queues: Iterable[str] | None, worker_id: int) -> Job | None:
        if sum(self.holding.values()) >= self.room:
            self.full = True
            return None
        job = await super().fetch_job(queues, worker_id)
        if job is not None and job.id is not None:
            runs = job.task_kwargs.get("runs")
            self.holding[job.id] = len(runs) if isinstance(runs, list) else 1
        return job

    def ran(self, job: int, runs: int = 1) -> None:
        """`runs` of the job run (or never to be): room for as many others."""
        if job in self.holding:
            self.holding[job] -= runs
            if self.holding[job] <= 0:
                del self.holding[job]
        if self.full and sum(self.holding.values()) < self.room:
            self.full = False
            if self.wake is not None:
                self.waking = asyncio.ensure_future(self.wake())

    async def claim(self, queues: Iterable[str] | None, worker_id: int) -> Job | None:
        why, job = self.here(), None
        if why is None:
            claimed = list(queues or ())
            if time.monotonic() < self.sealed_rest:
                claimed = [queue for queue in claimed if queue != self.address.sealed_queue]
            row = await self.connector.execute_query_one_async(
                CLAIM, queue=self.address.queue, queues=claimed, worker_id=worker_id
            )
            why, job = row["halted"], None if row["id"] is None else TerseJob.from_row(row)
        self.noted(why)
        return job

    async def finish_job(self, job: Job, status: Status, delete_job: bool) -> None:
        if job.id is not None:
            self.ran(job.id, self.holding.get(job.id, 0))
        answer = self.answers.pop(job.id, None) if job.id is not None else None
        if answer is None:
            await super().finish_job(job, status, delete_job)
            return
        reply, signed, runs = answer
        await self.connector.execute_query_async(
            FINISH_ANSWERED,
            job_id=job.id,
            status=status.value,
            delete_job=delete_job,
            reply=reply,
            signed=Jsonb(signed),
        )
        self.answered += runs


@dataclass
class Worker:
    home: Home
    address: QueueAddress
    wallet: Wallet
    runner: Runner
    scratch: Path  # where built trees are unpacked, removed when the worker stops
    say: Callable[[str], None]
    room: int = TRIAL_CONCURRENCY  # runs at once (--concurrency)
    halt: str | None = None  # why it claims nothing now, once said
    tasks: dict[str, Task] = field(default_factory=dict)
    variants: dict[str, Variant] = field(default_factory=dict)
    trees: dict[str, Path] = field(default_factory=dict)
    models: dict[str, ModelFactory] = field(default_factory=dict)
    unpacking: asyncio.Lock = field(default_factory=asyncio.Lock)
    key: X25519PrivateKey | None = None  # with --sealed: what sealed tasks are encrypted to (queuesealing)

    def __post_init__(self) -> None:
        self.app = self.address.app()
        halted = lambda: killswitch.halted(self.home)
        self.claims = Claims(self.app.connector, self.address, self.room, halted, self._noted)
        self.gate = asyncio.Semaphore(self.room)
        self.app.job_manager = self.claims
        self.app.task(name=RUN_TASK, pass_context=True)(self._run)

    @property
    def answered(self) -> int:
        return self.claims.answered

    async def serve(self, request: WorkerRequest) -> None:
        await prepare(self.address)
        app = self.app
        queues = [self.address.queue, *([self.address.sealed_queue] if request.sealed else [])]
        self.say(
            f"claiming runs from queue {' and '.join(queues)} at {self.address.shown}, up to {request.concurrency} "
            "at once; SIGTERM or Ctrl-C stops it when the runs under way end"
        )
        self.key = X25519PrivateKey.generate() if request.sealed else None
        with reaching(self.address):
            async with app.open_async(), self._published():
                await app.run_worker_async(
                    queues=queues,
                    name=f"agentd-worker-{self.wallet.id[:8]}",
                    concurrency=self.room,
                    update_heartbeat_interval=request.heartbeat,
                    stalled_worker_timeout=PRUNE,
                    fetch_job_polling_interval=CLAIM_POLL,
                    delete_jobs="never",  # the loop reads who held a job when its answer comes, then removes it
                )

    @contextlib.asynccontextmanager
    async def _published(self) -> AsyncIterator[None]:
        """This worker's key for sealed tasks published while it claims, refreshed, then withdrawn."""
        if self.key is None:
            yield
            return
        key, connector, queue = self.key, self.app.connector, self.address.sealed_queue
        await publish_key(connector, queue, self.wallet, key)

        async def refresh() -> None:
            while True:
                await asyncio.sleep(REFRESH)
                await publish_key(connector, queue, self.wallet, key)

        refreshing = asyncio.ensure_future(refresh())
        try:
            yield
        finally:
            refreshing.cancel()
            with contextlib.suppress(Exception):
                await withdraw_key(connector, key)

    def _noted(self, why: str | None) -> None:
        if why != self.halt:
            self.say(f"claiming nothing: {why}" if why else "claiming runs again")
            self.halt = why

    async def _run(self, context: JobContext, /, **given: Any) -> None:
        """One job: the runs made from what it names, run, and answered together, signed; a
        job that names what cannot be had is answered with nothing (the loop hands its runs
        out again)."""
        job = context.job
        assert job.id is not None  # a job claimed has its id
        runs, reply = given.get("runs"), given.get("reply")
        envelope, reply_key = given.get("envelope"), str(given.get("reply_key"))
        try:
            if not isinstance(reply, str) or not REPLY.fullmatch(reply):
                raise ValueError(f"it names no loop to answer ({str(reply)[:40]!r})")
            if not isinstance(runs, list) or not 1 <= len(runs) <= (1 if envelope else BATCH):
                raise ValueError(f"it holds no list of 1 to {1 if envelope else BATCH} runs")
            inputs = [{key: _inputs(run).get(key) for key in INPUTS} for run in runs]
            made = [await self._made(each, (envelope, reply_key)) for each in inputs]
            models = self._models(str(given.get("profile", "")))
        except NotSealedHere as exc:
            self.claims.sealed_rest = time.monotonic() + SEALED_REST
            self.say(f"job {job.id}: not run: {exc}; claiming no sealed run for {SEALED_REST:.0f} s")
            return
        except (AgentdError, ImproverError, KeyError, TypeError, ValueError, OSError) as exc:
            self.say(f"job {job.id}: not run: {exc}")
            return
        results = await asyncio.gather(*(self._ran(job.id, run, models) for run in made))
        body = {"job": job.id, "holder": job.worker_id, "runs": inputs, "results": results}
        signed = signed_result(self.wallet, body)
        try:  # a sealed task's run is answered only to the loop that sealed it
            answer = seal_answer(signed, reply_key, reply, job.id) if envelope else signed
        except AgentdError as exc:
            self.say(f"job {job.id}: not answered: {exc}")
            return
        self.claims.answers[job.id] = (reply, answer, len(results))

    async def _made(self, inputs: dict[str, Any], sealed: tuple[Any, str]) -> Made:
        """What a run's inputs name, fetched and held to their digests."""
        limits = EpisodeLimits(**inputs["limits"])
        retries = inputs["retries"]
        if not isinstance(retries, int) or isinstance(retries, bool) or not 0 <= retries <= 10:
            raise ValueError(f"retries {retries!r} is not a count from 0 to 10")
        task = await self._task(str(inputs["task"]), *sealed)
        return Made(
            task,
            await self._variant(str(inputs["variant"])),
            await self._candidate(inputs["candidate"]),
            limits,
            retries,
        )

    async def _ran(self, job: int, run: Made, models: ModelFactory) -> dict[str, Any]:
        """The run, when one of this worker's `--concurrency` sandboxes is free."""
        try:
            async with self.gate:
                result = await run_task(run.task, run.variant, run.candidate, models, run.limits, run.retries)
        finally:
            self.claims.ran(job)
        return run_result_to_json(result)

    async def _task(self, key: str, envelope: Any, reply_key: str) -> Task:
        """The task of digest `key`, from the queue, or opened from the `envelope` a sealed
        task comes in (a digest too) with this worker's key, for a run answered to
        `reply_key`. A sealed task is opened for every run, never kept: its envelope is
        what says the key its run may be answered to."""
        if envelope is not None:
            if self.key is None:
                raise AgentdError("it is a sealed task, and this worker was not started with --sealed")
            body = open_task(await get_blob(self.app, str(envelope)), key, self.key, reply_key)
            if blob(body)[0] != key:
                raise AgentdError(f"sealed task {key[:16]} opens to something else")
            return parse_task({**_json(body), "digest": key}, f"the queue's sealed task {key[:16]}")
        if key not in self.tasks:
            body = await get_blob(self.app, key)
            self.tasks[key] = parse_task({**_json(body), "digest": key}, f"the queue's task {key[:16]}")
        return self.tasks[key]

    async def _variant(self, key: str) -> Variant:
        if key not in self.variants:
            self.variants[key] = Variant.from_json(_json(await get_blob(self.app, key)))
        return self.variants[key]

    async def _candidate(self, spec: Any) -> Candidate:
        if spec == {"kind": "agent"}:
            return AGENT
        if not isinstance(spec, dict) or spec.get("kind") != "command":
            raise ValueError(f"no candidate of the kind {spec!r}")
        env = spec["env"]
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise ValueError("a command candidate's env must map names to text")
        tree = await self._tree(str(spec["tree"]))
        return Command(self.runner, shell_request(str(spec["command"]), tree, False, (), None, **env))

    async def _tree(self, key: str) -> Path:
        async with self.unpacking:  # one unpacking of a tree, whatever runs wait on it
            if key not in self.trees:
                folder = self.scratch / key
                unpack_tree(await get_blob(self.app, key), folder)
                self.trees[key] = folder
        return self.trees[key]

    def _models(self, profile: str) -> ModelFactory:
        if profile not in self.models:
            made = users_factory(self.home, profile)
            assert made is not None  # there is a home
            self.models[profile] = memoized_models(made)
        return self.models[profile]


def _inputs(run: Any) -> dict[str, Any]:
    if not isinstance(run, dict):
        raise ValueError("a run's inputs are not an object")
    return run


def _json(body: bytes) -> dict[str, Any]:
    data = loads_bounded(body)
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    return data
