"""Recorded sessions: the transcript stays in `agentd.db`, its digest goes on the ledger.

A session's outcome is known when a person marked it (a mark wins) or its check
(`--verify`) ran; an errored session (a provider fault) says nothing about the agent
and is kept apart from one that went badly. So does an interrupted one (Ctrl-C, a
signal, its process killed), until a person marks it.

A live session is written down as it goes (`UnderWay`, `SessionStep`): each message of
its transcript as it joins it, so the tool calls it asks for are on disk before any of
them runs. One whose process ended before it was recorded is found by the next command
that opens the store and recorded as interrupted, with every call it made.
"""

from __future__ import annotations

import os
import re
import socket
import uuid
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext, suppress
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from sqlalchemy import JSON, Column, Table, delete, event, insert
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool
from sqlmodel import Field, Session, SQLModel, col, create_engine, select

from agentd.errors import AgentdError, WrongValue
from agentd.home import PRIVATE_FILE, Home
from agentd.secrets import machine_secrets, redact
from improver import ASK_PERSON_TOOL, digest, utc_now
from ledger import Ledger, LedgerError, Wallet

SessionOutcome = Literal["good", "bad", "unknown", "errored", "interrupted"]
OUTCOMES: tuple[str, ...] = ("good", "bad", "unknown", "errored", "interrupted")
HEX = re.compile(r"[0-9a-f]+")
# How an interrupted session's error starts; what follows says what stopped it, and when.
INTERRUPTED = "interrupted: "


class SessionRecord(SQLModel, table=True):
    __tablename__ = "sessions"

    id: str = Field(primary_key=True)
    profile: str = Field(index=True)
    task: str
    source: str = "live"  # "live", or "import" for a transcript recorded elsewhere
    started_at: str
    ended_at: str
    ended: str  # done | asked | limit | errored (an interrupted session: limit, see `interrupted`)
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
    def interrupted(self) -> bool:
        """Stopped part-way: by Ctrl-C or a signal, or its process ended first. It ends as
        `limit`, the ending that every layer knows (the ledger's rule, harvest, task files)
        and that a person may mark, and its error says what stopped it."""
        return self.ended == "limit" and self.error.startswith(INTERRUPTED)

    @property
    def outcome(self) -> SessionOutcome:
        if self.ended == "errored":
            return "errored"
        if self.mark:
            return "good" if self.mark == "good" else "bad"
        if self.check:
            return "good" if self.check == "passed" else "bad"
        return "interrupted" if self.interrupted else "unknown"

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
        body = {
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
        return body | {"interrupted": True} if self.interrupted else body

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


@lru_cache(maxsize=16)
def _engine_for(url: str, writing: bool) -> Engine:
    """One engine a database URL in a process, however often a store is opened on it:
    SQLAlchemy keeps the SQL it compiled on the engine, so an engine each store made
    compiled every statement again (a quarter of the CPU a live session's recording took).
    NullPool: it holds no connection between uses, so sharing it shares nothing else."""
    engine = create_engine(url, poolclass=NullPool)
    event.listen(engine, "connect", _pragmas)
    if writing:
        event.listen(engine, "connect", _wal)
    return engine


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


class UnderWay(SQLModel, table=True):
    """A live session still running, written when it starts: its record as far as it is
    known then (redacted), the wallet that signs its entry and the process running it
    (`this_process`). Its transcript so far is its `SessionStep`s. Both go when the
    session is recorded; one whose process ended first is recorded as interrupted."""

    __tablename__ = "sessions_under_way"

    session: str = Field(primary_key=True)
    record: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    signer: str
    process: str
    secrets: list[str] = Field(default_factory=list, sa_column=Column(JSON))


class SessionStep(SQLModel, table=True):
    """One message of a live session's transcript, written (redacted) as it joined it,
    with the timings of the calls that led to it and the secrets it held."""

    __tablename__ = "session_steps"

    session: str = Field(primary_key=True)
    n: int = Field(primary_key=True)
    at: str
    message: dict[str, Any] = Field(default_factory=dict, sa_column=Column(JSON))
    timings: list[dict[str, Any]] = Field(default_factory=list, sa_column=Column(JSON))
    secrets: list[str] = Field(default_factory=list, sa_column=Column(JSON))


class Journal:
    """Writes one live session down as it goes (see UnderWay): each message a step of its
    own, committed (on disk) before the session goes on, so a tool call is written before
    it runs. It holds one connection for the session, so that a step costs one commit
    and not a new connection; closed, it leaves what it wrote for the session's record."""

    def __init__(self, store: SessionStore, record: SessionRecord, signer: str) -> None:
        self.store = store
        self.session = record.id
        self.secrets = machine_secrets(store.home)
        self.steps = 0
        with store._failing("open"):
            self._connection = store._engine().connect()
        start, found = redact(record.model_dump(), self.secrets)
        try:
            self._write(UnderWay, {"record": start, "signer": signer, "process": this_process(), "secrets": found})
        except AgentdError:
            self._connection.close()
            raise

    def add(self, message: dict[str, Any], timings: list[dict[str, Any]]) -> None:
        clean, found = redact(message, self.secrets)
        self._write(SessionStep, {"n": self.steps, "at": now(), "message": clean, "timings": timings, "secrets": found})
        self.steps += 1

    def _write(self, model: type[SQLModel], row: dict[str, Any]) -> None:
        with self.store._failing("write to"):
            self._connection.execute(insert(table_of(model)), {"session": self.session, **row})
            self._connection.commit()

    def __enter__(self) -> Journal:
        return self

    def __exit__(self, *exc: object) -> None:
        self._connection.close()


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
                self.engine = _engine_for(read_only_url(self.path), writing=False)
            return
        if not self.path.exists():
            os.close(os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, PRIVATE_FILE))
        self.engine = _engine_for(f"sqlite:///{self.path}", writing=True)
        with self._failing("open"):
            tables = [table_of(model) for model in (SessionRecord, PendingWrite, UnderWay, SessionStep)]
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

    def _engine(self) -> Engine:
        if self.engine is None:
            raise AgentdError(f"no sessions store at {self.path}")
        return self.engine

    def _session(self) -> Session:
        return Session(self._engine(), expire_on_commit=False)

    def add(self, record: SessionRecord) -> SessionRecord:
        with self._failing("write to"), self._session() as db:
            db.add(record)
            db.commit()
        return record

    def start(self, record: SessionRecord, signer: str) -> Journal:
        """Notes `record`, a live session starting to be signed by wallet `signer`, as
        under way in this process; returns the journal its messages go to."""
        return Journal(self, record, signer)

    def under_way(self) -> list[UnderWay]:
        """Every live session not recorded yet, in this process or any other."""
        if self.read_only or self.engine is None:
            return []
        with self._failing("read"), self._session() as db:
            return list(db.exec(select(UnderWay)).all())

    def steps(self, session: str) -> list[SessionStep]:
        with self._failing("read"), self._session() as db:
            query = select(SessionStep).where(SessionStep.session == session).order_by(col(SessionStep.n))
            return list(db.exec(query).all())

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
        """Saves `records` as their entries made them, and drops their notes and what was
        written of them while they ran."""
        with self._failing("write to"), self._session() as db:
            for record in records:
                db.merge(record)
                for model in (PendingWrite, UnderWay, SessionStep):  # deleted where they are, never loaded
                    table = table_of(model)
                    db.execute(delete(table).where(table.c.session == record.id))
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


