"""RFC 9162 Merkle trees over leaf hashes: roots, inclusion and consistency proofs.

Pure functions: callers pass the leaf hashes (SHA-256(0x00 ‖ entry)) they keep, or a
function giving the hash of any subtree (the stored tree answers it in a few reads; see
ledger.tiles), so no entry is rehashed to build a proof. Verification follows RFC 9162 §2.1.3.2 and §2.1.4.2
and raises ProofError with the reason a proof fails.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence

from ledger.errors import LedgerError

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()

# The hash of the subtree over leaves lo..hi-1 (hi - lo >= 1).
Subtree = Callable[[int, int], bytes]
# Where a Frontier reports the nodes it completes: (level, index, hash), level >= 1.
Completed = list[tuple[int, int, bytes]]


class ProofError(LedgerError):
    """A Merkle proof does not prove what it claims."""


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def root(leaves: Sequence[bytes]) -> bytes:
    """The tree head of these leaves (pairing level by level gives RFC 9162's shape)."""
    if not leaves:
        return EMPTY_ROOT
    sha256 = hashlib.sha256
    level = list(leaves)
    while len(level) > 1:
        pairs = iter(level)
        # node_hash inlined: the start-up check hashes every node of the tree this way.
        paired = [sha256(b"\x01" + left + right).digest() for left, right in zip(pairs, pairs, strict=False)]
        if len(level) % 2:
            paired.append(level[-1])
        level = paired
    return level[0]


class Frontier:
    """The right edge of a growing tree: the roots of its perfect subtrees, largest first.

    Appending is O(1) amortised and the root is O(log n), so a log can keep its head
    current without rereading every leaf.
    """

    __slots__ = ("completed", "nodes", "size", "stride")

    def __init__(self, size: int = 0, nodes: list[bytes] | None = None) -> None:
        self.size = size
        self.nodes = nodes or []
        # When set (see keep), the nodes completed at levels that are multiples of stride.
        self.completed: Completed | None = None
        self.stride = 0

    def keep(self, stride: int) -> Completed:
        """From now on, records each node completed at a level that is a multiple of
        `stride` in the list returned (the stored tree's upper levels; see ledger.tiles)."""
        self.completed, self.stride = [], stride
        return self.completed

    def append(self, leaf: bytes) -> None:
        nodes = self.nodes
        nodes.append(leaf)
        index = size = self.size
        level = 0
        sha256 = hashlib.sha256
        while size & 1:
            right = nodes.pop()
            # node_hash inlined: verify and appends run this for every entry of the log.
            nodes[-1] = sha256(b"\x01" + nodes[-1] + right).digest()
            size >>= 1
            level += 1
            if self.completed is not None and level % self.stride == 0:
                self.completed.append((level, index >> level, nodes[-1]))
        self.size += 1

    def root(self) -> bytes:
        if not self.nodes:
            return EMPTY_ROOT
        head = self.nodes[-1]
        for node in reversed(self.nodes[:-1]):
            head = node_hash(node, head)
        return head


def inclusion_proof(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """The audit path of leaf `index` (0-based) in the tree of all `leaves`."""
    return inclusion_path(index, len(leaves), _over(leaves))


def consistency_proof(leaves: Sequence[bytes], old_size: int) -> list[bytes]:
    """Proves the tree of the first `old_size` leaves is a prefix of the tree of all."""
    return consistency_path(old_size, len(leaves), _over(leaves))


def inclusion_path(index: int, size: int, subtree: Subtree) -> list[bytes]:
    """The audit path of leaf `index` (0-based) in the tree of `size` leaves."""
    if not 0 <= index < size:
        raise ProofError(f"leaf index {index} is outside a tree of size {size}")
    path: list[bytes] = []
    lo, hi = 0, size
    while hi - lo > 1:
        k = split(hi - lo)
        if index < lo + k:
            path.append(subtree(lo + k, hi))
            hi = lo + k
        else:
            path.append(subtree(lo, lo + k))
            lo += k
    path.reverse()
    return path


def consistency_path(old_size: int, size: int, subtree: Subtree) -> list[bytes]:
    """Proves the tree of the first `old_size` leaves is a prefix of the tree of `size`."""
    if not 0 < old_size <= size:
        raise ProofError(f"no consistency proof from size {old_size} to size {size}")
    path: list[bytes] = []
    lo, hi, m, complete = 0, size, old_size, True
    while m != hi - lo:
        k = split(hi - lo)
        if m <= k:
            path.append(subtree(lo + k, hi))
            hi = lo + k
        else:
            path.append(subtree(lo, lo + k))
            lo, m, complete = lo + k, m - k, False
    if not complete:
        path.append(subtree(lo, hi))
    path.reverse()
    return path


def _over(leaves: Sequence[bytes]) -> Subtree:
    return lambda lo, hi: root(leaves[lo:hi])


def verify_inclusion(index: int, size: int, leaf: bytes, proof: Sequence[bytes], head: bytes) -> None:
    """Raises ProofError unless `proof` shows `leaf` at `index` in the tree `head` of `size`."""
    if not 0 <= index < size:
        raise ProofError(f"leaf index {index} is outside a tree of size {size}")
    if len(leaf) != HASH_SIZE or any(len(p) != HASH_SIZE for p in proof):
        raise ProofError("leaf hashes and proof hashes are 32 bytes")
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            raise ProofError("the proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            r = node_hash(r, p)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ProofError("the proof is shorter than the tree is deep")
    if r != head:
        raise ProofError("the proof leads to a different root")


def verify_consistency(old_size: int, new_size: int, proof: Sequence[bytes], old_root: bytes, new_root: bytes) -> None:
    """Raises ProofError unless `proof` shows tree `old_root` is a prefix of `new_root`."""
    if old_size > new_size:
        raise ProofError(f"the old size {old_size} exceeds the new size {new_size}")
    if old_size == 0:
        raise ProofError("a tree of size 0 has no consistency proof: every tree extends it")
    if old_size == new_size:
        if proof:
            raise ProofError("trees of equal size need an empty proof")
        if old_root != new_root:
            raise ProofError("trees of equal size with different roots")
        return
    if not proof:
        raise ProofError("an empty proof cannot show growth")
    if any(len(p) != HASH_SIZE for p in proof):
        raise ProofError("proof hashes are 32 bytes")
    path = list(proof)
    if old_size & (old_size - 1) == 0:
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError("the proof is longer than the trees are deep")
        if fn & 1 or fn == sn:
            fr, sr = node_hash(c, fr), node_hash(c, sr)
            while not fn & 1 and fn:
                fn, sn = fn >> 1, sn >> 1
        else:
            sr = node_hash(sr, c)
        fn, sn = fn >> 1, sn >> 1
    if sn != 0:
        raise ProofError("the proof is shorter than the trees are deep")
    if fr != old_root:
        raise ProofError("the proof does not lead to the old root")
    if sr != new_root:
        raise ProofError("the proof does not lead to the new root")


def split(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    return 1 << ((n - 1).bit_length() - 1)
