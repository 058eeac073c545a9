"""What the log's own key signs as the log grows: checkpoints when the policy calls for
one, a promise of one otherwise (see ledger.receipts), and nothing at all for a tree that
does not extend the last checkpoint it signed.

The Notary works inside the ledger's append and checkpoint transactions, on the fold the
ledger holds under the write lock; the checks read a few tiles of the stored tree.
"""

from __future__ import annotations

from collections.abc import Callable

from ledger import checkpoint as notes, tiles
from ledger.errors import VERIFY_HINT, LedgerError
from ledger.fold import Tip
from ledger.keys import Wallet
from ledger.receipts import CheckpointPolicy, Promise
from ledger.rules import State
from ledger.store import StoredCheckpoint, Transaction


class Notary:
    def __init__(self, key: Wallet | None, policy: CheckpointPolicy, clock: Callable[[], float], url: str) -> None:
        self._key = key
        self._policy = policy
        self._clock = clock
        self._url = url
        # The size of the last checkpoint the ledger's fold was shown to extend.
        self._extends: int | None = None

    def forget(self) -> None:
        """The ledger starts a new fold: what was shown of the old one no longer holds."""
        self._extends = None

    def signs(self, state: State) -> bool:
        """Whether this key is the one the log's genesis entry names."""
        return self._key is not None and state.origin is not None and self._key.id == state.authority

    def hold(self, txn: Transaction, tip: Tip) -> None:
        """Refuses to go on with a log that does not extend the last checkpoint it signed:
        the key must never sign a receipt or checkpoint of a rewritten history. Checked
        once per fold and checkpoint."""
        last = txn.latest_checkpoint()
        if last is None or last.size == self._extends:
            return
        previous, size = self._stored(last), tip.frontier.size
        tree = tiles.Tree(txn.tile, size)
        if tree.root() != tip.frontier.root():
            raise LedgerError(f"the stored tree of the ledger at {self._url} does not hash to its head; {VERIFY_HINT}")
        if previous.size > size or tree.subtree(0, previous.size) != previous.root:
            raise LedgerError(
                f"refusing to add to the ledger at {self._url}: it does not extend its last checkpoint "
                f"(size {previous.size}); {VERIFY_HINT}"
            )
        self._extends = last.size

    def receipt(self, txn: Transaction, tip: Tip) -> tuple[str | None, str | None]:
        """What an append's receipts carry: the checkpoint it signs when one is due, else
        a signed promise of one; neither when this key is not the log's."""
        state, size = tip.state, tip.frontier.size
        if self._key is None or state.origin is None or not self.signs(state):
            return None, None
        last, now = txn.latest_checkpoint(), self._clock()
        if self._policy.due(last, size, now):
            return self.sign(txn, tip, last, now), None
        assert last is not None
        return None, Promise(state.origin, size, tip.frontier.root(), self._policy.deadline(last)).sign(self._key)

    def current(self, txn: Transaction, tip: Tip) -> str:
        """The checkpoint of the tip's size: the one signed already, or one signed now."""
        if tip.frontier.size == 0:
            raise LedgerError("the log is empty: there is nothing to checkpoint yet")
        last = txn.latest_checkpoint()
        if last is not None and last.size == tip.frontier.size:
            if self._stored(last).root != tip.frontier.root():
                raise LedgerError(
                    f"refusing to sign: the log does not extend its last checkpoint (size {last.size}); {VERIFY_HINT}"
                )
            return last.note
        return self.sign(txn, tip, last, self._clock())

    def due(self, txn: Transaction, tip: Tip) -> str | None:
        """The checkpoint the policy calls for by now, signed, if one is due."""
        last, now = txn.latest_checkpoint(), self._clock()
        if not self.signs(tip.state) or not self._policy.due(last, tip.frontier.size, now):
            return None
        return self.sign(txn, tip, last, now)

    def sign(self, txn: Transaction, tip: Tip, last: StoredCheckpoint | None, now: float) -> str:
        """Signs and keeps a checkpoint of the locked tip, which must extend the last one."""
        state, size, root = tip.state, tip.frontier.size, tip.frontier.root()
        if self._key is None or state.origin is None or not self.signs(state):
            raise LedgerError(
                f"only the log's key ({state.authority}) signs its checkpoints, and this home holds another"
            )
        if last is not None:
            previous = self._stored(last)
            if previous.size > size:
                raise LedgerError(
                    f"the log's last checkpoint covers {previous.size} entries but it holds {size}; {VERIFY_HINT}"
                )
            if tiles.Tree(txn.tile, size).subtree(0, previous.size) != previous.root:
                raise LedgerError(
                    f"refusing to sign: the log does not extend its last checkpoint (size {previous.size}); {VERIFY_HINT}"
                )
        note = notes.sign(notes.Checkpoint(state.origin, size, root), self._key, state.origin)
        txn.save_checkpoint(StoredCheckpoint(size, note, now))
        self._extends = size
        return note

    def _stored(self, last: StoredCheckpoint) -> notes.Checkpoint:
        """The checkpoint the store keeps as the log's last; LedgerError when what it keeps
        there is not a checkpoint, since nothing can be signed after it."""
        try:
            return notes.parse(last.note)
        except notes.CheckpointError as exc:
            raise LedgerError(
                f"the ledger at {self._url} keeps something that is not a checkpoint as its checkpoint of size "
                f"{last.size} ({exc}); {VERIFY_HINT}"
            ) from None
