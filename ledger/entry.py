"""Ledger entries: DSSE envelopes over JCS payloads, signed with Ed25519.

The payload is the RFC 8785 form of
`{"v":2,"kind":…,"author":…,"at":…,"log":…,"seq":…,"body":{…}}`: `log` is the origin of
the one log the entry is meant for (its genesis entry fixes it) and `seq` the author's
sequence number on that log, 1, 2, 3, … with no gap, so that a signed entry can be
recorded once, on one log, and never replayed. The envelope (`payload`, `payloadType`, and one signature whose `keyid` is the signer's
raw public key in hex) is stored as its own JCS bytes, and those exact bytes are what a
leaf hashes and an auditor checks. The author field names the wallet id of that key,
so an entry proves who wrote it without any outside key directory.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import lru_cache
from typing import TYPE_CHECKING, Any

import orjson

from ledger import canonical
from ledger.errors import LedgerError
from ledger.keys import Wallet, signature_holds, wallet_id

if TYPE_CHECKING:
    from ledger.receipts import Receipt

PAYLOAD_TYPE = "application/vnd.agentd.entry.v2+json"
_PAYLOAD_TYPE = PAYLOAD_TYPE.encode()
VERSION = 2
# Version 1 payloads named no log and no sequence number: a signed v1 entry could be
# recorded again later, or on another log. They are refused by name.
OLD_PAYLOAD_TYPE = b"application/vnd.agentd.entry.v1+json"
MAX_SEQ = 2**53 - 1
# The most bytes one entry (its envelope, as stored) may hold when it is appended: 1 MiB.
# Honest entries are far smaller: a session or a transfer under 1 kB, a release a few kB,
# a seal about 90 bytes a task it seals or shows (2 kB for the demo's 12 tasks, 37 kB for
# 400, 90 kB for 1,000), so this holds a seal of some 11,000 tasks. Appends refuse a
# larger entry before anything is written; replays and imports take what a log holds.
MAX_ENTRY_BYTES = 1024 * 1024

KIND = re.compile(r"[a-z][a-z0-9-]*(\.[a-z][a-z0-9-]*)+/v[1-9][0-9]*")
WALLET_ID = re.compile(r"[0-9a-f]{32}")
# A log's origin is also the key name of its checkpoints, which signed notes allow to hold
# no space and no "+".
ORIGIN = re.compile(r"[!-*,-~]{1,200}")
AT = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z")
_HEX64 = re.compile(rb"[0-9a-f]{64}")
# Every envelope value is base64 or hex, so the JCS form of the envelope is this template.
_ENVELOPE = re.compile(
    rb'\{"payload":"([^"]*)","payloadType":"([^"]*)","signatures":\[\{"keyid":"([^"]*)","sig":"([^"]*)"\}\]\}'
)
_PAYLOAD_KEYS = {"at", "author", "body", "kind", "log", "seq", "v"}
# The base64 characters whose spare low bits are zero: before "=" (2 bits), before "==" (4 bits).
_NO_SPARE_BITS = (frozenset(b"AEIMQUYcgkosw048"), frozenset(b"AQgw"))


class EntryError(LedgerError):
    """An entry's bytes are not a well-formed, canonical, correctly signed entry."""


class EntryTooLarge(EntryError):
    """An entry holds more than MAX_ENTRY_BYTES: an append refuses it before writing anything."""


def too_large(raw: bytes) -> str | None:
    """Why an entry of these bytes is too large to append, or None."""
    if len(raw) <= MAX_ENTRY_BYTES:
        return None
    return f"{len(raw):,} bytes, over the {MAX_ENTRY_BYTES:,} an entry may hold (MAX_ENTRY_BYTES)"


