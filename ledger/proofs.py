"""Inclusion and consistency proofs as documents an auditor can keep and check offline."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ledger import merkle
from ledger.keys import b64


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
