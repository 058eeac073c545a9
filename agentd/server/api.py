"""The daemon's HTTP API (Starlette): the ledger for auditors, signed entries from third
parties, session intake for agents running elsewhere, status, health and metrics.

Reads are served from each worker thread's own read-only ledger; every write goes
through the one writing ledger (see agentd/server/ledgers.py). Errors are JSON
`{"error": "<one line>"}` with a 4xx status: 400 for a malformed request, 401 for a
missing or wrong token, 404 for what is not there, 413 for a body over the cap (or an
entry over the ledger's own bound), 422 for an entry the ledger's rules refuse, 429 with
Retry-After for a wallet posting entries faster than the server records them (see Rates
in agentd/server/ledgers.py); a path no route serves, or a method its route does not
take, is a 404 or 405 alike, and only the server's own fault a 500 (its log says what it
was). An error never names where the home is, nor an agentd command: a client elsewhere
has neither. The server holds every connection to the home's HTTP limits
(agentd/app/httplimits.py): deadlines on a request's head, its body and an idle
connection, and a body cap for the whole server; the routes' own caps below are smaller.
"""

from __future__ import annotations

import base64
import contextlib
import hmac
import inspect
import logging
import re
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route

from agentd.app.intake import import_file
from agentd.app.ledger import entry_filter
from agentd.app.lineage import lineage_here
from agentd.app.status import status
from agentd.errors import AgentdError, NotFound
from agentd.home import Home
from agentd.server import dashboard
from agentd.server.answers import JSON_ERRORS, Refused, capped_body, error, public
from agentd.server.ledgers import Ledgers, Reader, retry_after
from agentd.server.metrics import Metrics
from agentd.server.pages import PAGES_FILE, EntryPages
from improver import ImproverError
from ledger import (
    JSON_LINES,
    WALLET_ID,
    DamagedStore,
    Entry,
    EntryError,
    EntryTooLarge,
    LedgerError,
    Recorder,
    RefusalRecorded,
    Row,
    RuleViolation,
    StoredCheckpoint,
    entry_lines,
)

log = logging.getLogger("agentd.serve")

# A signed entry is a few kB; a transcript for intake may be larger.
ENTRY_CAP = 64 * 1024
SESSIONS_CAP = 8 * 1024 * 1024
PAGE = 1000  # rows a page of /v1/entries holds at most
FILL_SECONDS = 5.0  # how often the kept bundles of /v1/entries are brought up to the log's end
PIECE = 250  # rows of a page read and written at a time, so a page of large entries is never held whole
HELD = 2 * 1024 * 1024  # bytes of JSON lines held and sent at once, past which the rest is streamed
LARGEST = 2**63 - 1  # SQLite's largest integer: no size, level or Pulse of a log is beyond it
_PULSE = re.compile(r"[0-9]{1,7}")
_HEX = re.compile(r"[0-9a-f]{64}")


@dataclass
class Server:
    """What the routes share: the home, its ledgers, the counters, the scheduler."""

    home: Home
    ledgers: Ledgers
    metrics: Metrics
    scheduler: Any = None
    entry_cap: int = ENTRY_CAP
    sessions_cap: int = SESSIONS_CAP
    pages: EntryPages = field(init=False)

    def __post_init__(self) -> None:
        self.pages = EntryPages(self.home.root / PAGES_FILE)

    @property
    def token(self) -> str | None:
        """[serve] intake_token in config.toml (AGENTD_INTAKE_TOKEN wins): no token, no intake."""
        found = self.home.setting("serve", "intake_token", env="AGENTD_INTAKE_TOKEN")
        return str(found) if found else None