@dataclass(slots=True)
class Entry:
    """One signed statement; `pulse` is its 1-based place, set when the log records it.
    Treat it as read-only: the bytes are what counts, the other fields are read from them."""

    raw: bytes
    kind: str
    author: str
    at: str
    log: str
    seq: int
    body: dict[str, Any]
    leaf_hash: bytes
    pulse: int | None = None
    # What the log signed when it recorded the entry (see ledger.receipts); None until then,
    # and on entries read back from the store.
    receipt: Receipt | None = None

    @property
    def claim_id(self) -> str:
        return self.leaf_hash.hex()

    @property
    def public_key(self) -> bytes:
        return bytes.fromhex(self._envelope_field(3).decode())

    @property
    def signature(self) -> bytes:
        return base64.b64decode(self._envelope_field(4))

    def _envelope_field(self, group: int) -> bytes:
        match = _ENVELOPE.fullmatch(self.raw)
        if match is None:
            raise EntryError("not an entry envelope")
        return match.group(group)

    @classmethod
    def create(
        cls, wallet: Wallet, kind: str, body: dict[str, Any], *, log: str, seq: int, at: str | None = None
    ) -> Entry:
        """Signs a new entry as `wallet` for the log named `log`, as the author's `seq`-th
        entry on it; the log assigns its Pulse when it records it."""
        # One remembered check of the names a writer's entries repeat (see _names_valid).
        if not isinstance(kind, str) or not isinstance(log, str) or not _names_valid(kind, wallet.id, log):
            _explain_created_names(kind, log)
        if not isinstance(body, dict):
            raise EntryError(f"the body of a {kind} entry must be a JSON object, not {type(body).__name__}")
        if type(seq) is not int or not 1 <= seq <= MAX_SEQ:
            raise EntryError(f"bad sequence number {seq!r}: an author's entries on a log count 1, 2, 3, …")
        if at is None:
            at = now()
        elif not isinstance(at, str) or not _valid_time(at):
            raise EntryError(f'bad time {at!r}: an entry is made at a UTC time like "2026-11-29T12:00:00Z"')
        doc = {"v": VERSION, "kind": kind, "author": wallet.id, "at": at, "log": log, "seq": seq, "body": body}
        # The fields around the body are checked names, a time and safe integers.
        payload = canonical.dumps(doc, inner=body)
        signature = wallet.sign(pae(_PAYLOAD_TYPE, payload))
        payload_b64, sig_b64 = (
            binascii.b2a_base64(payload, newline=False),
            binascii.b2a_base64(signature, newline=False),
        )
        raw = _envelope(payload_b64, wallet.public_key.hex().encode(), sig_b64)
        # The stored body is the one the bytes say, not the caller's object (tuples, later edits).
        return cls(raw, kind, wallet.id, at, log, seq, orjson.loads(payload)["body"], leaf_hash(raw))

    @classmethod
    def parse(cls, raw: bytes, pulse: int | None = None, *, verify: bool = True, leaf: bytes | None = None) -> Entry:
        """Reads an entry's bytes. With `verify`, checks canonical form, signature and author.
        `leaf` is the bytes' leaf hash when the caller has computed it already."""
        match = _ENVELOPE.fullmatch(raw)
        if match is None:
            if verify:
                _explain_envelope(raw)
            raise EntryError("not an entry envelope")
        payload_b64, payload_type, keyid, sig_b64 = match.groups()
        payload = _unb64(payload_b64, "payload")
        if payload_type == OLD_PAYLOAD_TYPE:
            raise EntryError(
                "a v1 entry (it names no log and no sequence number, so its signature could be replayed): "
                "this ledger records v2 entries only"
            )
        if not verify:
            try:
                doc = orjson.loads(payload)
                fields = doc["kind"], doc["author"], doc["at"], doc["log"], doc["seq"], doc["body"]
            except (ValueError, TypeError, KeyError):
                raise EntryError("payload is not an entry payload") from None
            return cls(raw, *fields, leaf or leaf_hash(raw), pulse)
        if payload_type != _PAYLOAD_TYPE:
            raise EntryError(f"payloadType must be {PAYLOAD_TYPE}")
        signer = _signer(keyid)
        if signer is None:
            raise EntryError("keyid must be the signer's 32-byte Ed25519 public key in lowercase hex")
        public_key, author = signer
        signature = _unb64(sig_b64, "sig")
        doc = _payload(payload)
        if author != doc["author"]:
            raise EntryError(f"author {doc['author']} is not the wallet of the key that signed the entry")
        if not signature_holds(public_key, signature, pae(payload_type, payload)):
            raise EntryError("bad signature: the author's key did not sign these bytes")
        fields = doc["kind"], doc["author"], doc["at"], doc["log"], doc["seq"], doc["body"]
        return cls(raw, *fields, leaf or leaf_hash(raw), pulse)


def pae(payload_type: bytes, payload: bytes) -> bytes:
    """DSSE's pre-authentication encoding: what the signature covers."""
    return b"DSSEv1 %d %b %d %b" % (len(payload_type), payload_type, len(payload), payload)


def leaf_hash(raw: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + raw).digest()


def now() -> str:
    return _utc(int(time.time()))


@lru_cache(maxsize=2)
def _utc(second: int) -> str:
    return datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _envelope(payload_b64: bytes, keyid: bytes, sig_b64: bytes) -> bytes:
    return b'{"payload":"%b","payloadType":"%b","signatures":[{"keyid":"%b","sig":"%b"}]}' % (
        payload_b64,
        _PAYLOAD_TYPE,
        keyid,
        sig_b64,
    )


def _payload(payload: bytes) -> dict[str, Any]:
    """The payload's fields, checked: canonical form, exactly the entry's keys, each well formed."""
    return _plain_payload(payload) or _checked_payload(payload)


def _plain_payload(payload: bytes) -> dict[str, Any] | None:
    """The fields of a payload that is plainly good, or None to let `_checked_payload`
    decide and word the reason. Verify runs this for every entry of the log, so it checks
    the fields before the canonical form: once they hold, the top level is all safe
    integers and strings under ASCII keys, so only the body needs the walk that shows
    orjson prints its JCS form, and the stored bytes are held against that print."""
    try:
        doc = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    if type(doc) is not dict or doc.keys() != _PAYLOAD_KEYS:
        return None
    kind, author, at, log, seq, v = doc["kind"], doc["author"], doc["at"], doc["log"], doc["seq"], doc["v"]
    good = (
        type(v) is int
        and v == VERSION
        and type(seq) is int
        and 1 <= seq <= MAX_SEQ
        and type(kind) is str
        and type(author) is str
        and type(log) is str
        and _names_valid(kind, author, log)
        and type(at) is str
        and _valid_time(at)
        and type(doc["body"]) is dict
        and canonical.plain(doc["body"])
        and orjson.dumps(doc, option=orjson.OPT_SORT_KEYS) == payload
    )
    return doc if good else None


