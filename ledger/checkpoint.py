"""Checkpoints: the log's signed tree heads, in the C2SP signed-note format.

    <origin>
    <size>
    <base64 root>

    — <key name> <base64(key hash[4] ‖ Ed25519 signature)>

The key hash is the first 4 bytes of SHA-256(name ‖ "\\n" ‖ 0x01 ‖ public key), as
c2sp.org/signed-note defines it for Ed25519; the signature covers the text above the
blank line. Well-formed signatures by other keys are ignored, as the format allows; a
malformed signature line makes the whole note malformed. Witnesses add their
cosignatures as more signature lines (see ledger.cosignature).

A verifier key is written as a vkey, `<name>+<key hash, hex>+<base64(type ‖ public key)>`,
the form Go's golang.org/x/mod/sumdb/note and the witness tools read.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass

from ledger.errors import LedgerError
from ledger.keys import Wallet, b64, signature_holds

ED25519 = b"\x01"
DASH = "\u2014"
_SIGNATURE_LINE = re.compile(rf"{DASH} (\S+) (\S+)")
# Verifiers must accept at least 16 signatures; more is refused rather than read.
MAX_SIGNATURES = 16
_VKEY = re.compile(r"([^\s+]+)\+([0-9a-f]{8})\+(\S+)")
# A tree size in decimal, as large as a store can count (a signed 64-bit integer).
_SIZE = re.compile(r"0|[1-9][0-9]{0,18}")
MAX_SIZE = 2**63 - 1


class CheckpointError(LedgerError):
    """A checkpoint is malformed or not signed by the key that should have signed it."""


@dataclass(frozen=True)
class Checkpoint:
    origin: str
    size: int
    root: bytes

    def text(self) -> str:
        return f"{self.origin}\n{self.size}\n{b64(self.root)}\n"


def key_hash(name: str, public_key: bytes, key_type: bytes = ED25519) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + key_type + public_key).digest()[:4]


def vkey(name: str, public_key: bytes, key_type: bytes = ED25519) -> str:
    """The verifier key of `public_key` under `name`, as text to hand to others."""
    return f"{name}+{key_hash(name, public_key, key_type).hex()}+{b64(key_type + public_key)}"


def parse_vkey(text: str, key_type: bytes = ED25519) -> tuple[str, bytes]:
    """The name and Ed25519 public key a vkey of `key_type` gives; CheckpointError if it is not one."""
    match = _VKEY.fullmatch(text.strip())
    if match is None:
        raise CheckpointError(f"{text.strip()!r} is not a verifier key: expected NAME+KEYHASH+BASE64")
    name, hashed, encoded = match.groups()
    if not name.isprintable():  # a name is hashed as UTF-8: one that cannot be is no key's
        raise CheckpointError(f"{text.strip()!r} is not a verifier key: its name is not printable text")
    blob = _base64(encoded)
    if blob is None:
        raise CheckpointError(f"the verifier key of {name} is not base64")
    if len(blob) != 33 or blob[:1] != key_type:
        raise CheckpointError(f"the verifier key of {name} is not an Ed25519 key of type 0x{key_type.hex()}")
    if key_hash(name, blob[1:], key_type).hex() != hashed:
        raise CheckpointError(f"the verifier key of {name} has a key hash that does not match its key")
    return name, blob[1:]


def sign(checkpoint: Checkpoint, wallet: Wallet, name: str) -> str:
    """The signed note for `checkpoint`, signed by `wallet` under key name `name`."""
    return sign_text(checkpoint.text(), wallet, name)


def sign_text(text: str, wallet: Wallet, name: str) -> str:
    """A signed note of `text` (newline-terminated lines), signed by `wallet` as `name`."""
    blob = key_hash(name, wallet.public_key) + wallet.sign(text.encode())
    return f"{text}\n{DASH} {name} {b64(blob)}\n"


def signed_by(note: str, public_key: bytes, name: str) -> bool:
    """Whether `public_key` signed the note's text under `name` (Ed25519 note signature)."""
    text, lines = _split(note)
    wanted = key_hash(name, public_key)
    return any(
        signer == name and blob[:4] == wanted and signature_holds(public_key, blob[4:], text.encode())
        for signer, blob in lines
    )


def parse(note: str) -> Checkpoint:
    """Reads a well-formed note's checkpoint without checking its signatures."""
    text, _ = _split(note)
    lines = text.split("\n")[:-1]
    if len(lines) < 3 or not lines[0] or not _SIZE.fullmatch(lines[1]) or int(lines[1]) > MAX_SIZE:
        raise CheckpointError(
            f"a checkpoint's text is an origin line, a decimal size (at most {MAX_SIZE}) and a base64 root"
        )
    root = _base64(lines[2])
    if root is None:
        raise CheckpointError("the checkpoint's root is not base64")
    if len(root) != 32:
        raise CheckpointError("the checkpoint's root is not a SHA-256 hash")
    return Checkpoint(lines[0], int(lines[1]), root)


def verify(note: str, public_key: bytes, name: str) -> Checkpoint:
    """The note's checkpoint, if `public_key` signed it under `name`; else CheckpointError."""
    checkpoint = parse(note)
    if checkpoint.origin != name:
        raise CheckpointError(f"the checkpoint is for log {checkpoint.origin!r}, not {name!r}")
    if not signed_by(note, public_key, name):
        raise CheckpointError(f"the checkpoint carries no valid signature by the key of {name!r}")
    return checkpoint


def signed_text(note: str) -> str:
    """The text a note's signatures cover: everything above the blank line."""
    return _split(note)[0]


def signatures(note: str) -> list[tuple[str, bytes]]:
    """Each signature line's key name and decoded blob (key hash, then signature)."""
    return _split(note)[1]


def with_signatures(note: str, other: str) -> str:
    """`note` with the signature lines of `other`, a note of the same text, added once each."""
    text, own = note.rpartition("\n\n")[::2]
    if _split(other)[0] != _split(note)[0]:
        raise CheckpointError("the two notes do not sign the same text")
    lines = own.splitlines()
    lines += [line for line in other.rpartition("\n\n")[2].splitlines() if line not in lines]
    if len(lines) > MAX_SIGNATURES:
        raise CheckpointError(f"a note may carry at most {MAX_SIGNATURES} signatures")
    return f"{text}\n\n" + "".join(line + "\n" for line in lines)


def _split(note: str) -> tuple[str, list[tuple[str, bytes]]]:
    """The signed text and each signature line's key name and decoded blob."""
    head, sep, tail = note.rpartition("\n\n")
    if not sep or not tail.endswith("\n"):
        raise CheckpointError("not a signed note: expected text, a blank line, then signature lines")
    lines = tail[:-1].split("\n")
    if not all(lines):
        raise CheckpointError("a signed note needs at least one signature line")
    if len(lines) > MAX_SIGNATURES:
        raise CheckpointError(f"a note may carry at most {MAX_SIGNATURES} signatures")
    signatures = []
    for line in lines:
        match = _SIGNATURE_LINE.fullmatch(line)
        if match is None:
            raise CheckpointError(f"bad signature line {line!r}")
        blob = _base64(match.group(2)) or b""
        # A key hash and at least one byte of signature, as c2sp.org/signed-note requires.
        if len(blob) < 5:
            raise CheckpointError(f"bad signature line {line!r}")
        signatures.append((match.group(1), blob))
    return head + "\n", signatures


def _base64(text: str) -> bytes | None:
    """Standard base64 `text` decoded; None when it is not (not ASCII at all, say)."""
    try:
        return base64.b64decode(text, validate=True)
    except ValueError:  # binascii.Error is one, and so is what non-ASCII text raises
        return None
