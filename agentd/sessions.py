"""Recorded sessions: the transcript stays in `agentd.db`, its digest goes on the ledger.

A session's outcome is known when a person marked it (a mark wins) or its check
(`--verify`) ran; an errored session (a provider fault) says nothing about the agent
and is kept apart from one that went badly.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, suppress
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import JSON, Column, event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool
from sqlmodel import Field, Session, SQLModel, col, create_engine, select

from agentd.errors import AgentdError, WrongValue
from agentd.home import PRIVATE_FILE, Home
from agentd.secrets import machine_secrets, redact
from improver import digest, utc_now
from ledger import Ledger, LedgerError, Wallet

SessionOutcome = Literal["good", "bad", "unknown", "errored"]
OUTCOMES: tuple[str, ...] = ("good", "bad", "unknown", "errored")
HEX = re.compile(r"[0-9a-f]+")


class SessionRecord(SQLModel, table=True):
    __tablename__ = "sessions"

    id: str = Field(primary_key=True)
    profile: str = Field(index=True)
    task: str
    source: str = "live"  # "live", or "import" for a transcript recorded elsewhere
    started_at: str
    ended_at: str
    ended: str  # done | asked | limit | errored
    answer: str = ""
    error: str = ""
    models: list[str] = Field(default_factory=list, sa_column=Column(JSON))
    tokens_in: int = 0
    tokens_out: int = 0
    turns: int = 0
    person_messages: int = 1
    compacted: bool = False
    transcript: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON))
    tools: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON))
    # One row per model call and tool call: what ran, its tokens and how long it took.
    timings: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON))
    check: str | None = None  # passed | failed, when --verify ran
    mark: str | None = None  # good | bad, a person's word; wins over the check
    mark_note: str = ""
    secrets: list[str] = Field(default_factory=list, sa_column=Column(JSON))
    confidential: bool = False
    claim_id: str | None = None
    pulse: int | None = None

    @property
    def outcome(self) -> SessionOutcome:
        if self.ended == "errored":
            return "errored"
        if self.mark:
            return "good" if self.mark == "good" else "bad"
        if self.check:
            return "good" if self.check == "passed" else "bad"
        return "unknown"

    def digest(self) -> str:
        """SHA-256 of the canonical record: what the ledger entry vouches for."""
        return digest({"id": self.id, **self._content()})

    def content_digest(self) -> str:
        """SHA-256 of what the session holds, whatever its id: the same transcript
        imported twice has the same one."""
        return digest({**self._content(), "source": self.source, "compacted": self.compacted})

    def _content(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "task": self.task,
            "transcript": self.transcript,
            "tools": self.tools,
            "models": self.models,
            "ended": self.ended,
            "check": self.check,
        }

    def entry_body(self) -> dict[str, Any]:
        """The `agent.session/v1` body: the digest, never the transcript."""
        return {
            "session": self.id,
            "profile": self.profile,
            "digest": self.digest(),
            "source": self.source,
            "ended": self.ended,
            "check": self.check,
            "models": self.models,
            "tokens": {"in": self.tokens_in, "out": self.tokens_out},
            "started": self.started_at,
        }

    def summary(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "profile": self.profile,
            "started": self.started_at,
            "ended": self.ended,
            "outcome": self.outcome,
            "task": self.task,
            "tokens": {"in": self.tokens_in, "out": self.tokens_out},
            "claim": self.claim_id,
            "pulse": self.pulse,
        }


ID_LENGTH = 32  # hex digits, as a uuid4's


def new_id() -> str:
    return uuid.uuid4().hex


def now() -> str:
    """When a session started or ended: to the microsecond, so sessions list in order."""
    return utc_now(precise=True)


def _pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


def _wal(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.close()


class PendingWrite(SQLModel, table=True):
    """A write that spans this store and the ledger, noted before the ledger entry is
    appended and removed, with the row's change, once it is: what `repair` settles after
    a crash or a full disk came between the two."""

    __tablename__ = "pending_writes"

    session: str = Field(primary_key=True)
    kind: str  # SESSION_KIND (the row itself waits for its entry) or MARK_KIND
    after: int  # the ledger's size before the append: the entry, if made, lies beyond it
    mark: str | None = None  # for a mark: its outcome and note
    note: str = ""


SESSION_KIND = "agent.session/v1"
MARK_KIND = "agent.mark/v1"


class SessionStore:
    """The sessions of one home, in `agentd.db` (SQLite, WAL: safe across processes).

    A session's row is written first, pending, with a note of the entry it waits for;
    then its entry is appended to the ledger; then, in one transaction, the row gets its
    claim and the note goes. Marks are written the same way. Rows still pending (no
    claim) are never listed nor shown; `repair` settles them by looking on the ledger.
    `read_only` opens an existing store for reading alone and creates nothing."""

    def __init__(self, home: Home, read_only: bool = False) -> None:
        self.home = home
        self.path = home.agentd_db
        self.read_only = read_only
        self.engine: Engine | None = None
        if read_only:
            if self.path.exists():
                self.engine = create_engine(read_only_url(self.path), poolclass=NullPool)
                event.listen(self.engine, "connect", _pragmas)
            return
        if not self.path.exists():
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, PRIVATE_FILE))
        self.engine = create_engine(f"sqlite:///{self.path}", poolclass=NullPool)
        event.listen(self.engine, "connect", _pragmas)
        event.listen(self.engine, "connect", _wal)
        with self._failing("open"):
            # sqlmodel gives a table model its __table__ at run time; its types do not declare it.
            tables = [SessionRecord.__table__, PendingWrite.__table__]  # type: ignore[attr-defined]
            SQLModel.metadata.create_all(self.engine, tables=tables)

    def writing(self) -> AbstractContextManager[None]:
        """Held across a write that spans this store and the ledger, and by `repair`, so
        a repair never settles a write still under way in another process."""
        return self.home.writing()

    @contextmanager
    def _failing(self, what: str) -> Iterator[None]:
        """SQLite's failures (a full disk, a damaged file) as one line naming the store."""
        try:
            yield
        except SQLAlchemyError as exc:
            cause = getattr(exc, "orig", None) or exc
            raise AgentdError(
                f"cannot {what} the sessions store {self.path} ({cause}); check the disk and the file"
            ) from None

    def _session(self) -> Session:
        if self.engine is None:
            raise AgentdError(f"no sessions store at {self.path}")
        return Session(self.engine, expire_on_commit=False)

    def add(self, record: SessionRecord) -> SessionRecord:
        with self._failing("write to"), self._session() as db:
            db.add(record)
            db.commit()
        return record

    def begin(
        self, records: list[SessionRecord], kind: str, after: int, mark: str | None = None, note: str = ""
    ) -> None:
        """Writes `records` with a note that each waits for an entry of `kind` beyond Pulse `after`."""
        with self._failing("write to"), self._session() as db:
            for record in records:
                if kind == SESSION_KIND:
                    db.add(record)  # a new session
                else:
                    db.merge(record)  # a mark on one
                db.add(PendingWrite(session=record.id, kind=kind, after=after, mark=mark, note=note))
            db.commit()

    def finish(self, records: list[SessionRecord]) -> None:
        """Saves `records` as their entries made them, and drops their notes."""
        with self._failing("write to"), self._session() as db:
            for record in records:
                db.merge(record)
                pending = db.get(PendingWrite, record.id)
                if pending is not None:
                    db.delete(pending)
            db.commit()

    def abandon(self, ids: list[str]) -> None:
        """Gives up writes whose entries were never made: a new session goes, a mark's note goes."""
        with self._failing("write to"), self._session() as db:
            for sid in ids:
                pending = db.get(PendingWrite, sid)
                if pending is None:
                    continue
                row = db.get(SessionRecord, sid)
                if pending.kind == SESSION_KIND and row is not None and row.claim_id is None:
                    db.delete(row)
                db.delete(pending)
            db.commit()

    def pending(self) -> list[PendingWrite]:
        if self.read_only or self.engine is None:
            return []
        with self._failing("read"), self._session() as db:
            return list(db.exec(select(PendingWrite)).all())

    def get(self, prefix: str) -> SessionRecord:
        """A session by its id or any unique prefix of it."""
        prefix = prefix.strip().lower()
        if not HEX.fullmatch(prefix):
            raise WrongValue(
                f"session id {prefix!r} is not hexadecimal: give a session's id, or its first characters (0-9, a-f)"
            )
        if len(prefix) < 4:
            raise WrongValue(f"session id {prefix!r} is too short: give at least 4 characters")
        rows: list[SessionRecord] = []
        if self.engine is not None:
            with self._failing("read"), self._session() as db:
                # Escaped as well: the prefix is data, never a LIKE pattern.
                query = select(SessionRecord).where(
                    col(SessionRecord.id).startswith(prefix, autoescape=True), _recorded()
                )
                rows = list(db.exec(query.limit(2)).all())
        if not rows:
            raise AgentdError(f"no session {prefix!r} (list them with: agentd sessions list)")
        if len(rows) > 1:
            raise WrongValue(f"session id {prefix!r} is ambiguous: give more characters")
        return rows[0]

    def row(self, session_id: str) -> SessionRecord | None:
        """The row of `session_id`, pending or not."""
        if self.engine is None:
            return None
        with self._failing("read"), self._session() as db:
            return db.get(SessionRecord, session_id)

    def list(self, profile: str | None = None, outcome: str | None = None) -> list[SessionRecord]:
        if self.engine is None:
            return []
        with self._failing("read"), self._session() as db:
            query = select(SessionRecord).where(_recorded()).order_by(SessionRecord.started_at)
            if profile:
                query = query.where(SessionRecord.profile == profile)
            rows = list(db.exec(query).all())
        return [r for r in rows if outcome is None or r.outcome == outcome]


