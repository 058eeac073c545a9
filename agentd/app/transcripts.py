"""Sessions as the dashboard shows them: a page of them, newest first, only those holding
what a person searched for, and one session's transcript as Inspect's log viewer shows a
sample's: each message, each tool call with its arguments beside the tool's answer, the
outcome, what its check and a person's mark said, and the tasks harvested from it.

Reading alone. What a transcript holds came from a model and its tools: it is data for
the page to escape, never markup.
"""

from __future__ import annotations

import json
from contextlib import suppress
from dataclasses import dataclass, field
from typing import Any

from agentd.app.archives import profile_archives
from agentd.app.sessions import open_sessions
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.sessions import SessionRecord
from improver import ImproverError, text_of

PER_PAGE = 20  # sessions a page


@dataclass(frozen=True)
class SessionPage:
    """Sessions `first`..`first + len(sessions) - 1` (from 1, newest first) of the
    `matched` that hold `query` (every session when it is empty)."""

    sessions: list[dict[str, Any]]
    page: int
    pages: int
    matched: int
    total: int
    query: str

    @property
    def first(self) -> int:
        return (self.page - 1) * PER_PAGE + 1


def listed(record: SessionRecord) -> dict[str, Any]:
    """A session as a list shows it: its summary, its check and a person's mark."""
    return {**record.summary(), "check": record.check, "mark": record.mark, "mark_note": record.mark_note}


def session_page(home: Home, page: int, query: str = "") -> SessionPage:
    """Page `page` (from 1; past the last, the last) of the sessions holding `query`,
    case aside, in their id, profile, task, outcome, answer, error, mark or any message
    or tool call of their transcript."""
    records = open_sessions(home).list()[::-1] if home.exists else []
    wanted = " ".join(query.lower().split())
    matched = [r for r in records if wanted in _searched(r)]
    pages = max(1, -(-len(matched) // PER_PAGE))
    page = min(max(page, 1), pages)
    shown = matched[(page - 1) * PER_PAGE : page * PER_PAGE]
    return SessionPage([listed(r) for r in shown], page, pages, len(matched), len(records), query)


def _searched(record: SessionRecord) -> str:
    said = [record.id, record.profile, record.task, record.outcome, record.answer, record.error, record.mark_note]
    messages = [text_of(m.get("content")) for m in record.transcript]
    calls = [
        str((c.get("function") or {}).get("arguments")) for m in record.transcript for c in m.get("tool_calls") or []
    ]
    return " ".join(" ".join([*said, *messages, *calls]).lower().split())


@dataclass(frozen=True)
class Call:
    """A tool call with its arguments and the tool's answer (None: no answer came)."""

    id: str
    tool: str
    arguments: str  # indented JSON when they parse, else as the model wrote them
    answer: str | None
    changes: bool  # the tool changes something (the profile says so)
    seconds: float | None


@dataclass(frozen=True)
class Message:
    role: str
    text: str
    calls: list[Call] = field(default_factory=list)


@dataclass(frozen=True)
class Harvested:
    """A task to choose on harvested from the session: the archive it is a row of."""

    task: str
    seal: str
    key: str  # the archive's, for the task grid's address


@dataclass(frozen=True)
class Transcript:
    session: dict[str, Any]  # the record's facts (SessionRecord's fields but the transcript)
    outcome: str
    messages: list[Message]
    harvested: list[Harvested]


def transcript(home: Home, session: str) -> Transcript | None:
    """Session `session` (its whole id) read for its page; None when there is none."""
    if not home.exists or not session.isalnum():
        return None
    try:
        record = open_sessions(home).get(session)
    except AgentdError:
        return None
    if record.id != session:
        return None  # a page's address names the whole id: a prefix is no address
    facts = record.model_dump(exclude={"transcript", "tools", "timings"})
    return Transcript(facts, record.outcome, messages(record), harvested(home, record))


def messages(record: SessionRecord) -> list[Message]:
    """The transcript's messages, each tool's answer under the call it answers (an answer
    to no call it made stays a message of its own)."""
    changes = {str(t.get("name")): bool(t.get("changes")) for t in record.tools}
    seconds = {str(t.get("id")): t.get("seconds") for t in record.timings if t.get("call") == "tool"}
    answers = {
        str(m.get("tool_call_id")): text_of(m.get("content")) for m in record.transcript if m.get("role") == "tool"
    }
    called = {str(c.get("id")) for m in record.transcript for c in m.get("tool_calls") or []}
    shown = []
    for m in record.transcript:
        if m.get("role") == "tool" and str(m.get("tool_call_id")) in called:
            continue
        calls = [_call(c, answers, changes, seconds) for c in m.get("tool_calls") or []]
        shown.append(Message(str(m.get("role")), text_of(m.get("content")), calls))
    return shown


def _call(call: dict[str, Any], answers: dict[str, str], changes: dict[str, bool], seconds: dict[str, Any]) -> Call:
    function = call.get("function") or {}
    tool, arguments, id = str(function.get("name")), str(function.get("arguments", "")), str(call.get("id"))
    with suppress(ValueError):  # arguments that are not JSON are shown as the model wrote them
        arguments = json.dumps(json.loads(arguments), indent=2, ensure_ascii=False)
    took = seconds.get(id)
    return Call(
        id, tool, arguments, answers.get(id), changes.get(tool, False), took if isinstance(took, float) else None
    )


def harvested(home: Home, record: SessionRecord) -> list[Harvested]:
    """The tasks to choose on, in the profile's archives, harvested from the session."""
    found = []
    try:
        for tried in profile_archives(home, record.profile):
            for task in tried.seal.train().tasks:
                if task.source.get("session") == record.id:
                    found.append(Harvested(task.name, tried.seal.id, tried.key))
    except ImproverError:
        return found  # a seal that does not open is the profile page's to name
    return found
