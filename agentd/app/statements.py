"""Releases as in-toto statements (`improve releases show ID --intoto`), and checking a
statement's envelope offline against a public key (`agentd verify-statement`)."""

from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path
from typing import Any

from agentd.app.attest import published, publisher_wallet
from agentd.app.ledger import open_ledger
from agentd.errors import AgentdError, WrongValue
from agentd.home import Home
from improver import (
    RELEASE_PREDICATE,
    VerifiedStatement,
    loads_bounded,
    statement_about,
    statement_envelope,
    verify_statement,
)
from ledger import CheckpointError, LedgerError, parse_vkey, read_key_file

HEX_KEY = re.compile(r"^[0-9a-fA-F]{64}$")


def release_envelope(home: Home, ref: str, wallet: str | None) -> dict[str, Any]:
    """Release `ref`'s statement (its claim's body the predicate) in a DSSE envelope,
    signed by `wallet`, or by its publisher's wallet when this home holds it."""
    with open_ledger(home, read_only=True) as ledger:
        entry, release = published(ledger, ref)
    signer = publisher_wallet(home, entry.author, wallet)
    return statement_envelope(statement_about(release.record, RELEASE_PREDICATE, entry.body), signer)


def release_claim(home: Home, ref: str) -> dict[str, Any]:
    """Release `ref`'s claim: its id, Pulse, author and body."""
    with open_ledger(home, read_only=True) as ledger:
        entry, _ = published(ledger, ref)
    return {"claim": entry.claim_id, "pulse": entry.pulse, "author": entry.author, "at": entry.at, "body": entry.body}


def public_key(given: str) -> bytes:
    """An Ed25519 public key: 64 hex digits, base64 (as `agentd wallet show` prints it), a
    verifier key (NAME+HASH+BASE64), or a file holding one of those or a wallet's key file."""
    path = Path(given)
    if path.is_file():
        try:
            return read_key_file(path).public_key
        except (LedgerError, KeyError, TypeError, ValueError):
            given = path.read_text().strip()
    text = given.strip()
    if HEX_KEY.fullmatch(text):
        return bytes.fromhex(text)
    try:
        raw = base64.b64decode(text, validate=True)
        if len(raw) == 32:
            return raw
    except binascii.Error:
        pass
    try:
        return parse_vkey(text)[1]
    except CheckpointError:
        raise WrongValue(
            f"--key {given!r}: give an Ed25519 public key (64 hex digits, base64, a verifier key) or a file holding one"
        ) from None


def check_file(path: Path, key: bytes) -> VerifiedStatement:
    """The statement in the envelope at `path`, checked against `key` (BadStatement if not)."""
    try:
        held = loads_bounded(path.read_text())
    except OSError as exc:
        raise AgentdError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError:  # not UTF-8, not JSON, or nested too deep to be an envelope (TooDeep)
        held = None
    return verify_statement(held, key)
