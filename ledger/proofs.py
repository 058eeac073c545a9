"""Inclusion and consistency proofs as documents an auditor can keep and check offline."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass
from typing import Any

from ledger import merkle
from ledger.keys import b64
from ledger.merkle import ProofError


@dataclass(frozen=True)
class InclusionProof:
    """Proves the entry with `leaf_hash` is Pulse `pulse` of the tree `root` of `size`."""

    pulse: int
    size: int
    leaf_hash: bytes
    root: bytes
    path: list[bytes]

    def verify(self) -> None:
        merkle.verify_inclusion(self.pulse - 1, self.size, self.leaf_hash, self.path, self.root)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "inclusion",
            "pulse": self.pulse,
            "leaf_index": self.pulse - 1,
            "tree_size": self.size,
            "claim": self.leaf_hash.hex(),
            "leaf_hash": b64(self.leaf_hash),
            "root": b64(self.root),
            "proof": [b64(h) for h in self.path],
        }


@dataclass(frozen=True)
class ConsistencyProof:
    """Proves the tree `old_root` of `old_size` is a prefix of the tree `new_root`."""

    old_size: int
    new_size: int
    old_root: bytes
    new_root: bytes
    path: list[bytes]

    def verify(self) -> None:
        merkle.verify_consistency(self.old_size, self.new_size, self.path, self.old_root, self.new_root)

    def to_json(self) -> dict[str, Any]:
        return {
            "type": "consistency",
            "size1": self.old_size,
            "size2": self.new_size,
            "root1": b64(self.old_root),
            "root2": b64(self.new_root),
            "proof": [b64(h) for h in self.path],
        }

    @classmethod
    def from_json(cls, doc: Any) -> ConsistencyProof:
        """The proof `to_json` wrote (other keys, like the checkpoint `prove` adds, are ignored)."""
        try:
            if doc["type"] != "consistency":
                raise ProofError(f"this is an {doc['type']} proof, not a consistency proof")
            roots = [base64.b64decode(doc[k], validate=True) for k in ("root1", "root2")]
            path = [base64.b64decode(h, validate=True) for h in doc["proof"]]
            sizes = [doc[k] for k in ("size1", "size2")]
        except (KeyError, TypeError, ValueError, binascii.Error):
            raise ProofError(
                'a consistency proof is {"type": "consistency", "size1", "size2", "root1", "root2", "proof"}'
            ) from None
        if not all(type(n) is int for n in sizes):
            raise ProofError("a consistency proof's sizes are whole numbers")
        return cls(sizes[0], sizes[1], roots[0], roots[1], path)
