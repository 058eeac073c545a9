"""The log's Merkle tree kept in its store as tiles, so that a root or a proof costs a
few reads whatever the log's size.

The layout is c2sp.org/tlog-tiles' with tiles of height 4 rather than 8: the tile at
level L and index k holds the hashes of up to 16 consecutive complete tree nodes of
height 4·L (leaf hashes at level 0), from node 16·k on, 32 bytes each, in one stored
row. The rightmost tile of a level is partial until 16 nodes fill it. A node of height
4·L + r is the root of 2^r consecutive hashes of one tile, so any subtree hash needs at
most one read per level of tiles (six for a log of 16 million entries) and fifteen
hashes each: a proof costs about as much at a million entries as at ten thousand. (Of
height 8, a proof hashes up to 255 nodes a level, and its cost doubles from 10,000 to
100,000 entries.) Appends write the tiles they change in their own transaction;
`verify` rebuilds the tree from the entries and holds every tile against it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ledger import merkle
from ledger.errors import VERIFY_HINT, LedgerError

HEIGHT = 4
WIDTH = 1 << HEIGHT
HASH = merkle.HASH_SIZE


@dataclass(frozen=True, slots=True)
class Tile:
    level: int
    index: int
    hashes: bytes  # up to WIDTH hashes, 32 bytes each


# Reads the stored tile at (level, index); None when there is none.
TileRead = Callable[[int, int], "bytes | None"]


def updates(read: TileRead, old_size: int, leaves: Sequence[bytes], completed: merkle.Completed) -> list[Tile]:
    """The tiles an append of `leaves` to a tree of `old_size` writes: at each level, the
    partial tile extended and any new ones. `completed` are the nodes at heights that are
    multiples of HEIGHT the append completed, in order (a Frontier kept with that stride)."""
    new: dict[int, list[bytes]] = {0: list(leaves)}
    for height, _, digest in completed:
        new.setdefault(height // HEIGHT, []).append(digest)
    tiles = []
    for level, hashes in sorted(new.items()):
        if not hashes:
            continue
        index, held = divmod(old_size >> (HEIGHT * level), WIDTH)
        data = b"".join(hashes)
        if held:
            stored = read(level, index) or b""
            if len(stored) < held * HASH:
                raise LedgerError(f"the stored tree lacks nodes the log's head covers; {VERIFY_HINT}")
            data = stored[: held * HASH] + data
        step = WIDTH * HASH
        tiles += [Tile(level, index + i // step, data[i : i + step]) for i in range(0, len(data), step)]
    return tiles


class Tree:
    """The stored tree of `size` leaves: node, subtree and root hashes, each tile read once."""

    def __init__(self, read: TileRead, size: int) -> None:
        self._read = read
        self.size = size
        self._tiles: dict[tuple[int, int], bytes] = {}

    def root(self) -> bytes:
        return self.subtree(0, self.size) if self.size else merkle.EMPTY_ROOT

    def subtree(self, lo: int, hi: int) -> bytes:
        """The hash of the tree over leaves lo..hi-1 (0-based), as RFC 9162 shapes it."""
        if not 0 <= lo < hi <= self.size:
            raise LedgerError(f"leaves {lo}..{hi - 1} are outside a tree of {self.size}")
        n = hi - lo
        if n & (n - 1) == 0 and lo % n == 0:
            height = n.bit_length() - 1
            return self.node(height, lo >> height)
        k = merkle.split(n)
        return merkle.node_hash(self.subtree(lo, lo + k), self.subtree(lo + k, hi))

    def node(self, height: int, index: int) -> bytes:
        """The complete node of `height` (0 for a leaf) and `index` at that height."""
        level, r = divmod(height, HEIGHT)
        first = index << r
        tile, offset = divmod(first, WIDTH)
        data = self._tile(level, tile)
        start, stop = offset * HASH, (offset + (1 << r)) * HASH
        if len(data) < stop:
            raise LedgerError(
                f"the stored tree lacks the node over leaves {(index << height) + 1}..{(index + 1) << height}; {VERIFY_HINT}"
            )
        if r == 0:
            return data[start:stop]
        return merkle.root([data[i : i + HASH] for i in range(start, stop, HASH)])

    def frontier(self) -> merkle.Frontier:
        """The right edge of the tree: what appends continue from."""
        nodes, done = [], 0
        for height in range(self.size.bit_length() - 1, -1, -1):
            if self.size >> height & 1:
                nodes.append(self.node(height, done >> height))
                done += 1 << height
        return merkle.Frontier(self.size, nodes)

    def _tile(self, level: int, index: int) -> bytes:
        key = (level, index)
        if key not in self._tiles:
            self._tiles[key] = self._read(level, index) or b""
        return self._tiles[key]
