"""Sealed runs on the trial queue, in the clear to no one but a trusted worker and the loop.

A worker started with `--sealed` makes an X25519 key when it starts and publishes it in
`agentd_keys`, in a key document its wallet signs (agentd/app/keydocs.py), refreshed every
REFRESH seconds and removed when it stops. A loop hands a sealed task out only as an
envelope: the task encrypted with HPKE to each key that a wallet its owner trusts has
published within FRESH seconds (each document's signature checked), bound to the task's
digest. The worker that claims the run opens the envelope with its own key and holds the
task to its digest, as any task; its answer (the run's conversation) is encrypted to the
key the loop names in the job, bound to the loop's name for its answers and the job. The
envelope is bound to that key too (task_info), so a job whose key was changed in the queue
does not open. So the queue's database holds neither a sealed task nor a sealed run's
answer in the clear, and whoever can write it cannot have one sent to them.

A worker started after the hand-out, or not trusted, finds no part of the envelope for
its key (NotSealedHere): it runs nothing, leaves the job unanswered and claims no sealed
run for a while (worker.SEALED_REST), and the loop hands the run out again, to the keys
published then, for a trusted worker to claim, until its leases are spent.
"""

from __future__ import annotations

import asyncio
import base64
import json
from typing import Any, Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from procrastinate.connector import BaseConnector

from agentd.app.keydocs import SUITE, checked_key_document, key_document, public_hex
from agentd.app.trialqueue import Refused, blob
from agentd.errors import AgentdError
from improver import Task, canonical
from ledger import Wallet

KEY_KIND = "agentd.worker-key/v1"
REFRESH = 600.0  # seconds between a worker's refreshes of its published key
FRESH = 3 * REFRESH  # a key not refreshed for this long is a stopped worker's: nothing is sealed to it
KEY_POLL = 1.0  # seconds between looks for a trusted worker's key while a sealed run waits for one
KEYS = """
SELECT document FROM agentd_keys
 WHERE queue = %(queue)s AND wallet = ANY(%(trusted)s) AND at > now() - make_interval(secs => %(fresh)s)
"""


class NotSealedHere(AgentdError):
    """An envelope with no part for this worker's key."""


class Sealing(Protocol):
    """What `envelope` asks of the loop's executor: whether it stopped, and its key."""

    @property
    def broken(self) -> BaseException | None: ...

    @property
    def opener(self) -> X25519PrivateKey: ...


def task_info(digest: str, reply_key: str) -> bytes:
    """Binds an envelope to its task and to the loop's key its run is answered to: a job
    whose key was changed in the queue (to read the answer) names an envelope that does
    not open."""
    return f"agentd sealed task {digest} answered to {reply_key}".encode()


def answer_info(reply: str, job: int) -> bytes:
    return f"agentd sealed answer {reply} {job}".encode()


async def publish_key(connector: BaseConnector, queue: str, wallet: Wallet, key: X25519PrivateKey) -> None:
    """This worker's key for `queue`, published (or its time refreshed)."""
    document = key_document(KEY_KIND, wallet, key, queue=queue)
    await connector.execute_query_async(
        "INSERT INTO agentd_keys (queue, wallet, key, document) VALUES (%(queue)s, %(wallet)s, %(key)s, %(document)s::jsonb) "
        "ON CONFLICT (key) DO UPDATE SET at = now()",
        queue=queue,
        wallet=wallet.id,
        key=document["key"],
        document=json.dumps(document),
    )


async def withdraw_key(connector: BaseConnector, key: X25519PrivateKey) -> None:
    await connector.execute_query_async("DELETE FROM agentd_keys WHERE key = %(key)s", key=public_hex(key))


async def trusted_keys(connector: BaseConnector, queue: str, trusted: frozenset[str]) -> list[X25519PublicKey]:
    """The keys published for `queue` by the trusted wallets, fresh, each signed by its wallet."""
    rows = await connector.execute_query_all_async(KEYS, queue=queue, trusted=sorted(trusted), fresh=FRESH)
    keys = []
    for row in rows:
        document = row["document"]
        try:
            named = checked_key_document(document, KEY_KIND, "a worker's")
        except AgentdError:
            continue  # a row anyone with the database could write: only a trusted wallet's signature counts
        if named["wallet"] in trusted and document.get("queue") == queue:
            keys.append(X25519PublicKey.from_public_bytes(bytes.fromhex(named["key"])))
    return keys


async def envelope(
    connector: BaseConnector, queue: str, trusted: frozenset[str], task: Task, executor: Sealing
) -> tuple[str, bytes]:
    """`task` sealed to the keys its trusted workers publish now, its run to be answered to
    the executor's key, and the envelope's digest. Until a key is published it waits, as a
    run waits for a worker to claim it, unless the executor stops (its `broken`, raised)."""
    while not (keys := await trusted_keys(connector, queue, trusted)):
        if executor.broken is not None:
            raise executor.broken
        await asyncio.sleep(KEY_POLL)
    return blob(seal_task(canonical(task.content()), task.digest, keys, public_hex(executor.opener)))


def seal_task(body: bytes, digest: str, keys: list[X25519PublicKey], reply_key: str) -> bytes:
    """The envelope: the task's bytes encrypted to each key, by that key (hex)."""
    to = {
        key.public_bytes_raw().hex(): _b64(SUITE.encrypt(body, key, info=task_info(digest, reply_key))) for key in keys
    }
    return json.dumps({"sealed_task": digest, "to": to}, sort_keys=True).encode()


def open_task(envelope: bytes, digest: str, key: X25519PrivateKey, reply_key: str) -> bytes:
    """The task's bytes from an envelope made for `key`; AgentdError saying why not."""
    try:
        document = json.loads(envelope)
        named, sealed = document["sealed_task"], document["to"].get(public_hex(key))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise AgentdError(f"the envelope of sealed task {digest[:16]} is malformed") from None
    if named != digest:
        raise AgentdError(f"the envelope named for sealed task {digest[:16]} holds task {str(named)[:16]}")
    if sealed is None:
        raise NotSealedHere(
            f"sealed task {digest[:16]} was not sealed to this worker's key "
            "(it started after the run was handed out, or its wallet is not in the loop's [trials] trusted)"
        )
    try:
        return SUITE.decrypt(base64.b64decode(sealed, validate=True), key, info=task_info(digest, reply_key))
    except (InvalidTag, ValueError):
        raise AgentdError(f"sealed task {digest[:16]} does not open with this worker's key") from None


def seal_answer(signed: dict[str, Any], key_hex: str, reply: str, job: int) -> dict[str, Any]:
    """A signed answer encrypted to the loop's key (hex), as an answer row carries it."""
    try:
        key = X25519PublicKey.from_public_bytes(bytes.fromhex(key_hex))
    except (TypeError, ValueError):
        raise AgentdError(f"the job names no key of a loop ({str(key_hex)[:40]!r})") from None
    return {"sealed": _b64(SUITE.encrypt(json.dumps(signed).encode(), key, info=answer_info(reply, job)))}


def open_answer(row: Any, key: X25519PrivateKey, reply: str, job: Any) -> Any:
    """The signed answer in a row: opened with the loop's key when sealed, as it is when not;
    Refused when a sealed one does not open."""
    if not (isinstance(row, dict) and set(row) == {"sealed"}):
        return row
    try:
        plain = SUITE.decrypt(base64.b64decode(row["sealed"], validate=True), key, info=answer_info(reply, int(job)))
        return json.loads(plain)
    except (InvalidTag, TypeError, ValueError):
        raise Refused(f"a sealed answer to job {job} that does not open with this loop's key") from None


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
