"""In-toto statements in DSSE envelopes: what verify accepts, and each way it refuses."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest

from improver.base.digests import canonical
from improver.trust.intoto import (
    ATTESTATION_PREDICATE,
    PAYLOAD_TYPE,
    RELEASE_PREDICATE,
    BadStatement,
    envelope,
    statement,
    verify,
)
from ledger import Wallet, pae

RECORD = {
    "release": "0123456789abcdef",
    "commit": "a" * 40,
    "patch": "b" * 64,
    "commands": {"build": "", "test": "", "candidate": "x"},
}


def test_a_signed_statement_verifies_with_its_key_and_names_the_patch_and_the_release() -> None:
    wallet = Wallet.generate()
    held = envelope(statement(RECORD, RELEASE_PREDICATE, {"release": RECORD}), wallet)
    assert held["payloadType"] == PAYLOAD_TYPE and held["signatures"][0]["keyid"] == wallet.id
    found = verify(held, wallet.public_key)
    assert found.keyid == wallet.id and found.predicate_type == RELEASE_PREDICATE
    assert found.subjects == [
        {"name": "releases/0123456789abcdef.patch", "digest": {"sha256": "b" * 64}},
        {"name": "release:0123456789abcdef", "digest": {"sha256": hashlib.sha256(canonical(RECORD)).hexdigest()}},
    ]
    assert base64.b64decode(held["payload"]) == canonical(found.statement)


def _resigned(about: object, wallet: Wallet) -> dict:
    """An envelope its key really signed, over a payload that is not a good statement."""
    payload = json.dumps(about).encode()
    sig = wallet.sign(pae(PAYLOAD_TYPE.encode(), payload))
    return {
        "payload": base64.b64encode(payload).decode(),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [{"keyid": wallet.id, "sig": base64.b64encode(sig).decode()}],
    }


def test_each_flaw_is_refused_in_one_line() -> None:
    wallet, other = Wallet.generate(), Wallet.generate()
    good = envelope(statement(RECORD, ATTESTATION_PREDICATE, {"holds": True}), wallet)
    tampered = {
        **good,
        "payload": base64.b64encode(base64.b64decode(good["payload"]).replace(b"true", b"false")).decode(),
    }
    good_statement = statement(RECORD, ATTESTATION_PREDICATE, {})
    cases = [
        (good, other.public_key, f"bad signature: key {other.id} did not sign this envelope"),
        (tampered, wallet.public_key, "bad signature"),
        ({**good, "payloadType": "application/json"}, wallet.public_key, "payloadType is 'application/json'"),
        ({**good, "payload": "not base64!"}, wallet.public_key, "payload is not base64"),
        (
            {**good, "payload": good["payload"][:8] + "é" + good["payload"][9:]},
            wallet.public_key,
            "payload is not base64",
        ),
        ({**good, "signatures": [{"keyid": "", "sig": "é" * 8}]}, wallet.public_key, "bad signature"),
        ({"payload": good["payload"]}, wallet.public_key, "not a DSSE envelope"),
        ({**good, "signatures": []}, wallet.public_key, "bad signature"),
        (
            _resigned({**good_statement, "_type": "https://in-toto.io/Statement/v0.1"}, wallet),
            wallet.public_key,
            "not an in-toto statement",
        ),
        (_resigned({**good_statement, "subject": []}, wallet), wallet.public_key, "names no subject"),
        (
            _resigned({**good_statement, "subject": [{"name": "x", "digest": {"sha256": "short"}}]}, wallet),
            wallet.public_key,
            "each subject needs a name and a sha256 digest",
        ),
        (_resigned({**good_statement, "predicateType": ""}, wallet), wallet.public_key, "names no predicateType"),
    ]
    for held, key, said in cases:
        with pytest.raises(BadStatement, match=said):
            verify(held, key)