def _checked_payload(payload: bytes) -> dict[str, Any]:
    try:
        doc = canonical.loads(payload)
    except LedgerError as exc:
        raise EntryError(f"payload {exc}") from None
    if type(doc) is not dict or doc.keys() != _PAYLOAD_KEYS:
        raise EntryError(f"payload must hold exactly {sorted(_PAYLOAD_KEYS)}")
    kind, author, at, log, seq = doc["kind"], doc["author"], doc["at"], doc["log"], doc["seq"]
    if type(doc["v"]) is not int or doc["v"] != VERSION:
        raise EntryError(f"payload version must be {VERSION}")
    # Types first, then one check remembered per distinct kind, author and log: they recur.
    if type(kind) is not str or type(author) is not str or type(log) is not str or not _names_valid(kind, author, log):
        _explain_names(kind, author, log)
    if type(at) is not str or not _valid_time(at):
        raise EntryError('at must be a UTC time like "2026-11-29T12:00:00Z"')
    if type(seq) is not int or not 1 <= seq <= MAX_SEQ:
        raise EntryError("seq must be the author's sequence number on the log: a whole number from 1")
    if type(doc["body"]) is not dict:
        raise EntryError("body must be a JSON object")
    return doc


@lru_cache(maxsize=4096)
def _names_valid(kind: str, author: str, log: str) -> bool:
    return bool(KIND.fullmatch(kind) and WALLET_ID.fullmatch(author) and ORIGIN.fullmatch(log))


def _explain_created_names(kind: Any, log: Any) -> None:
    if not isinstance(kind, str) or not KIND.fullmatch(kind):
        raise EntryError(f"bad kind {kind!r}: expected a name like funds.transfer/v1")
    raise EntryError(f"bad log {log!r}: an entry names its log's origin (printable ASCII, no space or '+')")


def _explain_names(kind: Any, author: Any, log: Any) -> None:
    if not isinstance(kind, str) or not KIND.fullmatch(kind):
        raise EntryError(f"bad kind {kind!r}: expected a name like funds.transfer/v1")
    if not isinstance(author, str) or not WALLET_ID.fullmatch(author):
        raise EntryError("author must be a wallet id (32 lowercase hex digits)")
    raise EntryError("log must name the log's origin (printable ASCII, no space or '+')")


@lru_cache(maxsize=4096)
def _signer(keyid: bytes) -> tuple[bytes, str] | None:
    """The public key a keyid names and the wallet id it gives, or None if it names none."""
    if not _HEX64.fullmatch(keyid):
        return None
    public_key = bytes.fromhex(keyid.decode())
    return public_key, wallet_id(public_key)


@lru_cache(maxsize=4096)
def _valid_time(at: str) -> bool:
    if not AT.fullmatch(at):
        return False
    try:
        datetime(int(at[:4]), int(at[5:7]), int(at[8:10]), int(at[11:13]), int(at[14:16]), int(at[17:19]))
    except ValueError:
        return False
    return True


def _unb64(text: bytes, field: str) -> bytes:
    # Canonical base64 only: set padding bits or other spellings would give one entry two
    # byte forms. A strict decode refuses every other spelling; the bits the last
    # character carries beyond the data (4 before "==", 2 before "=") must be zero.
    try:
        data = binascii.a2b_base64(text, strict_mode=True)
    except binascii.Error:
        raise EntryError(f"{field} is not canonical base64") from None
    if text[-1:] == b"=":
        two = text[-2:] == b"=="
        if text[-3 if two else -2] not in _NO_SPARE_BITS[two]:
            raise EntryError(f"{field} is not canonical base64")
    return data


def _explain_envelope(raw: bytes) -> None:
    """Raises the most useful reason a byte string is not an envelope."""
    try:
        doc = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise EntryError("not JSON") from None
    if not isinstance(doc, dict) or doc.keys() != {"payload", "payloadType", "signatures"}:
        raise EntryError("not a DSSE envelope: expected payload, payloadType and signatures")
    sigs = doc["signatures"]
    if (
        not isinstance(sigs, list)
        or len(sigs) != 1
        or not isinstance(sigs[0], dict)
        or sigs[0].keys() != {"keyid", "sig"}
    ):
        raise EntryError("an entry carries exactly one signature, with keyid and sig")
    if canonical.dumps(doc) == raw:
        raise EntryError("payload and sig must be base64 strings, keyid a hex string")
    raise EntryError("not in canonical form (RFC 8785): re-canonicalising changes the bytes")
