"""Transcripts in OpenAI's chat format: what is wrong with one, and a message's text.

A transcript is a list of messages `{"role": "system"|"user"|"assistant"|"tool",
"content": ...}` whose content is text, a list of parts (`{"type": "text", "text": ...}`
and parts of other types) or null. An assistant's `tool_calls` are each `{"id", "type":
"function", "function": {"name", "arguments"}}`, the arguments as JSON text; a tool
message answers one by its `tool_call_id`, with content.

Intake refuses a transcript that has a problem; harvest and export pass over a recorded
one, so a single bad session never stops the rest. agentd's providers read message text
with `text_of` too, so a transcript means the same to every layer.
"""

from __future__ import annotations

from typing import Any

ROLES = ("assistant", "system", "tool", "user")
CALL_SHAPE = '{"id": ..., "type": "function", "function": {"name": ..., "arguments": "<JSON text>"}}'


def text_of(content: Any) -> str:
    """A message's text: content is a string, a list of parts (only text parts count), or None."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def transcript_problem(messages: Any) -> str | None:
    """What is wrong with a transcript, naming the message by its index from 0; None when
    it is well formed."""
    if not isinstance(messages, list):
        return "the messages are not a list"
    for index, message in enumerate(messages):
        wrong = _message_problem(message)
        if wrong:
            return f"message {index} {wrong}"
    return None


def _message_problem(message: Any) -> str | None:
    if not isinstance(message, dict) or message.get("role") not in ROLES:
        return f"has no role among {', '.join(ROLES)}"
    content = message.get("content")
    if not _is_content(content):
        return 'has content that is neither text, a list of parts ({"type": ...}) nor null'
    if message["role"] == "tool":
        if not isinstance(message.get("tool_call_id"), str) or not message["tool_call_id"]:
            return "is a tool message without a tool_call_id (the id of the call it answers)"
        if content is None:
            return "is a tool message without content (what the tool answered)"
    if message["role"] == "assistant":
        return _calls_problem(message.get("tool_calls"))
    return None


def _is_content(content: Any) -> bool:
    if content is None or isinstance(content, str):
        return True
    return isinstance(content, list) and all(_is_part(p) for p in content)


def _is_part(part: Any) -> bool:
    if not isinstance(part, dict) or not isinstance(part.get("type"), str):
        return False
    return part["type"] != "text" or isinstance(part.get("text"), str)


def _calls_problem(calls: Any) -> str | None:
    if calls is None:
        return None
    if not isinstance(calls, list):
        return "has tool_calls that are not a list"
    for index, call in enumerate(calls):
        if not _is_call(call):
            return f"has tool call {index} that is not {CALL_SHAPE}"
    return None


def _is_call(call: Any) -> bool:
    if not isinstance(call, dict) or call.get("type") != "function":
        return False
    function = call.get("function")
    return (
        _named(call.get("id"))
        and isinstance(function, dict)
        and _named(function.get("name"))
        and isinstance(function.get("arguments"), str)
    )


def _named(value: Any) -> bool:
    return isinstance(value, str) and bool(value)