def _recorded() -> Any:
    """Sessions whose entry is on the ledger: a pending one is not a session yet."""
    return col(SessionRecord.claim_id).is_not(None)


def read_only_url(path: Path) -> str:
    """SQLite's read-only URI; immutable when no WAL is beside the file in a folder this
    process cannot write (there SQLite could not make the -shm it would need)."""
    quiet = not path.with_name(path.name + "-wal").exists() and not os.access(path.parent, os.W_OK)
    return f"sqlite:///{path.as_uri()}?{'immutable=1' if quiet else 'mode=ro'}&uri=true"


def repair(store: SessionStore, ledger: Ledger) -> None:
    """Settles the writes a crash or a full disk left pending, by what the ledger holds:
    a session whose entry is there gets its claim, one whose entry is not is dropped (its
    command failed, saying so); a mark whose entry is there is made, else forgotten.
    The caller holds `store.writing()`."""
    settled, abandoned = [], []
    for pending in store.pending():
        entry = _entry_of(ledger, pending)
        if entry is None:
            abandoned.append(pending.session)
            continue
        row = store.row(pending.session)
        if row is None:
            abandoned.append(pending.session)
            continue
        if pending.kind == SESSION_KIND:
            row.claim_id, row.pulse = entry.claim_id, entry.pulse
        else:
            row.mark, row.mark_note = pending.mark, pending.note
        settled.append(row)
    store.finish(settled)
    store.abandon(abandoned)


