"""Recorded sessions: the transcript stays in `agentd.db`, its digest goes on the ledger.

A session's outcome is known when a person marked it (a mark wins) or its check
(`--verify`) ran; an errored session (a provider fault) says nothing about the agent
and is kept apart from one that went badly.
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Literal

from sqlalchemy import JSON, Column, event
from sqlalchemy.engine import Engine
from sqlmodel import Field, Session, SQLModel, col, create_engine, select

from agentd.errors import AgentdError
from agentd.home import Home
from agentd.secrets import machine_secrets, redact
from improver import digest, utc_now
from ledger import Ledger, Wallet

Outcome = Literal["good", "bad", "unknown", "errored"]
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
    def outcome(self) -> Outcome:
        if self.ended == "errored":
            return "errored"
        if self.mark:
            return "good" if self.mark == "good" else "bad"
        if self.check:
            return "good" if self.check == "passed" else "bad"
        return "unknown"

    def digest(self) -> str:
        """SHA-256 of the canonical record: what the ledger entry vouches for."""
        record = {
            "id": self.id,
            "profile": self.profile,
            "task": self.task,
            "transcript": self.transcript,
            "tools": self.tools,
            "models": self.models,
            "ended": self.ended,
            "check": self.check,
        }
        return digest(record)

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


def new_id() -> str:
    return uuid.uuid4().hex


def now() -> str:
    """When a session started or ended: to the microsecond, so sessions list in order."""
    return utc_now(precise=True)


def _wal(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


class SessionStore:
    """The sessions of one home, in `agentd.db` (SQLite, WAL: safe across processes)."""

    def __init__(self, home: Home) -> None:
        home.root.mkdir(parents=True, exist_ok=True)
        self.engine: Engine = create_engine(f"sqlite:///{home.agentd_db}")
        event.listen(self.engine, "connect", _wal)
        SQLModel.metadata.create_all(self.engine, tables=[SessionRecord.__table__])

    def add(self, record: SessionRecord) -> SessionRecord:
        with Session(self.engine, expire_on_commit=False) as db:
            db.add(record)
            db.commit()
        return record

    def save(self, record: SessionRecord) -> None:
        with Session(self.engine, expire_on_commit=False) as db:
            db.merge(record)
            db.commit()

    def get(self, prefix: str) -> SessionRecord:
        """A session by its id or any unique prefix of it."""
        prefix = prefix.strip().lower()
        if not HEX.fullmatch(prefix):
            raise AgentdError(f"session id {prefix!r} is not hexadecimal: give a session's id, or its first characters (0-9, a-f)")
        if len(prefix) < 4:
            raise AgentdError(f"session id {prefix!r} is too short: give at least 4 characters")
        with Session(self.engine, expire_on_commit=False) as db:
            # Escaped as well: the prefix is data, never a LIKE pattern.
            query = select(SessionRecord).where(col(SessionRecord.id).startswith(prefix, autoescape=True))
            rows = db.exec(query.limit(2)).all()
        if not rows:
            raise AgentdError(f"no session {prefix!r} (list them with: agentd sessions list)")
        if len(rows) > 1:
            raise AgentdError(f"session id {prefix!r} is ambiguous: give more characters")
        return rows[0]

    def list(self, profile: str | None = None, outcome: str | None = None) -> list[SessionRecord]:
        with Session(self.engine, expire_on_commit=False) as db:
            query = select(SessionRecord).order_by(SessionRecord.started_at)
            if profile:
                query = query.where(SessionRecord.profile == profile)
            rows = list(db.exec(query).all())
        return [r for r in rows if outcome is None or r.outcome == outcome]


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


def keep(home: Home, record: SessionRecord, signer: Wallet, ledger: Ledger) -> SessionRecord:
    """Stores the transcript, then puts its digest on the ledger as agent.session/v1."""
    store = SessionStore(home)
    store.add(record)
    entry = ledger.append(signer, "agent.session/v1", record.entry_body())
    record.claim_id, record.pulse = entry.claim_id, entry.pulse
    store.save(record)
    return record


def person_messages(messages: list[dict[str, Any]]) -> int:
    return sum(1 for m in messages if m.get("role") == "user")
