"""Tool calls a model wrote as text: the reading small local models need.

A small model asked to call a tool often writes the right call as JSON in its answer
(bare, in a ```json fence, or between `<tool_call>` tags) instead of in the structured
field, so the server reports no tool call at all. `calls_in_text` reads such an answer
as tool calls when, and only when, every JSON part of it is a call of a tool that was
offered: `{"name": TOOL, "arguments": {...}}`, a list of them, or several written one
after another. Anything else (prose,
JSON of another shape, a tool nobody offered, arguments that are not an object) stays
text, as the model wrote it: a guess at what it meant would put words in its mouth.

Prose around fenced or tagged calls is kept as the message's text; a bare answer must be
the JSON alone.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

from agentd.providers.chat import tool_call

# A fenced block (```json ... ``` or ``` ... ```) or a <tool_call> ... </tool_call> part.
PART = re.compile(r"```(?:json)?[ \t]*\n?(.*?)```|<tool_call>(.*?)</tool_call>", re.DOTALL | re.IGNORECASE)


def calls_in_text(text: str, offered: Collection[str], first_id: int = 0) -> tuple[str | None, list[dict[str, Any]]]:
    """(the text left, the tool calls) read from `text`; `([text], [])` when it holds none
    that `calls_in_text` can vouch for. Call ids run from `call_text_{first_id}`."""
    parts = [m.group(1) if m.group(1) is not None else m.group(2) for m in PART.finditer(text)]
    if parts:
        calls = _calls(parts, offered)
        rest = PART.sub("", text).strip()
        return (text, []) if calls is None else (rest or None, _numbered(calls, first_id))
    calls = _calls([text], offered)
    return (text, []) if calls is None else (None, _numbered(calls, first_id))


def _calls(parts: list[str], offered: Collection[str]) -> list[tuple[str, dict[str, Any]]] | None:
    """Every part's calls, or None when any part is not a list of offered calls."""
    found: list[tuple[str, dict[str, Any]]] = []
    for part in parts:
        values = _json_values(part)
        items = [item for value in values or [] for item in (value if isinstance(value, list) else [value])]
        if not items:
            return None
        for item in items:
            call = _call(item, offered)
            if call is None:
                return None
            found.append(call)
    return found


def _json_values(text: str) -> list[Any] | None:
    """The JSON values `text` holds one after another (whitespace between), or None when
    anything else is in it."""
    decoder = json.JSONDecoder()
    values, at = [], 0
    while (at := _skip_space(text, at)) < len(text):
        try:
            value, at = decoder.raw_decode(text, at)
        except ValueError:
            return None
        values.append(value)
    return values


def _skip_space(text: str, at: int) -> int:
    while at < len(text) and text[at].isspace():
        at += 1
    return at


def _call(item: Any, offered: Collection[str]) -> tuple[str, dict[str, Any]] | None:
    if not isinstance(item, dict) or set(item) != {"name", "arguments"}:
        return None
    name, arguments = item["name"], item["arguments"]
    if not isinstance(name, str) or name not in offered or not isinstance(arguments, dict):
        return None
    return name, arguments


def _numbered(calls: list[tuple[str, dict[str, Any]]], first_id: int) -> list[dict[str, Any]]:
    return [
        tool_call(f"call_text_{first_id + i}", name, json.dumps(arguments, ensure_ascii=False))
        for i, (name, arguments) in enumerate(calls)
    ]
