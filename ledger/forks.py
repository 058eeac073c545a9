"""Fork proofs: two checkpoints of one log that no log growing only by appends signs.

Two signed checkpoints of one origin conflict when the smaller tree is not a prefix of
the larger: of the same size with other roots, or the larger tree's prefix at the
smaller size hashes to another root than the smaller checkpoint's. A fork proof holds
both signed notes and, when their sizes differ, that prefix root with an RFC 9162
consistency proof from it to the larger root; anyone holding the log's key checks it
offline, without the log (ForkProof.check).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ledger import checkpoint as notes, merkle
from ledger.checkpoint import Checkpoint
from ledger.keys import b64
from ledger.merkle import ProofError
from ledger.proofs import ConsistencyProof


@dataclass(frozen=True)
class ForkProof:
    first: str  # the signed note of the smaller tree (or of the same size)
    second: str  # the signed note of the larger tree
    prefix: bytes  # the larger tree's root at the smaller size
    path: list[bytes]  # consistency proof from `prefix` to the larger root

    def check(self, public_key: bytes) -> tuple[Checkpoint, Checkpoint]:
        """The two checkpoints, if the proof holds: both signed by `public_key` for one
        log and not consistent. ProofError (or CheckpointError) saying why otherwise."""
        a, b = notes.parse(self.first), notes.parse(self.second)
        if a.origin != b.origin:
            raise ProofError(f"the checkpoints are of two logs ({a.origin}, {b.origin}), not one")
        for note in (self.first, self.second):
            notes.verify(note, public_key, a.origin)
        if a.size > b.size:
            raise ProofError("the first checkpoint of a fork proof is the smaller")
        if a.size == b.size:
            if self.path or self.prefix != b.root:
                raise ProofError("checkpoints of one size need no consistency proof: the prefix is the second's root")
        else:
            merkle.verify_consistency(a.size, b.size, self.path, self.prefix, b.root)
        if self.prefix == a.root:
            raise ProofError(f"the checkpoints at sizes {a.size} and {b.size} are consistent: they prove no fork")
        return a, b

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "fork",
            "origin": notes.parse(self.first).origin,
            "checkpoints": [self.first, self.second],
            "prefix_root": b64(self.prefix),
            "proof": [b64(h) for h in self.path],
        }

    @classmethod
    def from_json(cls, doc: Any) -> ForkProof:
        try:
            first, second = doc["checkpoints"]
            prefix = base64.b64decode(doc["prefix_root"], validate=True)
            path = [base64.b64decode(h, validate=True) for h in doc["proof"]]
        except (KeyError, TypeError, ValueError, binascii.Error):
            raise ProofError(
                'a fork proof is {"checkpoints": [NOTE, NOTE], "prefix_root": B64, "proof": [B64, …]}'
            ) from None
        if not isinstance(first, str) or not isinstance(second, str):
            raise ProofError("a fork proof's checkpoints are signed notes (text)")
        return cls(first, second, prefix, path)


def fork_between(one: str, other: str, consistency: Callable[[int, int], ConsistencyProof]) -> ForkProof | None:
    """The fork proof between two signed checkpoints, or None when they are consistent.
    `consistency(m, n)` is a consistency proof of the larger checkpoint's own tree (the
    caller holds that tree); ProofError when it does not lead to that checkpoint's root."""
    first, second = sorted((one, other), key=lambda note: notes.parse(note).size)
    a, b = notes.parse(first), notes.parse(second)
    if a.size == b.size:
        prefix, path = b.root, []
    else:
        proof = consistency(a.size, b.size)
        if proof.new_root != b.root:
            raise ProofError(f"the tree the proof comes from is not the checkpoint's at size {b.size}")
        prefix, path = proof.old_root, proof.path
    return ForkProof(first, second, prefix, path) if prefix != a.root else None
