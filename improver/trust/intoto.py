"""Releases and attestations as in-toto Statements (v1) in DSSE envelopes.

A statement names two subjects: the patch, `releases/ID.patch`, by its SHA-256, and the
release itself, `release:ID`, by the SHA-256 of its record's RFC 8785 form (the record its
agent.release/v1 claim publishes). Its predicate is the claim's body, under agentd's own
predicate type: `https://agentd.dev/release/v1` for a release, and
`https://agentd.dev/release-attestation/v1` for what an attester found. The envelope is
DSSE's (payload type `application/vnd.in-toto+json`, the signature over its
pre-authentication encoding), signed with a wallet's Ed25519 key, the keyid its wallet id:
any DSSE verifier given that public key checks it, agentd or not.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Any

from improver.base.digests import canonical, digest
from improver.base.errors import ImproverError
from improver.base.nesting import loads_bounded
from ledger import Wallet, pae, signature_holds, wallet_id

STATEMENT_TYPE = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE = "application/vnd.in-toto+json"
RELEASE_PREDICATE = "https://agentd.dev/release/v1"
ATTESTATION_PREDICATE = "https://agentd.dev/release-attestation/v1"
SHA256 = re.compile(r"^[0-9a-f]{64}$")


class BadStatement(ImproverError):
    """An envelope whose signature, payload type, statement or subjects do not hold."""


@dataclass(frozen=True)
class Verified:
    """A statement whose envelope the key signed."""

    statement: dict[str, Any]
    keyid: str

    @property
    def subjects(self) -> list[dict[str, Any]]:
        return list(self.statement["subject"])

    @property
    def predicate_type(self) -> str:
        return str(self.statement["predicateType"])


def subjects(record: dict[str, Any]) -> list[dict[str, Any]]:
    """The release's patch and the release itself, by digest."""
    rid = record["release"]
    return [
        {"name": f"releases/{rid}.patch", "digest": {"sha256": record["patch"]}},
        {"name": f"release:{rid}", "digest": {"sha256": digest(record)}},
    ]


def statement(record: dict[str, Any], predicate_type: str, predicate: dict[str, Any]) -> dict[str, Any]:
    """An in-toto Statement v1 about the release `record`."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": subjects(record),
        "predicateType": predicate_type,
        "predicate": predicate,
    }


def envelope(about: dict[str, Any], wallet: Wallet) -> dict[str, Any]:
    """The statement in a DSSE envelope signed by `wallet`; the payload is its JCS bytes."""
    payload = canonical(about)
    signature = wallet.sign(pae(PAYLOAD_TYPE.encode(), payload))
    return {
        "payload": _b64(payload),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [{"keyid": wallet.id, "sig": _b64(signature)}],
    }


def verify(held: Any, public_key: bytes) -> Verified:
    """The statement in `held` (a DSSE envelope as JSON) when `public_key` signed it and it
    is an in-toto Statement v1 with well-formed subjects; BadStatement saying what is not."""
    if not isinstance(held, dict) or not {"payload", "payloadType", "signatures"} <= held.keys():
        raise BadStatement("not a DSSE envelope: it needs payload, payloadType and signatures")
    if held["payloadType"] != PAYLOAD_TYPE:
        raise BadStatement(f"payloadType is {held['payloadType']!r}, not {PAYLOAD_TYPE}")
    payload = _unb64(held["payload"], "payload")
    signed = pae(PAYLOAD_TYPE.encode(), payload)
    signatures = held["signatures"] if isinstance(held["signatures"], list) else []
    keyid = next((s.get("keyid", "") for s in signatures if _holds(s, public_key, signed)), None)
    if keyid is None:
        raise BadStatement(f"bad signature: key {wallet_id(public_key)} did not sign this envelope")
    try:
        about = loads_bounded(payload)
    except ValueError:  # not UTF-8, not JSON, or nested too deep to read (TooDeep)
        raise BadStatement("the payload is not JSON") from None
    _check_statement(about)
    return Verified(about, str(keyid))


def _holds(signature: Any, public_key: bytes, signed: bytes) -> bool:
    if not isinstance(signature, dict) or not isinstance(signature.get("sig"), str):
        return False
    try:
        sig = base64.b64decode(signature["sig"], validate=True)
    except ValueError:  # binascii.Error, or a character that is not ASCII
        return False
    return signature_holds(public_key, sig, signed)


def _check_statement(about: Any) -> None:
    if not isinstance(about, dict) or about.get("_type") != STATEMENT_TYPE:
        raise BadStatement(f"the payload is not an in-toto statement (_type must be {STATEMENT_TYPE})")
    found = about.get("subject")
    if not isinstance(found, list) or not found:
        raise BadStatement("the statement names no subject")
    for each in found:
        name = each.get("name") if isinstance(each, dict) else None
        sha = (
            each.get("digest", {}).get("sha256")
            if isinstance(each, dict) and isinstance(each.get("digest"), dict)
            else None
        )
        if not isinstance(name, str) or not name or not isinstance(sha, str) or not SHA256.fullmatch(sha):
            raise BadStatement("each subject needs a name and a sha256 digest (64 lowercase hex digits)")
    if not isinstance(about.get("predicateType"), str) or not about["predicateType"]:
        raise BadStatement("the statement names no predicateType")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(text: Any, what: str) -> bytes:
    try:
        if isinstance(text, str):
            return base64.b64decode(text, validate=True)
    except ValueError:  # binascii.Error, or a character that is not ASCII
        pass
    raise BadStatement(f"the envelope's {what} is not base64")
