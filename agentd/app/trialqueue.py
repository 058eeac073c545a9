"""The trial queue: a loop's runs handed to workers on other machines through
procrastinate (a distributed task queue on PostgreSQL), and what both sides share.

The queue is named by a PostgreSQL URL. Two parameters of agentd's own ride on it and
are taken off before it reaches the database: `schema` (default `agentd_trials`), the
schema holding procrastinate's tables and agentd's two (so none collides with a shared
ledger's in the same database), and `queue` (default `trials`), the queue's name there:

    postgresql://agentd@db.internal:5432/agentd?schema=agentd_trials&queue=invoices

A job holds up to BATCH runs (`{"runs": [inputs, ...]}`), each naming what it needs by
digest; the worker fetches each from `agentd_blobs` (content-addressed: what comes back
is held to its SHA-256 before it is used): the task (its canonical JSON, whose SHA-256
is the task's digest), the variant, and for a code round the built candidate tree (a tar
made the same way every time, its files' times kept). A worker's answer is the job's
`RunResult`s signed by its wallet, over the lease it held (the job and its claim), the
inputs it was given and the results (`signed_result`, `opened_result`), left in
`agentd_answers` under the loop's name for its answers, with the job in the clear (so
the loop's taking of it reads who holds that job in the same statement), and announced
on the channel of that name (`ANSWER`, `ANNOUNCE`): answers are not jobs, as no worker
runs them.
`agentd_halts` holds the kill switch of the loops on a queue: while a row names it,
no worker claims a run from it.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import secrets
import select
import stat
import tarfile
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import procrastinate
import psycopg
import psycopg_pool
from procrastinate.connector import BaseConnector
from procrastinate.exceptions import ProcrastinateException
from procrastinate.jobs import Job, Notification
from procrastinate.manager import JobManager, NotificationCallback
from procrastinate.types import JSONDict

from agentd.errors import AgentdError, WrongValue
from improver import Agent, Candidate, Command, ExecutorFailed
from ledger import Wallet, pae, signature_holds, wallet_id
from sandbox import shell_request

SCHEMA = "agentd_trials"
QUEUE = "trials"
RUN_TASK = "agentd.run"
# Runs a job holds at most. Each job costs the loop, its worker and the database four
# statements (deferred, claimed, finished with its answer, the answer taken), whatever it
# holds; one run a job cost them 4-5 ms a run of a 75 ms run. A job's runs are one
# worker's, so a worker holds up to BATCH - 1 runs more than it runs (worker.Claims),
# which another could have run at a trial's end.
BATCH = 4
RESULT_TYPE = b"application/vnd.agentd.run-result.v1+json"
TABLES = """
CREATE TABLE IF NOT EXISTS agentd_blobs (
    digest text PRIMARY KEY,
    body bytea NOT NULL,
    stored timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS agentd_answers (
    id bigserial PRIMARY KEY,
    reply text NOT NULL,
    job bigint NOT NULL,
    signed jsonb NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS agentd_answers_by_reply ON agentd_answers (reply);
CREATE TABLE IF NOT EXISTS agentd_keys (
    key text PRIMARY KEY,
    queue text NOT NULL,
    wallet text NOT NULL,
    document jsonb NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS agentd_halts (
    queue text PRIMARY KEY,
    reason text NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);
"""
# procrastinate's triggers that keep each job's history (deferred, started, succeeded) in
# procrastinate_events: agentd reads none of it (a worker that stopped is found by its
# heartbeat, a run's answer is a row of its own), and they cost PostgreSQL three rows a run
# written, indexed and removed with the job. Switched off once, by the first to prepare.
HISTORY = (
    "procrastinate_trigger_status_events_insert_v1",
    "procrastinate_trigger_status_events_update_v1",
)
KEPT_HISTORY = """
SELECT tgname FROM pg_trigger
 WHERE tgrelid = 'procrastinate_jobs'::regclass AND tgname = ANY(%s) AND tgenabled <> 'D'
"""
# procrastinate's channel for a queue is "procrastinate_queue_v1#" and its name, and
# PostgreSQL refuses a channel over 63 bytes; the sealed runs' queue adds ".sealed".
QUEUE_LONGEST = 63 - len("procrastinate_queue_v1#") - len(".sealed")
UNTAKEN = "1 day"  # an answer no loop took for this long is removed by the next process to start on the queue
CONNECT_SECONDS = 10  # a database that does not answer a connection within this is down
# Connections a loop or a worker keeps to the database at most. A statement of the queue's takes
# well under a millisecond, so a few carry a worker's runs; each more is a backend PostgreSQL
# starts and warms (its catalogs, its plans) for the few statements it would take.
POOL = 4


class Refused(Exception):
    """A worker's answer not taken; the message names the worker and why."""


@dataclass(frozen=True)
class QueueAddress:
    """Where a queue is: the database (as libpq takes it), the schema and the queue's name."""

    conninfo: str
    schema: str
    queue: str
    shown: str  # the URL without its password, for messages

    @classmethod
    def parse(cls, url: str) -> QueueAddress:
        """The address `url` gives; WrongValue saying what is wrong with it."""
        parts = urlsplit(url)
        if parts.scheme not in ("postgresql", "postgres") or not parts.hostname:
            raise WrongValue(
                f"--queue {_hidden(url)!r}: give a PostgreSQL URL, e.g. postgresql://USER@HOST:5432/DB?queue=NAME"
            )
        params = dict(parse_qsl(parts.query))
        schema, queue = params.pop("schema", SCHEMA), params.pop("queue", QUEUE)
        for what, name in (("schema", schema), ("queue", queue)):
            if not name.replace("_", "").replace("-", "").isalnum() or len(name) > 63 or not name[0].isalpha():
                raise WrongValue(f"--queue: {what} {name!r}: use letters, digits, '_' or '-', starting with a letter")
        if len(queue) > QUEUE_LONGEST:
            raise WrongValue(
                f"--queue: queue {queue!r} is {len(queue)} characters: give at most {QUEUE_LONGEST} "
                "(procrastinate announces a job on a PostgreSQL channel named after its queue, at most 63 bytes)"
            )
        if "-" in schema:
            raise WrongValue(f"--queue: schema {schema!r}: use letters, digits or '_'")
        conninfo = urlunsplit(parts._replace(query=urlencode(params)))
        return cls(conninfo, schema, queue, _hidden(urlunsplit(parts._replace(query=""))))

    async def connect(self) -> psycopg.AsyncConnection[Any]:
        """A connection of its own to the queue's schema, in autocommit (a loop listens on it)."""
        return await psycopg.AsyncConnection.connect(
            self.conninfo, autocommit=True, options=self.options, connect_timeout=CONNECT_SECONDS
        )

    @property
    def options(self) -> str:
        """The queue's sessions: in its schema, their commits not waiting for the disk. What
        they write lives for seconds, and a database that restarts has cut every loop's
        connection, which stops its trial: a job or an answer lost in the last fraction of
        a second before a crash is never waited on. A shared ledger's own sessions on the
        same database keep their durable commits, as does a halt (`set_halt`). Each run's
        four commits waited on a flush of the log, a few milliseconds of its latency and a
        share of PostgreSQL's CPU."""
        return f"-csearch_path={self.schema} -csynchronous_commit=off"

    @property
    def sealed_queue(self) -> str:
        """Where runs of sealed tasks wait: only workers started with --sealed claim them."""
        return f"{self.queue}.sealed"

    def app(self) -> procrastinate.App:
        """A procrastinate app on this queue's schema (opened by the caller), its connections
        in autocommit: each statement of procrastinate's is one call of its functions, so a
        transaction around it only cost a BEGIN and a COMMIT, two more round trips."""
        connector = procrastinate.PsycopgConnector(
            conninfo=self.conninfo,
            kwargs={"options": self.options, "connect_timeout": CONNECT_SECONDS},
            configure=_autocommit,
            pool_factory=_pool,
            min_size=1,
            max_size=POOL,
        )
        app = procrastinate.App(connector=connector)
        app.job_manager = QueueJobs(connector)
        return app

    def down(self, exc: BaseException) -> ExecutorFailed:
        """The one line a loop stops with when the database cannot be reached."""
        said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return ExecutorFailed(f"the trial queue at {self.shown} cannot be reached ({said}); start its database")


async def _autocommit(conn: psycopg.AsyncConnection[Any]) -> None:
    await conn.set_autocommit(True)


def _pool(**options: Any) -> psycopg_pool.AsyncConnectionPool[Any]:
    return psycopg_pool.AsyncConnectionPool(**{**options, "check": _lendable})


async def _lendable(conn: psycopg.AsyncConnection[Any]) -> None:
    """The pool's check of a connection before it lends it: a round trip only when the
    server has sent something since the connection's last use. One idle in autocommit hears
    nothing unless the server is ending it (its last words, or the socket closed); the round
    trip then fails and the pool lends a new connection instead. A round trip on every loan
    doubled the round trips of every statement."""
    if select.select([conn.fileno()], [], [], 0)[0]:
        await conn.execute("")


# One job deferred with procrastinate's own function, its fields sent one by one. procrastinate
# sends jobs as an array of records in text, and escaping a job's JSON arguments in it took
# 0.1-0.25 ms a job here, fifteen times what this takes.
DEFER = (
    "SELECT unnest(procrastinate_defer_jobs_v1(ARRAY[ROW(%(queue_name)s, %(task_name)s, %(priority)s, %(lock)s, "
    "%(queueing_lock)s, %(args)s, %(scheduled_at)s)::procrastinate_job_to_defer_v1])) AS id"
)


class TerseJob(Job):
    """A job as procrastinate logs it: without its arguments. procrastinate makes a job's
    log context (a deep copy of its arguments) and call string (their repr) for each line
    it may log about it, whether or not anything logs them: the copies alone took a tenth
    of a worker's CPU a job, beside the statements that claim and finish it. The jobs
    agentd defers, and those it claims, are of this kind."""

    def log_context(self) -> JSONDict:
        return {"id": self.id, "queue": self.queue, "task_name": self.task_name, "call_string": self.call_string}

    @cached_property
    def call_string(self) -> str:
        return f"{self.task_name}[{self.id}]"


def terse_job(queue: str, task: str, args: dict[str, Any]) -> TerseJob:
    """A job of `task` on `queue` to defer, with `args`."""
    return TerseJob(queue=queue, task_name=task, lock=None, queueing_lock=None, task_kwargs=args)


class QueueJobs(JobManager):
    """procrastinate's job manager, its notices of new jobs counted, a notice to drop a job
    checked, and one job deferred at a time more cheaply (DEFER).

    procrastinate's worker clears the notice after each look for a job, so one that came
    during the look was lost and its job waited for the next poll: here a look during which
    a notice came looks again. And after each job claimed it looks once more, which finds
    nothing unless another job waits: here that look is left out when every job announced
    has been claimed since the queue was last seen empty. A job nobody announced (deferred
    while the listening connection was being made again) is found by the next poll, and
    those after it as they would be: a look that claims more than was announced is
    followed by another.

    procrastinate names its channels by queue, and channels are the database's, not the
    schema's: a queue of the same name in another schema is heard too. A notice of a new
    job from there costs a look for nothing; a notice to drop a job (a kill switch) names
    the job by its number, which a job of this queue may have too, so it is passed on only
    when this queue's job of that number has been asked to stop."""

    def __init__(self, connector: BaseConnector) -> None:
        super().__init__(connector)
        self.heard = 0  # notices of new jobs so far
        self.owed = 0  # jobs announced and not yet claimed here, as far as the notices say
        self.claimed = False  # whether the last look claimed a job

    async def listen_for_jobs(
        self, *, on_notification: NotificationCallback, queues: Iterable[str] | None = None
    ) -> None:
        async def heard(*, channel: str, notification: Notification) -> None:
            if notification["type"] == "job_inserted":
                self.heard += 1
                self.owed += 1
            elif notification["type"] == "abort_job_requested" and not await self._stopping(notification["job_id"]):
                return
            await on_notification(channel=channel, notification=notification)

        await super().listen_for_jobs(on_notification=heard, queues=queues)

    async def _stopping(self, job: int) -> bool:
        rows = await self.connector.execute_query_all_async(
            "SELECT 1 FROM procrastinate_jobs WHERE id = %(id)s AND abort_requested", id=job
        )
        return bool(rows)

    async def fetch_job(self, queues: Iterable[str] | None, worker_id: int) -> Job | None:
        if self.claimed and self.owed == 0:
            self.claimed = False
            return None
        while True:
            heard = self.heard
            job = await self.claim(queues, worker_id)
            self.claimed = job is not None
            if job is not None:
                self.owed -= 1
                return job
            self.owed = self.heard - heard  # those may have come after the look saw the queue
            if not self.owed:
                return None

    async def claim(self, queues: Iterable[str] | None, worker_id: int) -> Job | None:
        """One look for a job, claimed for `worker_id` when found (procrastinate's own fetch)."""
        return await super().fetch_job(queues, worker_id)

    def _defer_jobs_query_kwargs(self, jobs: list[Job]) -> dict[str, Any]:
        if len(jobs) != 1:
            return super()._defer_jobs_query_kwargs(jobs)
        job = jobs[0]
        return {
            "query": DEFER,
            "queue_name": job.queue,
            "task_name": job.task_name,
            "priority": job.priority,
            "lock": job.lock,
            "queueing_lock": job.queueing_lock,
            "args": job.task_kwargs,
            "scheduled_at": job.scheduled_at,
        }


def _hidden(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    return urlunsplit(parts._replace(netloc=parts.netloc.replace(f":{parts.password}@", ":***@")))


@contextmanager
def reaching(address: QueueAddress) -> Iterator[None]:
    """The database's failures as the one line ExecutorFailed says."""
    try:
        yield
    except (psycopg.Error, ProcrastinateException, OSError) as exc:
        raise address.down(exc) from None


async def prepare(address: QueueAddress) -> None:
    """The schema, procrastinate's tables and agentd's, made when missing, its job history
    left unkept (HISTORY), and the answers no loop took and the keys no worker refreshed for
    UNTAKEN removed; one process at a time (a transaction-scoped advisory lock), so
    workers starting together agree."""
    with reaching(address):
        conn = await psycopg.AsyncConnection.connect(address.conninfo, connect_timeout=CONNECT_SECONDS)
        async with conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"agentd-queue:{address.schema}",))
            await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{address.schema}"')
            await conn.execute(f'SET LOCAL search_path TO "{address.schema}"')
            found = await (await conn.execute("SELECT to_regclass('procrastinate_jobs') IS NOT NULL")).fetchone()
            if not found or not found[0]:
                schema = procrastinate.App(connector=procrastinate.PsycopgConnector()).schema_manager.get_schema()
                await conn.execute(schema)
            await conn.execute(TABLES)
            for (trigger,) in await (await conn.execute(KEPT_HISTORY, (list(HISTORY),))).fetchall():
                await conn.execute(f"ALTER TABLE procrastinate_jobs DISABLE TRIGGER {trigger}")
            # A loop takes its answers within seconds of their coming: one a day old is a
            # killed loop's, which did not tidy up (see queued.QueueExecutor._tidy).
            await conn.execute(f"DELETE FROM agentd_answers WHERE at < now() - interval '{UNTAKEN}'")
            await conn.execute(f"DELETE FROM agentd_keys WHERE at < now() - interval '{UNTAKEN}'")  # stopped workers'


async def put_blobs(app: procrastinate.App, blobs: dict[str, bytes]) -> None:
    """Stores each body under its digest, once: a body the queue holds already (a built tree
    from an earlier trial) is not sent again."""
    rows = await app.connector.execute_query_all_async(
        "SELECT digest FROM agentd_blobs WHERE digest = ANY(%(digests)s)", digests=list(blobs)
    )
    held = {row["digest"] for row in rows}
    for key, body in blobs.items():
        if key not in held:
            await app.connector.execute_query_async(
                "INSERT INTO agentd_blobs (digest, body) VALUES (%(digest)s, %(body)s) ON CONFLICT DO NOTHING",
                digest=key,
                body=body,
            )


async def get_blob(app: procrastinate.App, key: str) -> bytes:
    """The body stored under `key`, held to it; AgentdError when missing or not its own."""
    rows = await app.connector.execute_query_all_async(
        "SELECT body FROM agentd_blobs WHERE digest = %(digest)s", digest=key
    )
    if not rows:
        raise AgentdError(f"the queue holds nothing under digest {key[:16]}")
    body = bytes(rows[0]["body"])
    if hashlib.sha256(body).hexdigest() != key:
        raise AgentdError(f"what the queue holds under digest {key[:16]} is not what was stored there")
    return body


def blob(body: bytes) -> tuple[str, bytes]:
    return hashlib.sha256(body).hexdigest(), body


# A kill switch outlives a crash of the database: its statement commits durably, whatever
# its session's setting (QueueAddress.options), the setting made local to it.
DURABLY = "(SELECT set_config('synchronous_commit', 'on', true)) AS durably"


async def set_halt(app: procrastinate.App, queue: str, reason: str | None) -> None:
    """Halts the queue's claims for `reason`; None lifts the halt."""
    if reason is None:
        await app.connector.execute_query_async(
            f"DELETE FROM agentd_halts USING {DURABLY} WHERE queue = %(queue)s", queue=queue
        )
        return
    await app.connector.execute_query_async(
        f"INSERT INTO agentd_halts (queue, reason) SELECT %(queue)s, %(reason)s FROM {DURABLY} "
        "ON CONFLICT (queue) DO UPDATE SET reason = EXCLUDED.reason, at = now()",
        queue=queue,
        reason=reason,
    )


# A candidate on the wire: the in-process runtime, or a program built from a tree.


def candidate_spec(candidate: Candidate, agent: Agent) -> tuple[dict[str, Any], dict[str, bytes]]:
    """How a worker makes `candidate` again (agentd's runtime, or `sh -c COMMAND` in a
    tree), and the blobs that takes; ExecutorFailed for a candidate no worker can make."""
    if candidate is agent:
        return {"kind": "agent"}, {}
    if not isinstance(candidate, Command):
        raise ExecutorFailed("this candidate runs only in this process: run without --queue")
    request = candidate.request
    if request.argv[:2] != ("/bin/sh", "-c") or request.tree is None or request.writable is not None:
        raise ExecutorFailed("a worker runs a command candidate only as `sh -c COMMAND` in a read-only tree")
    command = request.argv[2]
    base = shell_request(command, request.tree)
    extra = [p for p in request.readable if p not in base.readable]
    if extra:
        raise ExecutorFailed(
            f"the candidate reads {extra[0]} (--readable), a path on this machine a worker may not have: "
            "run without --readable or without --queue"
        )
    env = {k: v for k, v in request.env.items() if base.env.get(k) != v}
    key, body = tree_blob(request.tree)
    return {"kind": "command", "command": command, "tree": key, "env": env}, {key: body}


def tree_blob(tree: Path) -> tuple[str, bytes]:
    """The tree as a tar made the same way every time it is unchanged (sorted, no owners),
    and its digest. Its files keep their times, to the second (as a compiled module holds
    its source's): a module whose source has another time is compiled again, by every
    run of a read-only tree, which can write no cache. Files, folders and symbolic links
    go in, nothing else (a socket, a device); a file linked twice goes in twice. Each
    entry is made from the file's own `lstat`: tarfile's `gettarinfo` looks up its
    owner's names, 40% of the packing's time, for names left out anyway."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(tree.rglob("*")):
            found = path.lstat()
            info = tarfile.TarInfo(str(path.relative_to(tree)))
            info.mode, info.mtime = stat.S_IMODE(found.st_mode), int(found.st_mtime)
            if stat.S_ISREG(found.st_mode):
                info.size = found.st_size
                with path.open("rb") as f:
                    tar.addfile(info, f)
            elif stat.S_ISDIR(found.st_mode) or stat.S_ISLNK(found.st_mode):
                info.type = tarfile.DIRTYPE if stat.S_ISDIR(found.st_mode) else tarfile.SYMTYPE
                info.linkname = "" if info.isdir() else str(path.readlink())
                tar.addfile(info)
    return blob(out.getvalue())


def unpack_tree(body: bytes, folder: Path) -> None:
    """A tree `tree_blob` made, into `folder`: only what tarfile's data filter lets in
    (no absolute paths, nothing outside the folder, no devices)."""
    with tarfile.open(fileobj=io.BytesIO(body), mode="r:") as tar:
        tar.extractall(folder, filter="data")
    # The data filter sets no folder's mode: made under the home's private umask, each is
    # opened to the sandbox's own uid, which reads the tree as it reads the files in it.
    for each in (folder, *(path for path in folder.rglob("*") if path.is_dir() and not path.is_symlink())):
        each.chmod(0o755)


# A worker's answer, signed.


# A worker's signed answer to run job `job_id`, kept for the loop whose answers are named
# `reply` (REPLY), and announced on the channel of that name, where that loop listens.
ANSWER = "INSERT INTO agentd_answers (reply, job, signed) VALUES (%(reply)s, %(job_id)s, %(signed)s)"
ANNOUNCE = "pg_notify(%(reply)s, '')"
# What a loop names its answers, and its channel: a channel's name is at most 63 bytes.
REPLY = re.compile(r"agentd_answers_[0-9a-f]{16}")


def new_reply() -> str:
    """A name for a loop's answers, its own (REPLY)."""
    return f"agentd_answers_{secrets.token_hex(8)}"


def signed_result(wallet: Wallet, body: dict[str, Any]) -> dict[str, Any]:
    """`body` (the lease, the inputs, the result) signed by the worker's wallet (DSSE's PAE
    over its JSON), as text a job's JSON arguments can carry. The bytes signed are the bytes
    sent, so they need no canonical form (which cost 70 µs a run in the pure-Python encoder
    a result's float sends it to); a NaN or infinity, which JSON has not, is refused."""
    payload = json.dumps(body, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()
    signature = wallet.sign(pae(RESULT_TYPE, payload))
    return {"payload": _b64(payload), "signature": _b64(signature), "key": _b64(wallet.public_key)}


def opened_result(signed: Any) -> tuple[str, dict[str, Any]]:
    """The signing wallet's id and the body; Refused when the signature does not hold."""
    try:
        payload, signature, key = (base64.b64decode(signed[k], validate=True) for k in ("payload", "signature", "key"))
    except (KeyError, TypeError, ValueError):
        raise Refused("a result that is not a signed one (payload, signature, key)") from None
    if len(key) != 32 or not signature_holds(key, signature, pae(RESULT_TYPE, payload)):
        raise Refused(f"a result whose signature does not hold (said to be by worker {_key_id(key)})")
    try:
        body = json.loads(payload)
    except ValueError:
        raise Refused(f"a result from worker {wallet_id(key)} that is not JSON") from None
    if not isinstance(body, dict):
        raise Refused(f"a result from worker {wallet_id(key)} that is not an object")
    return wallet_id(key), body


def _key_id(key: bytes) -> str:
    return wallet_id(key) if len(key) == 32 else "with no key"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
