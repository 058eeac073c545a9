"""Sessions recorded by another agent framework, taken in so agentd can improve them too.

A file holds one transcript in OpenAI chat format, `{"messages": [...], "tools": [...],
"metadata": {...}}` (the fine-tuning format, so `agentd improve export`'s own sft.jsonl
reads back), a bare list of messages, or JSON lines of such objects. Optional metadata:
`ended` (done|asked|limit|errored), `check` (passed|failed), `compacted`, `models`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentd.errors import AgentdError
from agentd.home import Home
from agentd.ledgers import open_ledger
from agentd.profiles import Profile, load_profile
from agentd.providers.chat import text_of
from agentd.sessions import SessionRecord, keep, new_id, now, person_messages, protect
from agentd.wallets import load_wallet
from improver.protocol import ENDINGS

ROLES = {"system", "user", "assistant", "tool"}


@dataclass
class Imported:
    records: list[SessionRecord]
    warnings: list[str] = field(default_factory=list)


def import_file(home: Home, path: Path, profile_name: str) -> Imported:
    """Reads every transcript in `path` first, so a bad one leaves nothing half-imported."""
    profile = load_profile(home, profile_name)
    signer = load_wallet(home, profile.wallet)
    documents = _documents(path)
    result = Imported([])
    for where, doc in documents:
        record, warnings = _record(profile, doc, where)
        result.records.append(protect(home, record))
        result.warnings += warnings
    ledger = open_ledger(home)
    for record in result.records:
        keep(home, record, signer, ledger)
    return result


def _documents(path: Path) -> list[tuple[str, Any]]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise AgentdError(f"cannot read {path}: {exc.strerror}") from None
    try:
        return [(str(path), json.loads(text))]
    except json.JSONDecodeError as whole:
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        if len(lines) < 2:
            raise AgentdError(f"{path}: line {whole.lineno}: not JSON ({whole.msg})") from None
    docs = []
    for n, line in lines:
        try:
            docs.append((f"{path}:{n}", json.loads(line)))
        except json.JSONDecodeError as exc:
            raise AgentdError(f"{path}: line {n}: not JSON ({exc.msg})") from None
    return docs


def _record(profile: Profile, doc: Any, where: str) -> tuple[SessionRecord, list[str]]:
    if isinstance(doc, list):
        doc = {"messages": doc}
    if not isinstance(doc, dict) or not isinstance(doc.get("messages"), list):
        raise AgentdError(f"{where}: expected {{\"messages\": [...]}} or a list of chat messages")
    messages = doc["messages"]
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in ROLES:
            raise AgentdError(f"{where}: message {i} has no role among {', '.join(sorted(ROLES))}")
    users = [m for m in messages if m["role"] == "user"]
    if not users:
        raise AgentdError(f"{where}: the transcript has no user message, so it holds no task")
    meta = doc.get("metadata") or {}
    tools, warnings = _tools(profile, doc.get("tools") or [], where)
    ended = meta.get("ended") or _ended(messages)
    if ended not in ENDINGS:
        raise AgentdError(f"{where}: metadata.ended must be one of {', '.join(ENDINGS)}")
    check = meta.get("check")
    if check not in (None, "passed", "failed"):
        raise AgentdError(f"{where}: metadata.check must be passed or failed")
    last = messages[-1]
    stamp = now()
    return (
        SessionRecord(
            id=new_id(),
            profile=profile.name,
            task=text_of(users[0].get("content")),
            source="import",
            started_at=stamp,
            ended_at=stamp,
            ended=ended,
            answer=text_of(last.get("content")) if ended == "done" else "",
            models=[str(m) for m in meta.get("models") or []],
            turns=sum(1 for m in messages if m["role"] == "assistant"),
            person_messages=person_messages(messages),
            compacted=bool(meta.get("compacted", False)),
            transcript=messages,
            tools=tools,
            check=check,
            confidential=profile.confidential,
        ),
        warnings,
    )


def _tools(profile: Profile, offered: list[Any], where: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Takes what each tool changes from the profile; a tool it lacks is taken to change something."""
    infos, unknown = [], []
    for t in offered:
        fn = t.get("function", t) if isinstance(t, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise AgentdError(f"{where}: each tool must be {{\"type\": \"function\", \"function\": {{\"name\": ...}}}}")
        spec = profile.tool(fn["name"])
        if spec:
            infos.append(spec.info())
            continue
        unknown.append(fn["name"])
        infos.append(
            {
                "name": fn["name"],
                "description": str(fn.get("description", "")),
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