def _entry_of(ledger: Ledger, pending: PendingWrite) -> Any:
    for entry in ledger.entries(kind=pending.kind, start=pending.after + 1):
        body = entry.body
        if body.get("session") != pending.session:
            continue
        if pending.kind == MARK_KIND and (body.get("outcome"), body.get("note")) != (pending.mark, pending.note):
            continue
        return entry
    return None


def protect(home: Home, record: SessionRecord) -> SessionRecord:
    """Flags a session that held a secret this machine keeps, and keeps the value out."""
    secrets = machine_secrets(home)
    found: set[str] = set()
    for name in ("task", "transcript", "answer", "error"):
        clean, hits = redact(getattr(record, name), secrets)
        setattr(record, name, clean)
        found.update(hits)
    record.secrets = sorted(found)
    return record


def keep(store: SessionStore, records: list[SessionRecord], signer: Wallet, ledger: Ledger) -> list[SessionRecord]:
    """Stores the transcripts, then puts their digests on the ledger as agent.session/v1,
    all of them or none (see SessionStore for the order, and `repair`)."""
    with store.writing():
        store.begin(records, SESSION_KIND, ledger.size)
        try:
            entries = ledger.append_many([(signer, SESSION_KIND, r.entry_body()) for r in records])
        except BaseException:
            settle(store, ledger)
            raise
        for record, entry in zip(records, entries, strict=False):
            record.claim_id, record.pulse = entry.claim_id, entry.pulse
        store.finish(records)
    return records


def settle(store: SessionStore, ledger: Ledger) -> None:
    """`repair`, as far as the disk lets it: what it cannot settle now stays pending for
    the next command, and a failed append's own error is the one shown."""
    with suppress(AgentdError, LedgerError):
        repair(store, ledger)


def person_messages(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") == "user")
