"""Reading the OpenAI chat format, the one transcripts and providers share."""

from __future__ import annotations

from typing import Any

# One reading of a message's text for every layer: harvest and export use it too.
from improver import text_of

__all__ = ["assistant", "text_of", "tool_call", "tool_names"]


def tool_names(tools: list[dict[str, Any]]) -> list[str]:
    """The names of the tools offered, in OpenAI's `{"type": "function", "function": {...}}`."""
    return [
        str(t["function"]["name"]) for t in tools if isinstance(t.get("function"), dict) and "name" in t["function"]
    ]


def tool_call(call_id: str, name: str, arguments: str) -> dict[str, Any]:
    """One entry of an assistant message's `tool_calls`; arguments are JSON text."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


def assistant(text: str | None, calls: list[dict[str, Any]]) -> dict[str, Any]:
    """An assistant message: `tool_calls` only when there are some, as the format has it."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    return message
