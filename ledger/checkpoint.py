"""Checkpoints: the log's signed tree heads, in the C2SP signed-note format.

    <origin>
    <size>
    <base64 root>

    — <key name> <base64(key hash[4] ‖ Ed25519 signature)>

The key hash is the first 4 bytes of SHA-256(name ‖ "\\n" ‖ 0x01 ‖ public key), as
c2sp.org/signed-note defines it for Ed25519; the signature covers the text above the
blank line. Well-formed signatures by other keys are ignored, as the format allows; a
malformed signature line makes the whole note malformed.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from dataclasses import dataclass

from ledger.errors import LedgerError
from ledger.keys import Wallet, b64, signature_holds

ED25519 = b"\x01"
DASH = "\u2014"
_SIGNATURE_LINE = re.compile(rf"{DASH} (\S+) (\S+)")


class CheckpointError(LedgerError):
    """A checkpoint is malformed or not signed by the key that should have signed it."""


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes

    def text(self) -> str:
        return f"{self.origin}\n{self.size}\n{b64(self.root)}\n"


def key_hash(name: str, public_key: bytes) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + ED25519 + public_key).digest()[:4]


def sign(checkpoint: Checkpoint, wallet: Wallet, name: str) -> str:
    """The signed note for `checkpoint`, signed by `wallet` under key name `name`."""
    text = checkpoint.text()
    blob = key_hash(name, wallet.public_key) + wallet.sign(text.encode())
    return f"{text}\n{DASH} {name} {b64(blob)}\n"


def parse(note: str) -> Checkpoint:
    """Reads a well-formed note's checkpoint without checking its signatures."""
    text, _ = _split(note)
    lines = text.split("\n")[:-1]
    if len(lines) < 3 or not lines[0] or not re.fullmatch(r"0|[1-9][0-9]*", lines[1]):
        raise CheckpointError("a checkpoint's text is an origin line, a decimal size and a base64 root")
    try:
        root = base64.b64decode(lines[2], validate=True)
    except binascii.Error:
        raise CheckpointError("the checkpoint's root is not base64") from None
    if len(root) != 32:
        raise CheckpointError("the checkpoint's root is not a SHA-256 hash")
    return Checkpoint(lines[0], int(lines[1]), root)


def verify(note: str, public_key: bytes, name: str) -> Checkpoint:
    """The note's checkpoint, if `public_key` signed it under `name`; else CheckpointError."""
    text, signatures = _split(note)
    checkpoint = parse(note)
    if checkpoint.origin != name:
        raise CheckpointError(f"the checkpoint is for log {checkpoint.origin!r}, not {name!r}")
    wanted = key_hash(name, public_key)
    for signer, blob in signatures:
        if signer == name and blob[:4] == wanted and signature_holds(public_key, blob[4:], text.encode()):
            return checkpoint
    raise CheckpointError(f"the checkpoint carries no valid signature by {name}'s key")


def _split(note: str) -> tuple[str, list[tuple[str, bytes]]]:
    """The signed text and each signature line's key name and decoded blob."""
    head, sep, tail = note.rpartition("\n\n")
    if not sep or not tail.endswith("\n"):
        raise CheckpointError("not a signed note: expected text, a blank line, then signature lines")
    lines = tail[:-1].split("\n")
    if not all(lines):
        raise CheckpointError("a signed note needs at least one signature line")
    signatures = []
    for line in lines:
        match = _SIGNATURE_LINE.fullmatch(line)
        if match is None:
            raise CheckpointError(f"bad signature line {line!r}")
        try:
            blob = base64.b64decode(match.group(2), validate=True)
        except binascii.Error:
            blob = b""
        # A key hash and at least one byte of signature, as c2sp.org/signed-note requires.
        if len(blob) < 5:
            raise CheckpointError(f"bad signature line {line!r}")
        signatures.append((match.group(1), blob))
    return head + "\n", signatures
