"""Sessions recorded by another agent framework, taken in so agentd can improve them too.

A file holds one transcript in OpenAI chat format, `{"messages": [...], "tools": [...],
"metadata": {...}}` (the fine-tuning format, so `agentd improve export`'s own sft.jsonl
reads back), a bare list of messages, or JSON lines of such objects. Optional metadata:
`ended` (done|asked|limit|errored), `check` (passed|failed), `compacted` (true|false),
`models` (a list of names); other keys are ignored.

Every transcript is checked whole before any is kept (improver.tasks.chat says what a
well-formed one is): a bad one is refused with one line naming the file, the line for
JSON lines, and the message, and nothing of the file is imported. The rest are recorded
together: all of them or, if the disk or the ledger fails, none.

An imported session's id is the digest of what is stored of it (after secrets are kept
out), so a transcript imported again is recognised and passed over with a warning,
never made a second session.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentd.app.ledger import open_ledger
from agentd.app.sessions import open_sessions
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import Profile, load_profile
from agentd.sessions import ID_LENGTH, SessionRecord, keep, now, person_messages, protect
from agentd.wallets import load_wallet
from improver import ENDINGS, ImproverError, TooDeep, loads_bounded, text_of, transcript_problem

TOOL_SHAPE = '{"type": "function", "function": {"name": ..., "description": ..., "parameters": {...}}}'


@dataclass
class ImportedSessions:
    records: list[SessionRecord]
    warnings: list[str] = field(default_factory=list)


def import_file(home: Home, path: Path, profile_name: str) -> ImportedSessions:
    """Reads every transcript in `path` first, so a bad one leaves nothing half-imported."""
    profile = load_profile(home, profile_name)
    signer = load_wallet(home, profile.wallet)
    documents = _documents(path)
    result = ImportedSessions([])
    store = open_sessions(home, write=True)
    seen: dict[str, str] = {}
    for where, doc in documents:
        record, warnings = _record(profile, doc, where)
        record = _recordable(protect(home, record), where)
        result.warnings += warnings
        if record.id in seen:
            result.warnings.append(f"{where}: the same transcript as {seen[record.id]}; passed over")
        elif store.row(record.id) is not None:
            result.warnings.append(f"{where}: imported already, as session {record.id}; passed over")
        else:
            seen[record.id] = where
            result.records.append(record)
    if result.records:
        with open_ledger(home) as ledger:
            keep(store, result.records, signer, ledger)
    return result


def _documents(path: Path) -> list[tuple[str, Any]]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise AgentdError(f"cannot read {path}: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = data.count(b"\n", 0, exc.start) + 1
        raise AgentdError(
            f"{path}: line {at}: not UTF-8 text (byte {exc.start}); transcripts are JSON in UTF-8"
        ) from None
    try:
        return [(str(path), _json(text, str(path)))]
    except json.JSONDecodeError as whole:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if len(lines) < 2:
            raise AgentdError(f"{path}: line {whole.lineno}: not JSON ({whole.msg})") from None
    docs = []
    for n, line in lines:
        try:
            docs.append((f"{path}:{n}", _json(line, f"{path}: line {n}")))
        except json.JSONDecodeError as exc:
            raise AgentdError(f"{path}: line {n}: not JSON ({exc.msg})") from None
    return docs


def _json(text: str, where: str) -> Any:
    try:
        return loads_bounded(text)
    except TooDeep as exc:
        raise AgentdError(f"{where}: nested too deeply to be a transcript ({exc})") from None


def _record(profile: Profile, doc: Any, where: str) -> tuple[SessionRecord, list[str]]:
    if isinstance(doc, list):
        doc = {"messages": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise AgentdError(f'{where}: expected {{"messages": [...]}} or a list of chat messages')
    messages = doc["messages"]
    wrong = transcript_problem(messages)
    if wrong:
        raise AgentdError(f"{where}: {wrong}")
    users = [m for m in messages if m["role"] == "user"]
    if not users:
        raise AgentdError(f"{where}: the transcript has no user message, so it holds no task")
    meta = _metadata(doc.get("metadata"), where)
    tools, warnings = _tools(profile, doc.get("tools"), where)
    ended = meta.get("ended") or _ended(messages)
    last = messages[-1]
    stamp = now()
    return (
        SessionRecord(
            id="",  # the digest of what is stored: see _recordable
            profile=profile.name,
            task=text_of(users[0].get("content")),
            source="import",
            started_at=stamp,
            ended_at=stamp,
            ended=ended,
            answer=text_of(last.get("content")) if ended == "done" else "",
            models=meta.get("models") or [],
            turns=sum(1 for m in messages if m["role"] == "assistant"),
            person_messages=person_messages(messages),
            compacted=meta.get("compacted") is True,
            transcript=messages,
            tools=tools,
            check=meta.get("check"),
            confidential=profile.confidential,
        ),
        warnings,
    )


def _metadata(meta: Any, where: str) -> dict[str, Any]:
    """The metadata agentd reads, each of the kind it must be."""
    if meta is None:
        return {}
    if not isinstance(meta, dict):
        raise AgentdError(f'{where}: metadata must be a JSON object such as {{"ended": "done"}}, not {_shown(meta)}')
    if meta.get("ended") is not None and meta["ended"] not in ENDINGS:
        raise AgentdError(f"{where}: metadata.ended must be one of {', '.join(ENDINGS)}, not {_shown(meta['ended'])}")
    if meta.get("check") is not None and meta["check"] not in ("passed", "failed"):
        raise AgentdError(f"{where}: metadata.check must be passed or failed, not {_shown(meta['check'])}")
    if meta.get("compacted") is not None and not isinstance(meta["compacted"], bool):
        raise AgentdError(f"{where}: metadata.compacted must be true or false, not {_shown(meta['compacted'])}")
    models = meta.get("models")
    if models is not None and (not isinstance(models, list) or not all(isinstance(m, str) for m in models)):
        raise AgentdError(f"{where}: metadata.models must be a list of model names, not {_shown(models)}")
    return meta


def _shown(value: Any) -> str:
    """A value as JSON, cut short: enough to find it in the file."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _recordable(record: SessionRecord, where: str) -> SessionRecord:
    """Names the session by the digest of what is stored of it; refuses a transcript
    whose digest cannot be taken, before anything is kept."""
    try:
        record.id = record.content_digest()[:ID_LENGTH]
    except ImproverError as exc:
        raise AgentdError(f"{where}: the transcript cannot be recorded: {exc}") from None
    except RecursionError:
        raise AgentdError(f"{where}: the transcript cannot be recorded: it is nested too deeply") from None
    return record


