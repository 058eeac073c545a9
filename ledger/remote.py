"""A ledger served by another machine's daemon, read over HTTP as a store.

`RemoteRecorder` implements the read half of the recorder interface (see ledger.store)
by asking the daemon's `/v1/` endpoints, so a `Ledger` over it proves and verifies
exactly as it does over a local file: `verify` rehashes every entry it is sent, checks
every signature and rule, rebuilds the tree and holds it against the tiles and the
checkpoints, trusting nothing the server says. Appends are refused: a third party
posts a signed entry to `POST /v1/entries` instead. The server's snapshot is never
asked for: an auditor folds the whole log itself.

Rows are read as JSON lines (`GET /v1/entries?as=jsonl`, written by `entry_lines`): one
row a line, its Pulse, leaf hash and running digest, then its stored bytes as they are,
which are canonical JSON, as the value of "entry", last:

    {"pulse":5,"leaf":"<hex>","chain":"<hex>","entry":{"payload":"…",…}}

so the server neither encodes nor decodes an entry, and a reader takes the exact bytes
from the line between `,"entry":` and its closing brace. Every entry is ASCII on one
line; bytes that are not, which only a damaged store holds, are sent in base64, as
"raw", instead, so that a page is always ASCII text cut into lines where rows end.
Checking that the bytes are JSON would cost more than writing them: bytes that are ASCII
on one line but not JSON (a damaged store's too) make their own line unreadable as JSON,
and no other. A row's kind and author are its entry's, read here (the daemon filters by
its own columns; sending them too would cost it two more a row). A daemon from before
JSON lines answers with its JSON document, which is read instead.
"""

from __future__ import annotations

import base64
import binascii
import itertools
from binascii import b2a_base64, hexlify
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import orjson

from ledger.entry import Entry, EntryError
from ledger.errors import LedgerError
from ledger.store import PAGE, TILE_PAGE, Head, RawRow, Row, Snapshot, StoredCheckpoint, Transaction
from ledger.tiles import Tile

if TYPE_CHECKING:
    import httpx

TIMEOUT = 30.0
JSON_LINES = "application/jsonl"  # the media type of entry_lines
_ENTRY = b',"entry":'
_LF, _CR = 10, 13


def entry_lines(rows: Iterable[RawRow]) -> bytes:
    """`rows` as JSON lines (see the module's docstring); TypeError for a value of a type
    no store keeps there, which only a damaged store holds."""
    # One expression a row, no call of this module's: it runs for every row a page serves.
    # `10 in raw` is a memchr; `b"\n" in raw` first tries b"\n" as an integer and words
    # the error that raises, 0.26 µs a row, 40% of what writing the lines took.
    return b"".join(
        [
            b'{"pulse":%d,"leaf":"%b","chain":"%b","entry":%b}\n' % (pulse, hexlify(leaf), hexlify(chain), raw)
            if _LF not in raw and _CR not in raw and raw.isascii()
            else b'{"pulse":%d,"leaf":"%b","chain":"%b","raw":"%b"}\n'
            % (pulse, hexlify(leaf), hexlify(chain), b2a_base64(raw, newline=False))
            for pulse, leaf, chain, raw in rows
        ]
    )


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
        answer = self._answer(path, params)
        return None if answer is None else self._json(answer, path)

    def _answer(self, path: str, params: dict[str, Any]) -> httpx.Response | None:
        """The daemon's answer to GET `path`, None for a 404, LedgerError for any other failure."""
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
        return answer

    def _json(self, answer: httpx.Response, path: str) -> Any:
        try:
            return answer.json()
        except ValueError:
            raise LedgerError(f"the daemon at {self.url} sent something other than JSON for {path}") from None

    def _entries(self, params: dict[str, Any]) -> list[Row]:
        """A page of rows, as JSON lines, or as the JSON document of a daemon that has none."""
        answer = self._answer("/v1/entries", {**params, "as": "jsonl"})
        if answer is None:
            raise LedgerError(f"the daemon at {self.url} serves no log at /v1/entries")
        if not answer.headers.get("content-type", "").startswith(JSON_LINES):
            return [_row(item) for item in self._json(answer, "/v1/entries")["entries"]]
        lines = answer.content.split(b"\n")
        if lines.pop():
            raise LedgerError(f"the daemon at {self.url} sent a page of JSON lines that ends inside a line")
        return [_line_row(line, self.url) for line in lines]

    def head(self) -> Head:
        doc = self._get("/v1/head")
        return Head(int(doc["size"]), _hex(doc["root"]))

    def last_pulse(self) -> int:
        return int(self._get("/v1/head")["last_pulse"])

    def rows(
        self, start: int = 1, *, kind: str | None = None, author: str | None = None, limit: int = PAGE
    ) -> list[Row]:
        return self._entries({"from": start, "kind": kind, "author": author, "limit": limit})

    def rows_back(
        self, end: int, *, kind: str | None = None, author: str | None = None, limit: int = PAGE
    ) -> list[Row]:
        # A daemon that does not know ?until= answers from Pulse 1 on, in order: asked for
        # two rows at least, it shows that whenever two match (with one, first is last).
        rows = self._entries({"until": end, "kind": kind, "author": author, "limit": max(limit, 2)})
        if any(row.pulse > end for row in rows) or any(a.pulse <= b.pulse for a, b in itertools.pairwise(rows)):
            raise LedgerError(f"the daemon at {self.url} does not read its log back from a Pulse: upgrade its agentd")
        return rows[:limit]

    def raw_rows(
        self, pulse: int, *, back: bool = False, kind: str | None = None, author: str | None = None, limit: int = PAGE
    ) -> list[RawRow]:
        read = self.rows_back if back else self.rows
        return [(row.pulse, row.leaf, row.chain, row.raw) for row in read(pulse, kind=kind, author=author, limit=limit)]

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


def _line_row(line: bytes, url: str) -> Row:
    """A row from its JSON line: the fields before "entry" read as JSON, the bytes after it
    taken as they are (or from "raw", in base64)."""
    at = line.find(_ENTRY)
    try:
        if at >= 0 and line.endswith(b"}"):
            doc, raw = orjson.loads(line[:at] + b"}"), line[at + len(_ENTRY) : -1]
        else:
            doc = orjson.loads(line)
            raw = _b64(doc["raw"])
        pulse, leaf, chain = int(doc["pulse"]), _hex(doc["leaf"]), _hex(doc["chain"])
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
        raise LedgerError(f"the daemon at {url} sent a line that is no row of its log: {line[:100]!r}") from None
    try:
        entry = Entry.parse(raw, pulse, verify=False, leaf=leaf)
    except EntryError:  # bytes that are no entry: the audit says why, at this Pulse
        return Row(pulse, raw, leaf, chain, "", "")
    return Row(pulse, raw, leaf, chain, entry.kind, entry.author)


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