def app(
    home: Home, *, scheduler: Any = None, metrics: Metrics | None = None, ledgers: Ledgers | None = None
) -> Starlette:
    """The daemon's web application for `home`; `scheduler` (the daemon's running
    schedules) makes /v1/status show the live next runs."""
    server = Server(home, ledgers or Ledgers(home), metrics or Metrics(), scheduler)
    server.metrics.gauge("agentd_ledger_entries", lambda: server.ledgers.reader().store.head().size)

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        with filling(server):
            yield
        server.ledgers.close()

    def route(path: str, handler: Callable[[Server, Request], Any], methods: tuple[str, ...] = ("GET",)) -> Route:
        return Route(path, _endpoint(server, path, handler), methods=list(methods))

    routes = [
        route("/health", health),
        route("/metrics", metrics_text),
        route("/v1/status", status_doc),
        route("/v1/head", head),
        route("/v1/entries", entries),
        route("/v1/entries", post_entry, ("POST",)),
        route("/v1/entries/{ref}", entry),
        route("/v1/find", find),
        route("/v1/authors/{author}", author_next),
        route("/v1/tiles/{level:int}", tile_page),
        route("/v1/checkpoint", latest_checkpoint),
        route("/v1/checkpoints", checkpoints),
        route("/v1/checkpoints/{size:int}", checkpoint_of),
        route("/v1/proofs/inclusion", inclusion),
        route("/v1/proofs/consistency", consistency),
        route("/v1/lineage/{profile}", lineage),
        route("/v1/sessions", post_sessions, ("POST",)),
        *dashboard.routes(home, lambda: status(home, scheduler)),
    ]
    web = Starlette(routes=routes, lifespan=lifespan, exception_handlers=JSON_ERRORS)
    web.state.server = server
    return web


def _endpoint(
    server: Server, path: str, handler: Callable[[Server, Request], Any]
) -> Callable[[Request], Awaitable[Response]]:
    """Runs a handler (in a worker thread unless it is a coroutine), words its errors and
    counts the request."""

    async def endpoint(request: Request) -> Response:
        started = time.perf_counter()
        try:
            if inspect.iscoroutinefunction(handler):
                answer = await handler(server, request)
            else:
                answer = await run_in_threadpool(handler, server, request)
        except Refused as exc:
            answer = error(exc.status, public(str(exc), server.home), exc.headers)
        except NotFound as exc:
            # A name in the URL's path that names nothing here is not there; in its query, a wrong value.
            answer = error(404 if request.path_params else 400, exc.public)
        except (AgentdError, ImproverError) as exc:
            answer = error(400, public(str(exc), server.home))
        except DamagedStore as exc:  # the daemon's to mend (its remedy is a command here), not the client's
            log.error("%s %s: %s", request.method, request.url.path, exc)
            answer = error(500, "the ledger cannot be read here: its store is damaged; the daemon's log says where")
        except LedgerError as exc:
            # The ledger words what is not there as "no Pulse N…", "no claim C…".
            answer = error(404 if str(exc).startswith("no ") else 400, public(str(exc), server.home))
        response = answer if isinstance(answer, Response) else JSONResponse(answer)
        labels = {"route": path, "method": request.method}
        server.metrics.count("agentd_http_requests_total", 1, status=str(response.status_code), **labels)
        server.metrics.observe("agentd_http_request_seconds", time.perf_counter() - started, **labels)
        return response

    return endpoint