def _tools(profile: Profile, offered: Any, where: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Takes what each tool changes from the profile; a tool it lacks is taken to change something."""
    if offered is None:
        offered = []
    if not isinstance(offered, list):
        raise AgentdError(f"{where}: tools must be a list of {TOOL_SHAPE}, not {_shown(offered)}")
    infos, unknown = [], []
    for index, t in enumerate(offered):
        fn = t.get("function", t) if isinstance(t, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"]:
            raise AgentdError(f"{where}: tool {index} is not {TOOL_SHAPE}")
        if not isinstance(fn.get("description") or "", str) or not isinstance(fn.get("parameters") or {}, dict):
            raise AgentdError(
                f"{where}: tool {index} ({fn['name']}): its description must be text and its parameters a JSON object"
            )
        spec = profile.tool(fn["name"])
        if spec:
            infos.append(spec.info())
            continue
        unknown.append(fn["name"])
        infos.append(
            {
                "name": fn["name"],
                "description": fn.get("description") or "",
                "parameters": fn.get("parameters") or {"type": "object"},
                "changes": True,
                "match": "input",
            }
        )
    warnings = [
        f"{where}: tool {name!r} is not in profile {profile.name!r}; taken to change something" for name in unknown
    ]
    return infos, warnings


def _ended(messages: list[dict[str, Any]]) -> str:
    last = messages[-1]
    finished = last["role"] == "assistant" and not last.get("tool_calls")
    return "done" if finished else "limit"