def table_of(model: type[SQLModel]) -> Table:
    # sqlmodel gives a table model its __table__ at run time; its types do not declare it.
    table: Table = model.__table__  # type: ignore[attr-defined]
    return table


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


def keep(
    store: SessionStore, records: list[SessionRecord], signer: Wallet, ledger: Ledger, *, held: bool = False
) -> list[SessionRecord]:
    """Stores the transcripts, then puts their digests on the ledger as agent.session/v1,
    all of them or none (see SessionStore for the order, and `repair`). `held`: the
    caller holds `store.writing()` already."""
    with nullcontext() if held else store.writing():
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


def interruption(cause: str, messages: list[dict[str, Any]]) -> str:
    """An interrupted session's error: INTERRUPTED, `cause`, and what the session was
    doing by its transcript (a tool call asked for and not answered was running)."""
    answered: set[str] = set()
    doing = "while the model was answering"
    for message in reversed(messages):
        if message.get("role") == "tool":
            answered.add(str(message.get("tool_call_id")))
            continue
        if message.get("role") == "assistant":
            calls = [c for c in message.get("tool_calls") or [] if c["function"]["name"] != ASK_PERSON_TOOL]
            running = [c["function"]["name"] for c in calls if c["id"] not in answered]
            if running:
                doing = f"while {running[0]} ran"
            elif not calls:
                doing = "after its last answer, before it was recorded"
        break
    return f"{INTERRUPTED}{cause} {doing}"


def interrupted_record(home: Home, store: SessionStore, under_way: UnderWay) -> SessionRecord:
    """The record of a session whose process ended before recording it: every message
    it had written down, ended as interrupted."""
    steps = store.steps(under_way.session)
    record = SessionRecord(**under_way.record)
    record.transcript = [step.message for step in steps]
    record.timings = [timing for step in steps for timing in step.timings]
    models = [timing for timing in record.timings if timing["call"] == "model" and "error" not in timing]
    record.tokens_in = sum(timing["tokens_in"] for timing in models)
    record.tokens_out = sum(timing["tokens_out"] for timing in models)
    record.turns = len(models)
    record.person_messages = person_messages(record.transcript)
    record.ended = "limit"
    record.ended_at = steps[-1].at if steps else record.started_at
    record.error = interruption("its process ended", record.transcript)
    record = protect(home, record)
    record.secrets = sorted({*record.secrets, *under_way.secrets, *(name for step in steps for name in step.secrets)})
    return record


def this_process() -> str:
    """Who runs a live session: the host, the pid and which process holds that pid now
    (`_running`), so a pid the system has since given to another is not taken for it."""
    pid = os.getpid()
    return f"{socket.gethostname()} {pid} {_running(pid)}"


def process_ended(process: str) -> bool:
    """Whether the process `this_process` named has ended. One on another host may be
    running still, so it is never taken for ended here."""
    host, pid, which = process.split(" ", 2)
    return host == socket.gethostname() and _running(int(pid)) != which


def _running(pid: int) -> str | None:
    """The process holding `pid`, as the boot and the clock tick it started at (from
    /proc; "-" where there is none), or None when none does (a zombie has ended too)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None if Path("/proc/self/stat").exists() else _signalled(pid)
    except OSError:
        return "-"  # there, but not ours to read: running
    state, *rest = stat.rpartition(")")[2].split()  # the name, in parentheses, may hold anything
    if state in ("Z", "X"):
        return None
    return f"{_boot()} {rest[18]}"  # field 22 of proc(5): the start time


def _signalled(pid: int) -> str | None:
    """Without /proc: "-" when a process holds `pid`, else None."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # someone else's: running
    return "-"


def _boot() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "-"
