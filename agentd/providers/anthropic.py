"""`anthropic:MODEL`: Anthropic's Messages API, with tool use.

Transcripts are in OpenAI's chat format, so each call translates: system messages become
the `system` text; a user message becomes text blocks; an assistant message its text and
`tool_use` blocks; tool messages `tool_result` blocks in the user turn that follows
(consecutive turns of one role are merged, as the API wants turns to alternate). The
answer comes back as an OpenAI-format assistant message with `tool_calls`. The key
comes from ANTHROPIC_API_KEY or `[anthropic] api_key` and goes out as `x-api-key`, the
endpoint from ANTHROPIC_BASE_URL or `[anthropic] base_url` (see
`agentd.providers.settings`); calls are POSTed to `BASE_URL/v1/messages`, naming the API
version they are written for (`anthropic-version`).

Only text travels: a message part of another kind (an image) fails the call rather than
being dropped unseen. The API requires a length limit: DEFAULT_MAX_TOKENS when the
caller gives none.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from agentd.providers.chat import assistant, text_of, tool_call
from agentd.providers.client import encode, is_count, malformed, post_json, token_counts
from agentd.providers.retry import RetryPolicy, with_retries
from agentd.providers.settings import Endpoint
from improver import Completion, RequestRefused, TokenUsage

ANTHROPIC_URL = "https://api.anthropic.com"
API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 4096
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


class AnthropicModel:
    def __init__(self, name: str, model: str, endpoint: Endpoint, policy: RetryPolicy) -> None:
        self.name = name
        self.model = model
        self.endpoint = endpoint
        self.policy = policy
        self._url = httpx.URL(f"{(endpoint.base_url or ANTHROPIC_URL).rstrip('/')}/v1/messages")
        self._headers = {
            "x-api-key": endpoint.api_key,
            "anthropic-version": API_VERSION,
            "Content-Type": "application/json",
        }
        self._timeout = httpx.Timeout(policy.timeout)

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        try:
            system, turns = to_anthropic(messages)
        except ValueError as exc:  # messages with no counterpart: refused as they were shaped
            raise RequestRefused(f"{self.name}: {exc}") from None
        params: dict[str, Any] = {
            "model": self.model,
            "messages": turns,
            "max_tokens": max_tokens or DEFAULT_MAX_TOKENS,
        }
        if system:
            params["system"] = system
        if tools:
            params["tools"] = [_tool(t) for t in tools]
        request = encode(self.name, params)
        return await with_retries(self.name, self.policy, lambda: self._once(request))

    async def _once(self, request: bytes) -> Completion:
        body = await post_json(self._url, self._headers, request, self._timeout, self.endpoint.key_hint)
        return _completion(body, self.model)


def to_anthropic(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """OpenAI chat messages -> (system text, Anthropic turns); ValueError on what has no
    counterpart."""
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role in ("system", "developer"):
            system.append(text_of(m.get("content")))
        elif role == "user":
            _add(turns, "user", _text_blocks(m.get("content")))
        elif role == "tool":
            result = {
                "type": "tool_result",
                "tool_use_id": str(m.get("tool_call_id", "")),
                "content": text_of(m.get("content")),
            }
            _add(turns, "user", [result])
        elif role == "assistant":
            uses = [_tool_use(c) for c in m.get("tool_calls") or []]
            _add(turns, "assistant", _text_blocks(m.get("content")) + uses)
        else:
            raise ValueError(f"a message with role {role!r} has no counterpart in the Messages API")
    return "\n\n".join(s for s in system if s), turns


def _add(turns: list[dict[str, Any]], role: str, blocks: list[dict[str, Any]]) -> None:
    if not blocks:
        return  # the API refuses empty turns; an empty message says nothing anyway
    if turns and turns[-1]["role"] == role:
        turns[-1]["content"].extend(blocks)
    else:
        turns.append({"role": role, "content": blocks})


def _text_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, list):
        for part in content:
            kind = part.get("type") if isinstance(part, dict) else type(part).__name__
            if kind != "text":
                raise ValueError(f"cannot send a message part of type {kind!r}; only text is supported")
    text = text_of(content)
    return [{"type": "text", "text": text}] if text else []


def _tool_use(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    raw = function.get("arguments") or "{}"
    try:
        arguments = json.loads(raw) if isinstance(raw, str) else raw
    except json.JSONDecodeError:
        arguments = None
    if not isinstance(arguments, dict):
        # The API needs an object; arguments another model got wrong are kept as text.
        arguments = {"arguments": raw}
    return {
        "type": "tool_use",
        "id": str(call.get("id", "")),
        "name": str(function.get("name", "")),
        "input": arguments,
    }


def _tool(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function") or {}
    converted: dict[str, Any] = {
        "name": function.get("name"),
        "input_schema": function.get("parameters") or EMPTY_SCHEMA,
    }
    if function.get("description"):
        converted["description"] = function["description"]
    return converted


def _completion(body: Any, requested: str) -> Completion:
    """The answer in our terms; anything missing is a malformed body."""
    content = body.get("content") if isinstance(body, dict) else None
    if not isinstance(content, list):
        raise malformed("no content")
    usage = body.get("usage")
    tokens_in, tokens_out = token_counts(usage, "input_tokens", "output_tokens")
    texts: list[str] = []
    calls: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text":
            texts.append(str(block.get("text", "")))
        elif kind == "tool_use":
            calls.append(_call(block))
        # Other blocks (thinking, server tools) have no place in the chat format.
    # Cache reads and writes are input the model read too: they count against budgets.
    cached = sum(
        usage.get(k) for k in ("cache_creation_input_tokens", "cache_read_input_tokens") if is_count(usage.get(k))
    )
    model = body.get("model")
    text = "".join(texts) or None
    return Completion(
        assistant(text, calls),
        TokenUsage(tokens_in + cached, tokens_out),
        model if isinstance(model, str) and model else requested,
    )


def _call(block: dict[str, Any]) -> dict[str, Any]:
    call_id, name, arguments = (block.get(k) for k in ("id", "name", "input"))
    if not (isinstance(call_id, str) and isinstance(name, str) and isinstance(arguments, dict)):
        raise malformed("a tool_use block without an id, a name or an input object")
    return tool_call(call_id, name, json.dumps(arguments, ensure_ascii=False))
