"""Witness cosignatures on checkpoints, in the C2SP tlog-cosignature format (Ed25519).

A cosignature is one more signature line on a checkpoint's note:

    — <witness name> base64(key ID[4] ‖ timestamp[8, big-endian] ‖ Ed25519 signature[64])

where the key ID is SHA-256(name ‖ "\\n" ‖ 0x04 ‖ public key)[:4] and the signature covers
"cosignature/v1\\n", "time <timestamp>\\n" and the checkpoint's text. It states that, at
that time, this is the largest tree the witness has seen of the log, and that it saw it
grow only by appends (see ledger.witness).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ledger import checkpoint as notes
from ledger.keys import Wallet, b64, signature_holds

COSIGNATURE = b"\x04"
HEADER = "cosignature/v1"


@dataclass(frozen=True)
class Cosignature:
    name: str
    timestamp: int


def message(text: str, timestamp: int) -> bytes:
    return f"{HEADER}\ntime {timestamp}\n{text}".encode()


def cosign(note: str, key: Wallet, name: str, timestamp: int) -> str:
    """`note` with `key`'s cosignature under `name` added."""
    text = notes.signed_text(note)
    blob = notes.key_hash(name, key.public_key, COSIGNATURE) + struct.pack(">Q", timestamp)
    blob += key.sign(message(text, timestamp))
    line = f"{notes.DASH} {name} {b64(blob)}\n"
    return notes.with_signatures(note, f"{text}\n{line}")


def cosigned_by(note: str, name: str, public_key: bytes) -> Cosignature | None:
    """The witness's valid cosignature on `note`, if it carries one."""
    text = notes.signed_text(note)
    wanted = notes.key_hash(name, public_key, COSIGNATURE)
    for signer, blob in notes.signatures(note):
        if signer != name or blob[:4] != wanted or len(blob) != 4 + 8 + 64:
            continue
        (timestamp,) = struct.unpack(">Q", blob[4:12])
        if timestamp < 2**63 and signature_holds(public_key, blob[12:], message(text, timestamp)):
            return Cosignature(name, timestamp)
    return None


def vkey(name: str, public_key: bytes) -> str:
    return notes.vkey(name, public_key, COSIGNATURE)


def parse_vkey(text: str) -> tuple[str, bytes]:
    return notes.parse_vkey(text, COSIGNATURE)


def claimed(note: str) -> list[Cosignature]:
    """The cosignatures a note carries, as their lines say, without checking them: only
    a verifier holding a witness's key can tell whether that witness's line holds."""
    found = []
    for signer, blob in notes.signatures(note):
        if len(blob) == 4 + 8 + 64:
            found.append(Cosignature(signer, struct.unpack(">Q", blob[4:12])[0]))
    return found
