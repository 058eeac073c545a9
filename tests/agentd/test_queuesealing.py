"""A sealed task's envelope and a sealed run's answer on the trial queue: each opens only
with the key it was made for, and a loop seals only to keys its trusted wallets signed."""

from __future__ import annotations

import asyncio
import base64
import json

import psycopg
import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from agentd.app.keydocs import key_document
from agentd.app.queuesealing import (
    KEY_KIND,
    open_answer,
    open_task,
    publish_key,
    seal_answer,
    seal_task,
    trusted_keys,
)
from agentd.app.trialqueue import QueueAddress, Refused, blob, prepare
from agentd.errors import AgentdError
from ledger import Wallet
from tests.postgres import POSTGRES_URL

TASK = b'{"name":"work-1","task":"Pay invoice 23 from Acme."}'
DIGEST = blob(TASK)[0]
REPLY = "agentd_answers_" + "0" * 16
LOOP = "ab" * 32  # the loop's key a sealed run is answered to, in hex


def test_a_sealed_task_opens_only_with_a_key_it_was_sealed_to() -> None:
    first, second, other = (X25519PrivateKey.generate() for _ in range(3))
    envelope = seal_task(TASK, DIGEST, [first.public_key(), second.public_key()], LOOP)
    assert b"Acme" not in envelope
    assert open_task(envelope, DIGEST, first, LOOP) == TASK == open_task(envelope, DIGEST, second, LOOP)
    with pytest.raises(AgentdError, match="was not sealed to this worker's key"):
        open_task(envelope, DIGEST, other, LOOP)
    with pytest.raises(AgentdError, match="holds task " + DIGEST[:16]):
        open_task(envelope, "0" * 64, first, LOOP)  # an envelope for another task
    with pytest.raises(AgentdError, match="is malformed"):
        open_task(b"not json", DIGEST, first, LOOP)


def test_a_sealed_task_whose_job_names_another_loop_s_key_does_not_open() -> None:
    # Whoever can write the queue's jobs could name a key of theirs for the answer (the
    # run's conversation, the task's words in it): the envelope is bound to the loop's.
    key = X25519PrivateKey.generate()
    envelope = seal_task(TASK, DIGEST, [key.public_key()], LOOP)
    with pytest.raises(AgentdError, match="does not open with this worker's key"):
        open_task(envelope, DIGEST, key, "cd" * 32)


def test_a_sealed_task_altered_in_the_queue_does_not_open() -> None:
    key = X25519PrivateKey.generate()
    document = json.loads(seal_task(TASK, DIGEST, [key.public_key()], LOOP))
    (to,) = document["to"]
    sealed = bytearray(base64.b64decode(document["to"][to]))
    sealed[-1] ^= 1
    document["to"][to] = base64.b64encode(bytes(sealed)).decode()
    with pytest.raises(AgentdError, match="does not open with this worker's key"):
        open_task(json.dumps(document).encode(), DIGEST, key, LOOP)


def test_a_sealed_answer_opens_only_with_the_loop_s_key_for_its_job() -> None:
    loop = X25519PrivateKey.generate()
    public = loop.public_key().public_bytes_raw().hex()
    signed = {"payload": "cGF5bG9hZA==", "signature": "c2ln", "key": "a2V5"}
    row = seal_answer(signed, public, REPLY, 7)
    assert set(row) == {"sealed"} and "cGF5bG9hZA" not in row["sealed"]
    assert open_answer(row, loop, REPLY, 7) == signed
    assert open_answer(signed, loop, REPLY, 7) == signed  # an answer to a run not sealed, as it is
    with pytest.raises(Refused, match="does not open with this loop's key"):
        open_answer(row, loop, REPLY, 8)  # moved to another job's row
    with pytest.raises(Refused, match="does not open with this loop's key"):
        open_answer(row, X25519PrivateKey.generate(), REPLY, 7)
    with pytest.raises(AgentdError, match="names no key of a loop"):
        seal_answer(signed, "None", REPLY, 7)


def test_a_loop_seals_only_to_fresh_keys_its_trusted_wallets_signed(queue_url: str) -> None:
    address = QueueAddress.parse(queue_url)
    trusted, stranger = Wallet.generate(), Wallet.generate()
    keys = {name: X25519PrivateKey.generate() for name in ("trusted", "stranger", "forged", "other queue", "stale")}

    async def publish() -> list[str]:
        await prepare(address)
        app = address.app()
        async with app.open_async():
            await publish_key(app.connector, "q.sealed", trusted, keys["trusted"])
            await publish_key(app.connector, "q.sealed", stranger, keys["stranger"])
            await publish_key(app.connector, "other.sealed", trusted, keys["other queue"])
            await publish_key(app.connector, "q.sealed", trusted, keys["stale"])
            found = await trusted_keys(app.connector, "q.sealed", frozenset({trusted.id}))
        return sorted(key.public_bytes_raw().hex() for key in found)

    forged = key_document(KEY_KIND, stranger, keys["forged"], queue="q.sealed") | {"wallet": trusted.id}
    with psycopg.connect(POSTGRES_URL, autocommit=True, options=f"-csearch_path={address.schema}") as conn:
        asyncio.run(prepare(address))
        conn.execute(
            "INSERT INTO agentd_keys (key, queue, wallet, document) VALUES (%s, 'q.sealed', %s, %s::jsonb)",
            (forged["key"], trusted.id, json.dumps(forged)),
        )
        found = asyncio.run(publish())
        stale = keys["stale"].public_key().public_bytes_raw().hex()
        conn.execute("UPDATE agentd_keys SET at = now() - interval '1 hour' WHERE key = %s", (stale,))
    assert stale in found  # refreshed within FRESH: a live worker's
    with psycopg.connect(POSTGRES_URL, autocommit=True, options=f"-csearch_path={address.schema}") as conn:
        conn.execute("UPDATE agentd_keys SET at = now() - interval '2 hours' WHERE key = %s", (stale,))

    async def look() -> list[str]:
        app = address.app()
        async with app.open_async():
            found = await trusted_keys(app.connector, "q.sealed", frozenset({trusted.id}))
        return [key.public_bytes_raw().hex() for key in found]

    assert asyncio.run(look()) == [keys["trusted"].public_key().public_bytes_raw().hex()]