@contextmanager
def filling(server: Server) -> Iterator[None]:
    """The kept bundles filled in a thread of their own while the server runs, every
    FILL_SECONDS, so that a page is read from them whether or not it was asked for before."""
    stop = threading.Event()

    def fill() -> None:
        while not stop.wait(FILL_SECONDS):
            # The ledger's errors, and a damaged row's value (TypeError), are the routes' to say.
            with contextlib.suppress(LedgerError, TypeError):
                server.pages.fill(server.ledgers.reader().store, stop.is_set)

    thread = threading.Thread(target=fill, name="agentd-entry-pages", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


# Query values


def _int(
    request: Request, name: str, default: int | None = None, *, low: int = 1, high: int | None = None
) -> int | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if not raw.isdigit() or len(raw) > 12:
        raise Refused(400, f"{name}={raw[:40]!r} is not a whole number")
    value = int(raw)
    if value < low or (high is not None and value > high):
        raise Refused(400, f"{name}={value} is outside {low}..{high if high is not None else ''}")
    return value


def _required(request: Request, name: str) -> str:
    raw = request.query_params.get(name)
    if not raw:
        raise Refused(400, f"give ?{name}=")
    return raw


# Health, metrics, status


def health(server: Server, request: Request) -> dict[str, Any]:
    return {"ok": True, "entries": server.ledgers.reader().store.head().size}


def metrics_text(server: Server, request: Request) -> Response:
    return PlainTextResponse(server.metrics.text(), media_type="text/plain; version=0.0.4")


def status_doc(server: Server, request: Request) -> dict[str, Any]:
    return status(server.home, server.scheduler)


# The ledger, read


def head(server: Server, request: Request) -> dict[str, Any]:
    store = server.ledgers.reader().store
    found = store.head()
    return {"size": found.size, "root": found.root.hex(), "last_pulse": store.last_pulse()}


@dataclass(frozen=True)
class _Query:
    """What a page of entries holds: rows from Pulse `pulse` on (`back`: at or before it,
    newest first), `limit` at most, of `kind` and by `author` when given."""

    pulse: int
    back: bool
    limit: int
    kind: str | None
    author: str | None


def entries(server: Server, request: Request) -> Response:
    """Rows from Pulse ?from= on, or with ?until= those at or before it newest first; at
    most ?limit=; of one ?kind= and by one ?author= (a wallet id, "log", or the name of a
    wallet in this home) when asked, as `agentd ledger log` takes them: a kind the rules
    do not know, or an author that names no wallet, is a 400 that says so. The page is
    the JSON document `{"entries": [...]}`, or with ?as=jsonl the rows' stored bytes as
    they are, a JSON line a row (see `entry_lines`). A document longer than PIECE rows is
    streamed, PIECE rows read and written at a time; JSON lines are sent at once up to
    HELD bytes, and streamed past them."""
    start, until = _int(request, "from"), _int(request, "until")
    if start is not None and until is not None:
        raise Refused(400, "give ?from= or ?until=, not both")
    limit = _int(request, "limit", PAGE, high=PAGE) or PAGE
    form = request.query_params.get("as") or None
    if form not in (None, "jsonl"):
        raise Refused(400, f"as={form[:40]!r} is not a form of this page: give as=jsonl, or leave it out for JSON")
    given = request.query_params.get("kind") or None, request.query_params.get("author") or None
    kind, author = entry_filter(server.home, *given)
    query = _Query(until if until is not None else start or 1, until is not None, limit, kind, author)
    if form == "jsonl":
        return _lines_page(server, query)
    pieces = _page(server, query, _json_piece, b'{"entries":[', b",", b"]}")
    first, whole = next(pieces)  # read here: a store that fails is answered as any error is
    if whole:
        return Response(first, media_type="application/json")
    return StreamingResponse(_after(first, pieces), media_type="application/json")


def _lines_page(server: Server, query: _Query) -> Response:
    """The page as JSON lines, its pieces read in this thread while they come to less than
    HELD bytes, and the rest streamed: a thread's turn per piece costs more than the bytes
    of a page of small entries, and the bound keeps a page of large ones from being held
    whole. A page of every kind and author, oldest first, is read from the kept bundles."""
    every = not query.back and query.kind is None and query.author is None
    pieces = _page(server, query, _kept_piece(server.pages) if every else _lines_piece, b"", b"", b"")
    held: list[bytes] = []
    for piece, whole in pieces:
        held.append(piece)
        if whole:
            return Response(b"".join(held), media_type=JSON_LINES)
        if sum(map(len, held)) >= HELD:
            break
    return StreamingResponse(_after(b"".join(held), pieces), media_type=JSON_LINES)


def _json_piece(store: Recorder, query: _Query, limit: int) -> tuple[bytes, int, int]:
    """Up to `limit` rows of the page from query.pulse: their JSON, joined, with how many
    there were and the Pulse of the last."""
    read = store.rows_back if query.back else store.rows
    rows = read(query.pulse, kind=query.kind, author=query.author, limit=limit)
    return b",".join(map(_row_json, rows)), len(rows), rows[-1].pulse if rows else 0


def _lines_piece(store: Recorder, query: _Query, limit: int) -> tuple[bytes, int, int]:
    """As `_json_piece`, in JSON lines. A value of another type than the store keeps (a
    damaged SQLite file) is named by the checked read of the same rows, as for JSON."""
    rows = store.raw_rows(query.pulse, back=query.back, kind=query.kind, author=query.author, limit=limit)
    try:
        return entry_lines(rows), len(rows), rows[-1][0] if rows else 0
    except TypeError:
        _json_piece(store, query, limit)
        raise


def _kept_piece(pages: EntryPages) -> Callable[[Recorder, _Query, int], tuple[bytes, int, int]]:
    """As `_lines_piece`, from the bundles `pages` keeps, the rows of one not full yet read
    as they are."""

    def piece(store: Recorder, query: _Query, limit: int) -> tuple[bytes, int, int]:
        parts, got, pulse = [], 0, query.pulse
        while got < limit:
            try:
                found = pages.lines(store, pulse, limit - got)
            except TypeError:  # a damaged store's value: named as the rows' own read names it
                found = None
            if found is None:
                lines, count, _ = _lines_piece(store, replace(query, pulse=pulse), limit - got)
                parts.append(lines)
                got += count
                break
            parts.append(found[0])
            got, pulse = got + found[1], pulse + found[1]
        return b"".join(parts), got, query.pulse + got - 1

    return piece


def _page(
    server: Server,
    query: _Query,
    piece: Callable[[Recorder, _Query, int], tuple[bytes, int, int]],
    opening: bytes,
    between: bytes,
    closing: bytes,
) -> Iterator[tuple[bytes, bool]]:
    """The page a piece at a time, each with whether it ends the page: `opening`, the
    pieces' rows with `between` them, `closing`. Each piece is read from the store of the
    thread that asks for it (SQLite's rule); the log only grows, so the pieces read one
    after another are the rows one read would give."""
    limit, first = query.limit, True
    while True:
        wanted = min(PIECE, limit)
        listed, count, last = piece(server.ledgers.reader().store, query, wanted)
        limit -= count
        whole = count < wanted or not limit
        yield (opening if first else between if count else b"") + listed + (closing if whole else b""), whole
        if whole:
            return
        first, query = False, replace(query, pulse=last - 1 if query.back else last + 1)


def _after(first: bytes, pieces: Iterator[tuple[bytes, bool]]) -> Iterator[bytes]:
    yield first
    for piece, _ in pieces:
        yield piece


def entry(server: Server, request: Request) -> Response:
    ref = request.path_params["ref"].strip().lower()
    reader = server.ledgers.reader()
    pulse = int(ref) if _PULSE.fullmatch(ref) else reader.ledger.find(ref).pulse or 0
    row = reader.store.row(pulse)
    if row is None:
        raise Refused(404, f"no Pulse {ref}: the log holds {reader.store.head().size} entries")
    return Response(_row_json(row), media_type="application/json")


def find(server: Server, request: Request) -> dict[str, Any]:
    low, high = _required(request, "low"), _required(request, "high")
    if not (_HEX.fullmatch(low) and _HEX.fullmatch(high)):
        raise Refused(400, "low and high are leaf hashes: 64 lowercase hex digits each")
    limit = _int(request, "limit", 2, high=PAGE) or 2
    return {"pulses": server.ledgers.reader().store.find(bytes.fromhex(low), bytes.fromhex(high), limit)}


def author_next(server: Server, request: Request) -> dict[str, Any]:
    """What a wallet elsewhere needs to sign its next entry for this log: the log's origin
    and the sequence number the entry must carry."""
    author = request.path_params["author"]
    if not WALLET_ID.fullmatch(author):
        raise Refused(400, f"{author[:40]!r} is not a wallet id (32 hex digits)")
    ledger = server.ledgers.reader().ledger
    if not server.ledgers.reader().store.head().size:
        raise Refused(404, "the log is empty: it has no origin yet")
    return {"origin": ledger.origin, "next_sequence": ledger.next_sequence(author)}


def tile_page(server: Server, request: Request) -> dict[str, Any]:
    level = request.path_params["level"]
    start = _int(request, "from", 0, low=0) or 0
    limit = _int(request, "limit", 64, high=1024) or 64
    if level > LARGEST:
        return {"tiles": []}  # as for any level above the tree's top
    tiles = server.ledgers.reader().store.tiles(level, start, limit)
    return {"tiles": [{"index": t.index, "hashes": base64.b64encode(t.hashes).decode()} for t in tiles]}


def latest_checkpoint(server: Server, request: Request) -> Response:
    """A checkpoint of the log as it stands: the last one signed when it covers the head,
    else one the log's key signs now (as `agentd ledger checkpoint` does)."""
    reader = server.ledgers.reader()
    size = reader.store.head().size
    if not size:
        raise Refused(404, "the log is empty: it has no checkpoint yet")
    last = reader.store.latest_checkpoint()
    note = last.note if last and last.size == size else server.ledgers.write(lambda ledger: ledger.checkpoint())
    return PlainTextResponse(note)


def checkpoints(server: Server, request: Request) -> dict[str, Any]:
    return {"checkpoints": [_checkpoint_doc(c) for c in server.ledgers.reader().store.checkpoints()]}


def checkpoint_of(server: Server, request: Request) -> dict[str, Any]:
    size = request.path_params["size"]
    found = server.ledgers.reader().store.checkpoint(size) if size <= LARGEST else None
    if found is None:
        raise Refused(404, f"the log signed no checkpoint of size {size}")
    return _checkpoint_doc(found)


def inclusion(server: Server, request: Request) -> dict[str, Any]:
    reader = server.ledgers.reader()
    found = reader.ledger.find(_required(request, "claim"))
    size = _tree_size(reader, request, "size")
    proof = reader.ledger.inclusion_proof(found.pulse or 0, size).to_json()
    return {**proof, "checkpoint": reader.ledger.checkpoint_of(proof["tree_size"])}


def consistency(server: Server, request: Request) -> dict[str, Any]:
    reader = server.ledgers.reader()
    old = _int(request, "from")
    if old is None:
        raise Refused(400, "give ?from= (the size of the older tree)")
    new = _tree_size(reader, request, "to")
    proof = reader.ledger.consistency_proof(old, new).to_json()
    return {**proof, "checkpoint": reader.ledger.checkpoint_of(proof["size2"])}


def _tree_size(reader: Reader, request: Request, name: str) -> int:
    size = _int(request, name)
    current = reader.store.head().size
    if size is not None and size > current:
        raise Refused(400, f"{name}={size} is beyond the tree, which holds {current} entries")
    return size or current


def lineage(server: Server, request: Request) -> dict[str, Any]:
    profile = request.path_params["profile"]
    found = lineage_here(server.home, profile)
    try:
        lines = [line for _, line in found.lines()] if found.path.exists() else []
    except ImproverError as exc:  # a damaged lineage file: the daemon's to mend, not the client's
        log.error("GET %s: %s", request.url.path, exc)
        raise Refused(500, f"the lineage of {profile} cannot be read here; the daemon's log says why") from None
    return {"profile": profile, "lines": lines}


def _row_json(row: Row) -> bytes:
    """A row as JSON: its exact bytes (base64) and, decoded, what they say: null for bytes
    that are not an entry, which are served as stored all the same, for audits to name.
    orjson writes what Starlette's json.dumps did but for a float's spelling (1e-05 as
    0.00001), the same number to any reader: json.dumps was 40% of a page's CPU."""
    try:
        entry = Entry.parse(row.raw, row.pulse, verify=False, leaf=row.leaf)
        payload: dict[str, Any] | None = {
            "kind": entry.kind,
            "author": entry.author,
            "at": entry.at,
            "log": entry.log,
            "seq": entry.seq,
            "body": entry.body,
        }
    except EntryError:
        payload = None
    leaf = row.leaf.hex()
    doc = {
        "pulse": row.pulse,
        "claim": leaf,
        "kind": row.kind,
        "author": row.author,
        "leaf": leaf,
        "chain": row.chain.hex(),
        "raw": base64.b64encode(row.raw).decode(),
        "payload": payload,
    }
    return orjson.dumps(doc)


def _checkpoint_doc(stored: StoredCheckpoint) -> dict[str, Any]:
    return {"size": stored.size, "note": stored.note, "at": stored.at}


# Writes


async def post_entry(server: Server, request: Request) -> Response:
    """One signed envelope, exactly as signed: its signature authenticates it, its
    author's rate bounds how many the server records (429 past it), the ledger's rules
    decide."""
    raw = (await capped_body(request, server.entry_cap)).strip()
    try:
        recorded = await run_in_threadpool(_append, server, raw)
    except EntryTooLarge as exc:
        server.metrics.count("agentd_entries_refused_total", reason="too_large")
        raise Refused(413, str(exc).removeprefix("entry 1 refused: ")) from None
    except EntryError as exc:
        server.metrics.count("agentd_entries_refused_total", reason="malformed")
        raise Refused(400, str(exc).removeprefix("entry 1 refused: ")) from None
    except RuleViolation as exc:
        server.metrics.count("agentd_entries_refused_total", reason="rule")
        raise Refused(422, str(exc)) from None
    server.metrics.count("agentd_entries_appended_total")
    receipt = recorded.receipt.to_json() if recorded.receipt else None
    return JSONResponse({"pulse": recorded.pulse, "claim": recorded.claim_id, "receipt": receipt}, status_code=201)


def _append(server: Server, raw: bytes) -> Entry:
    """Records a posted entry, its author's token spent unless it recorded nothing. The
    author is the one whose key signed it (a forged name spends no one's tokens)."""
    author, rates = Entry.parse(raw).author, server.ledgers.rates
    wait = rates.take(author)
    if wait is not None:
        server.metrics.count("agentd_entries_refused_total", reason="rate")
        raise Refused(429, rates.wording(author, wait), {"retry-after": str(retry_after(wait))})
    try:
        return server.ledgers.append(raw)
    except RefusalRecorded:
        raise  # its refusal is on the log: the token is spent
    except LedgerError:
        rates.give_back(author)
        raise


async def post_sessions(server: Server, request: Request) -> Response:
    """Transcripts in the `sessions import` format for ?profile=, behind the bearer token."""
    _authorize(server, request)
    profile = _required(request, "profile")
    body = await capped_body(request, server.sessions_cap)
    imported = await run_in_threadpool(_import, server.home, profile, body)
    server.metrics.count("agentd_sessions_imported_total", len(imported.records))
    sessions = [{"id": r.id, "claim": r.claim_id, "outcome": r.outcome} for r in imported.records]
    return JSONResponse({"sessions": sessions, "warnings": imported.warnings}, status_code=201)


def _authorize(server: Server, request: Request) -> None:
    token = server.token
    if token is None:
        raise Refused(404, "session intake is off: set [serve] intake_token in config.toml to turn it on")
    given = request.headers.get("authorization", "")
    scheme, _, value = given.partition(" ")
    # Constant time: how much of a guess matched must not show in how long the answer took.
    if scheme.lower() != "bearer" or not hmac.compare_digest(value.strip().encode(), token.encode()):
        raise Refused(401, "a wrong or missing bearer token: send Authorization: Bearer <[serve] intake_token>")


def _import(home: Home, profile: str, body: bytes) -> Any:
    """`sessions import` on the body, kept meanwhile in a file in the home that only its
    owner can read (mode 0600, as tempfile makes it), removed after."""
    with tempfile.NamedTemporaryFile(dir=home.root, prefix=".intake-", suffix=".jsonl") as held:
        held.write(body)
        held.flush()
        try:
            return import_file(home, Path(held.name), profile)
        except NotFound:
            raise
        except AgentdError as exc:  # it names the file it read: to the client, that is its body
            raise Refused(400, str(exc).replace(held.name, "the body")) from None
