"""The trial queue: a loop's runs handed to workers on other machines through
procrastinate (a distributed task queue on PostgreSQL), and what both sides share.

The queue is named by a PostgreSQL URL. Two parameters of agentd's own ride on it and
are taken off before it reaches the database: `schema` (default `agentd_trials`), the
schema holding procrastinate's tables and agentd's two (so none collides with a shared
ledger's in the same database), and `queue` (default `trials`), the queue's name there:

    postgresql://agentd@db.internal:5432/agentd?schema=agentd_trials&queue=invoices

A run job names what it needs by digest; the worker fetches each from `agentd_blobs`
(content-addressed: what comes back is held to its SHA-256 before it is used): the task
(its canonical JSON, whose SHA-256 is the task's digest), the variant, and for a code
round the built candidate tree (a tar made the same way every time). A worker's answer
is the `RunResult` signed by its wallet, over the lease it held (the job and its
attempt), the inputs it was given and the result (`signed_result`, `opened_result`).
`agentd_halts` holds the kill switch of the loops on a queue: while a row names it,
no worker claims a run from it.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import procrastinate
import psycopg
from procrastinate.exceptions import ProcrastinateException

from agentd.errors import AgentdError, WrongValue
from improver import Agent, Candidate, Command, ExecutorFailed, canonical
from ledger import Wallet, pae, signature_holds, wallet_id
from sandbox import shell_request

SCHEMA = "agentd_trials"
QUEUE = "trials"
RUN_TASK = "agentd.run"
RESULT_TASK = "agentd.result"
RESULT_TYPE = b"application/vnd.agentd.run-result.v1+json"
TABLES = """
CREATE TABLE IF NOT EXISTS agentd_blobs (
    digest text PRIMARY KEY,
    body bytea NOT NULL,
    stored timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE IF NOT EXISTS agentd_halts (
    queue text PRIMARY KEY,
    reason text NOT NULL,
    at timestamptz NOT NULL DEFAULT now()
);
"""
CONNECT_SECONDS = 10  # a database that does not answer a connection within this is down


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
        if "-" in schema:
            raise WrongValue(f"--queue: schema {schema!r}: use letters, digits or '_'")
        conninfo = urlunsplit(parts._replace(query=urlencode(params)))
        return cls(conninfo, schema, queue, _hidden(urlunsplit(parts._replace(query=""))))

    @property
    def sealed_queue(self) -> str:
        """Where runs of sealed tasks wait: only workers started with --sealed claim them."""
        return f"{self.queue}.sealed"

    def app(self) -> procrastinate.App:
        """A procrastinate app on this queue's schema (opened by the caller)."""
        connector = procrastinate.PsycopgConnector(
            conninfo=self.conninfo,
            kwargs={"options": f"-csearch_path={self.schema}", "connect_timeout": CONNECT_SECONDS},
            min_size=1,
            max_size=8,
        )
        return procrastinate.App(connector=connector)

    def down(self, exc: BaseException) -> ExecutorFailed:
        """The one line a loop stops with when the database cannot be reached."""
        said = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return ExecutorFailed(f"the trial queue at {self.shown} cannot be reached ({said}); start its database")


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
    """The schema, procrastinate's tables and agentd's, made when missing; one process at
    a time (a transaction-scoped advisory lock), so workers starting together agree."""
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


async def put_blobs(app: procrastinate.App, blobs: dict[str, bytes]) -> None:
    """Stores each body under its digest, once."""
    for key, body in blobs.items():
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


async def halted_queue(app: procrastinate.App, queues: list[str]) -> str | None:
    """Why runs on `queues` must not be claimed now (a loop's kill switch), or None."""
    rows = await app.connector.execute_query_all_async(
        "SELECT reason FROM agentd_halts WHERE queue = ANY(%(queues)s) LIMIT 1", queues=queues
    )
    return str(rows[0]["reason"]) if rows else None


async def set_halt(app: procrastinate.App, queue: str, reason: str | None) -> None:
    """Halts the queue's claims for `reason`; None lifts the halt."""
    if reason is None:
        await app.connector.execute_query_async("DELETE FROM agentd_halts WHERE queue = %(queue)s", queue=queue)
        return
    await app.connector.execute_query_async(
        "INSERT INTO agentd_halts (queue, reason) VALUES (%(queue)s, %(reason)s) "
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
    """The tree as a tar made the same way every time (sorted, no owners or times), and its digest."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(tree.rglob("*")):
            info = tar.gettarinfo(str(path), arcname=str(path.relative_to(tree)))
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            if info.isfile():
                with path.open("rb") as f:
                    tar.addfile(info, f)
            else:
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


def signed_result(wallet: Wallet, body: dict[str, Any]) -> dict[str, Any]:
    """`body` (the lease, the inputs, the result) signed by the worker's wallet (DSSE's PAE
    over its canonical JSON), as text a job's JSON arguments can carry."""
    payload = canonical(body)
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
