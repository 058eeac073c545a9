"""A ledger served by another machine's daemon, read over HTTP as a store.

`RemoteRecorder` implements the read half of the recorder interface (see ledger.store)
by asking the daemon's `/v1/` endpoints, so a `Ledger` over it proves and verifies
exactly as it does over a local file: `verify` rehashes every entry it is sent, checks
every signature and rule, rebuilds the tree and holds it against the tiles and the
checkpoints, trusting nothing the server says. Appends are refused: a third party
posts a signed entry to `POST /v1/entries` instead. The server's snapshot is never
asked for: an auditor folds the whole log itself.
"""

from __future__ import annotations

import base64
import binascii
import itertools
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ledger.errors import LedgerError
from ledger.store import PAGE, TILE_PAGE, Head, Row, Snapshot, StoredCheckpoint, Transaction
from ledger.tiles import Tile

if TYPE_CHECKING:
    import httpx

TIMEOUT = 30.0


class RemoteRecorder:
    """The ledger a daemon serves at `base` (like http://127.0.0.1:8470), read-only."""

    def __init__(self, base: str, *, timeout: float = TIMEOUT) -> None:
        if not base.startswith(("http://", "https://")):
            raise LedgerError(f"{base!r} is not a daemon's address: give http://HOST:PORT")
        import httpx  # here, so that every other use of the ledger never loads an HTTP client

        self.url = base.rstrip("/")
        self._client: httpx.Client = httpx.Client(base_url=self.url, timeout=timeout)
        self._errors = httpx.HTTPError

    def _get(self, path: str, **params: Any) -> Any:
        try:
            answer = self._client.get(path, params={k: v for k, v in params.items() if v is not None})
        except self._errors as exc:
            raise LedgerError(f"cannot reach the daemon at {self.url}: {exc}") from None
        if answer.status_code == 404:
            return None
        if answer.status_code != 200:
            raise LedgerError(
                f"the daemon at {self.url} answered {answer.status_code} to {path}: {answer.text.strip()[:200]}"
            )
        try:
            return answer.json()
        except ValueError:
            raise LedgerError(f"the daemon at {self.url} sent something other than JSON for {path}") from None

    def head(self) -> Head:
        doc = self._get("/v1/head")
        return Head(int(doc["size"]), _hex(doc["root"]))

    def last_pulse(self) -> int:
        return int(self._get("/v1/head")["last_pulse"])

    def rows(
        self, start: int = 1, *, kind: str | None = None, author: str | None = None, limit: int = PAGE
    ) -> list[Row]:
        doc = self._get("/v1/entries", **{"from": start, "kind": kind, "author": author, "limit": limit})
        return [_row(item) for item in doc["entries"]]

    def rows_back(
        self, end: int, *, kind: str | None = None, author: str | None = None, limit: int = PAGE
    ) -> list[Row]:
        # A daemon that does not know ?until= answers from Pulse 1 on, in order: asked for
        # two rows at least, it shows that whenever two match (with one, first is last).
        doc = self._get("/v1/entries", **{"until": end, "kind": kind, "author": author, "limit": max(limit, 2)})
        rows = [_row(item) for item in doc["entries"]]
        if any(row.pulse > end for row in rows) or any(a.pulse <= b.pulse for a, b in itertools.pairwise(rows)):
            raise LedgerError(f"the daemon at {self.url} does not read its log back from a Pulse: upgrade its agentd")
        return rows[:limit]

    def row(self, pulse: int) -> Row | None:
        found = self.rows(pulse, limit=1)
        return found[0] if found and found[0].pulse == pulse else None

    def tile(self, level: int, index: int) -> bytes | None:
        found = self.tiles(level, index, 1)
        return found[0].hashes if found and found[0].index == index else None

    def tiles(self, level: int, start: int, limit: int = TILE_PAGE) -> list[Tile]:
        doc = self._get(f"/v1/tiles/{level}", **{"from": start, "limit": limit})
        return [Tile(level, int(t["index"]), _b64(t["hashes"])) for t in doc["tiles"]]

    def find(self, low: bytes, high: bytes, limit: int) -> list[int]:
        doc = self._get("/v1/find", low=low.hex(), high=high.hex(), limit=limit)
        return [int(p) for p in doc["pulses"]]

    def checkpoints(self) -> list[StoredCheckpoint]:
        return [_checkpoint(c) for c in self._get("/v1/checkpoints")["checkpoints"]]

    def latest_checkpoint(self) -> StoredCheckpoint | None:
        found = self.checkpoints()
        return found[-1] if found else None

    def checkpoint(self, size: int) -> StoredCheckpoint | None:
        doc = self._get(f"/v1/checkpoints/{size}")
        return _checkpoint(doc) if doc else None

    def snapshot(self) -> Snapshot | None:
        return None

    def snapshot_extent(self) -> tuple[int, int]:
        return (0, 0)

    def transaction(self) -> AbstractContextManager[Transaction]:
        raise LedgerError(
            f"the ledger at {self.url} is read here over HTTP: post signed entries to {self.url}/v1/entries"
        )

    def close(self) -> None:
        self._client.close()


def _row(item: dict[str, Any]) -> Row:
    return Row(
        int(item["pulse"]), _b64(item["raw"]), _hex(item["leaf"]), _hex(item["chain"]), item["kind"], item["author"]
    )


def _checkpoint(doc: dict[str, Any]) -> StoredCheckpoint:
    return StoredCheckpoint(int(doc["size"]), str(doc["note"]), float(doc["at"]))


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, TypeError, ValueError):
        raise LedgerError("the daemon sent bytes that are not base64") from None


def _hex(text: str) -> bytes:
    try:
        return bytes.fromhex(text)
    except (TypeError, ValueError):
        raise LedgerError("the daemon sent a hash that is not hex") from None
