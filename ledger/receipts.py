"""Checkpoints signed as the log grows, and the receipt each append returns.

The log signs a checkpoint in an append's own transaction once `every` entries have
come since its last checkpoint, or `seconds` have passed since the last was signed (a
CheckpointPolicy). Each entry an append records gets a Receipt: its Pulse and leaf hash,
and either the checkpoint signed in that transaction, which covers it, or the log's
signed promise that a checkpoint covering it will be signed by a deadline, the last
checkpoint's time plus `seconds`. A promise also names the tree the log held after the
append (its size and root), so the log is bound to it as to a checkpoint: any later
checkpoint must extend it.

The longest an entry waits for its checkpoint is `seconds`, on one condition: something
holding the log's key acts by the deadline. Any append made after it signs the overdue
checkpoint in its own transaction; a server calls Ledger.sign_due() on a timer;
`agentd ledger checkpoint` signs one on demand.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Any, NamedTuple

from ledger import checkpoint as notes
from ledger.checkpoint import CheckpointError
from ledger.keys import Wallet, b64
from ledger.store import StoredCheckpoint

PROMISE = "agentd.ledger/promise/v1"
_DECIMAL = re.compile(r"0|[1-9][0-9]*")


@dataclass(frozen=True)
class CheckpointPolicy:
    """When the log signs a checkpoint on its own: every `every` entries, or once
    `seconds` have passed since the last one, whichever comes first."""

    every: int = 1000
    seconds: float = 60.0

    def __post_init__(self) -> None:
        if self.every < 1 or not self.seconds > 0:
            raise ValueError("a checkpoint policy signs every 1 or more entries, at least every so many seconds (> 0)")

    def due(self, last: StoredCheckpoint | None, size: int, now: float) -> bool:
        if last is None:
            return size > 0
        return size > last.size and (size - last.size >= self.every or now >= self.deadline(last))

    def deadline(self, last: StoredCheckpoint) -> int:
        return int(last.at + self.seconds)


@dataclass(frozen=True)
class Promise:
    """The log's word that its tree of `size` entries has `root` and that a checkpoint
    covering it will be signed by `deadline` (seconds since the epoch)."""

    origin: str
    size: int
    root: bytes
    deadline: int

    def text(self) -> str:
        return f"{PROMISE}\n{self.origin}\n{self.size}\n{b64(self.root)}\n{self.deadline}\n"

    def sign(self, key: Wallet) -> str:
        return notes.sign_text(self.text(), key, self.origin)

    @classmethod
    def parse(cls, note: str) -> Promise:
        lines = notes.signed_text(note).split("\n")[:-1]
        if len(lines) != 5 or lines[0] != PROMISE or not all(_DECIMAL.fullmatch(x) for x in (lines[2], lines[4])):
            raise CheckpointError(f"a promise's text is {PROMISE}, an origin, a size, a base64 root and a deadline")
        try:
            root = base64.b64decode(lines[3], validate=True)
        except ValueError:  # binascii.Error, or text that is not ASCII
            raise CheckpointError("the promise's root is not base64") from None
        return cls(lines[1], int(lines[2]), root, int(lines[4]))


class Receipt(NamedTuple):
    """What the log signed for one entry it recorded: a checkpoint that covers it, or a
    promise of one. Both are None when the ledger that appended holds no log key. (A
    tuple: an append makes one for each entry, and a frozen dataclass costs twice
    as much to make.)"""

    pulse: int
    leaf_hash: bytes
    checkpoint: str | None = None
    promise: str | None = None

    def check(self, public_key: bytes, origin: str) -> tuple[int, bytes]:
        """The size and root of the tree the log's signature binds the entry into;
        CheckpointError if the receipt is unsigned, signed by another key or too small.
        An inclusion proof of the Pulse in that tree (Ledger.inclusion_proof) completes it."""
        if self.checkpoint is not None:
            signed = notes.verify(self.checkpoint, public_key, origin)
            size, root = signed.size, signed.root
        elif self.promise is not None:
            promise = Promise.parse(self.promise)
            if promise.origin != origin or not notes.signed_by(self.promise, public_key, origin):
                raise CheckpointError(f"the promise carries no valid signature by the key of {origin!r}")
            size, root = promise.size, promise.root
        else:
            raise CheckpointError("the receipt is unsigned: the ledger that recorded the entry held no log key")
        if size < self.pulse:
            raise CheckpointError(f"the receipt's tree of {size} entries does not reach Pulse {self.pulse}")
        return size, root

    def to_json(self) -> dict[str, Any]:
        return {
            "pulse": self.pulse,
            "leaf_hash": b64(self.leaf_hash),
            "checkpoint": self.checkpoint,
            "promise": self.promise,
        }
