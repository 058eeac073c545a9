"""The fold of a log kept in its store, so that a new process replays only what came after.

A snapshot holds the State of the first `size` entries as JSON (rules keep only JSON data
in it), the tree's right edge and the running digest at that size, the fingerprint of the
rule set that folded it, and a SHA-256 over all of that. An append writes it inside its
own transaction, so it never describes a log that did not commit.

A ledger uses a snapshot only when its digest holds, it was folded by the same rule set,
its tree edge gives the root it claims, the stored Pulse at its size carries its running
digest, and, once the entries after it are folded in, the tree matches the head;
otherwise it replays the whole log and says so. The digest finds a damaged or carelessly
edited snapshot; someone free to write the store can forge one, as they can forge rows
the append path does not recheck (it trusts signatures checked when entries were
appended). `verify` trusts neither: it replays from Pulse 1 and reports a snapshot that
disagrees with what it folds.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any

import orjson

from ledger import merkle
from ledger.errors import LedgerError
from ledger.rules import State
from ledger.store import Snapshot

FORMAT = b"agentd.ledger.snapshot/v2"
_FIELDS = {f.name for f in dataclasses.fields(State)}


def take(state: State, frontier: merkle.Frontier, chain: bytes, rules: bytes) -> Snapshot:
    """The snapshot of a fold; LedgerError if a rule kept data that is not JSON."""
    try:
        # Unsorted: sorting every key costs seven times the encoding; verify compares
        # snapshots in a sorted form of its own.
        encoded = orjson.dumps(_document(state))
    except TypeError as exc:
        raise LedgerError(
            f"a rule kept data that is not JSON in the ledger's state ({exc}); rules may keep only "
            "dicts with string keys, lists, strings, numbers, booleans and None"
        ) from None
    nodes = b"".join(frontier.nodes)
    size, root = frontier.size, frontier.root()
    return Snapshot(size, root, chain, nodes, rules, encoded, _digest(size, root, chain, nodes, rules, encoded))


def restore(snapshot: Snapshot, rules: bytes) -> tuple[State, merkle.Frontier]:
    """The fold a snapshot holds; LedgerError saying why it cannot be used."""
    if not intact(snapshot):
        raise LedgerError("its contents do not match its digest (it was changed after it was written)")
    if snapshot.rules != rules:
        raise LedgerError("it was folded by another rule set (other kinds, or another version of a rule)")
    frontier = _frontier(snapshot)
    try:
        doc = orjson.loads(snapshot.state)
    except orjson.JSONDecodeError as exc:
        raise LedgerError(f"its state is not JSON ({exc})") from None
    if not _shaped(doc, snapshot.size):
        raise LedgerError(f"its state is not shaped like a fold of {snapshot.size} entries")
    return State(**doc), frontier


def disagreement(snapshot: Snapshot, state: State, frontier: merkle.Frontier, chain: bytes) -> str | None:
    """How a stored snapshot differs from the fold a replay reached at its size, or None."""
    if not intact(snapshot):
        return "its contents do not match its digest (appends ignore it and replay the whole log)"
    if (snapshot.root, snapshot.chain, snapshot.frontier) != (frontier.root(), chain, b"".join(frontier.nodes)):
        return "its tree or running digest is not the log's at that size"
    try:
        stored = orjson.loads(snapshot.state)
    except orjson.JSONDecodeError:
        return "its state is not JSON"
    folded = _document(state)
    if not isinstance(stored, dict) or stored.keys() != folded.keys():
        return "its state does not hold the fields of a fold"
    for name in ("size", "origin", "authority", "balances", "sequences"):
        if _sorted(stored[name]) != _sorted(folded[name]):
            return f"its {name} field differs from the replay's"
    spaces = stored["namespaces"] if isinstance(stored["namespaces"], dict) else {}
    for name in sorted(set(spaces) | set(state.namespaces)):
        if _sorted(spaces.get(name)) != _sorted(state.namespaces.get(name)):
            return f"its namespace {name!r} differs from the replay's"
    return None


def _document(state: State) -> dict[str, Any]:
    return {
        "size": state.size,
        "origin": state.origin,
        "authority": state.authority,
        "balances": state.balances,
        "namespaces": state.namespaces,
        "sequences": state.sequences,
    }


def _shaped(doc: Any, size: int) -> bool:
    """Whether `doc` has the fields and types of a State of `size` entries."""
    if not isinstance(doc, dict) or doc.keys() != _FIELDS or doc["size"] != size:
        return False
    if not all(doc[name] is None or isinstance(doc[name], str) for name in ("origin", "authority")):
        return False
    balances, spaces, sequences = doc["balances"], doc["namespaces"], doc["sequences"]
    for counts in (balances, sequences):
        if not isinstance(counts, dict) or not all(type(n) is int for n in counts.values()):
            return False
    return isinstance(spaces, dict) and all(isinstance(space, dict) for space in spaces.values())


def _frontier(snapshot: Snapshot) -> merkle.Frontier:
    nodes = [snapshot.frontier[i : i + merkle.HASH_SIZE] for i in range(0, len(snapshot.frontier), merkle.HASH_SIZE)]
    # A tree of n leaves has one perfect subtree on its right edge per 1 bit of n.
    if snapshot.size < 1 or len(snapshot.frontier) != merkle.HASH_SIZE * snapshot.size.bit_count():
        raise LedgerError(f"its tree edge does not fit a tree of {snapshot.size} entries")
    frontier = merkle.Frontier(snapshot.size, nodes)
    if frontier.root() != snapshot.root:
        raise LedgerError("its tree edge does not give the root it records")
    return frontier


def intact(snapshot: Snapshot) -> bool:
    """Whether the snapshot's digest holds: it is as it was written."""
    s = snapshot
    return _digest(s.size, s.root, s.chain, s.frontier, s.rules, s.state) == s.digest


def _digest(size: int, root: bytes, chain: bytes, frontier: bytes, rules: bytes, state: bytes) -> bytes:
    digest = hashlib.sha256(FORMAT)
    for part in (size.to_bytes(8, "big", signed=True), root, chain, frontier, rules):
        digest.update(len(part).to_bytes(4, "big") + part)
    digest.update(state)
    return digest.digest()


def _sorted(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
