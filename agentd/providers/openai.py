"""`openai:MODEL`: an OpenAI-compatible Chat Completions endpoint, with tool calls.

The same wire format is served by OpenAI and by vLLM, Ollama, llama.cpp and others, so
`[openai] base_url` (or OPENAI_BASE_URL) points it at any of them; the key comes from
OPENAI_API_KEY or `[openai] api_key` (see `agentd.providers.settings`) and goes out as
`Authorization: Bearer KEY`. Transcripts are already in this format, so messages and
tools go out as they are, POSTed to `BASE_URL/chat/completions`.

The answer's length limit is sent as `max_completion_tokens` to OpenAI itself (its
newer models refuse `max_tokens`) and as `max_tokens` to any other server, the name
the compatible servers have long understood.

With `text_tool_calls` (`[openai] text_tool_calls = true`; on for `local:` models) an
answer with no structured tool call whose text is one is read as one
(`agentd.providers.textcalls`).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import httpx

from agentd.providers.chat import assistant, tool_call, tool_names
from agentd.providers.client import encode, malformed, post_json, token_counts
from agentd.providers.retry import RetryPolicy, with_retries
from agentd.providers.settings import Endpoint
from agentd.providers.textcalls import calls_in_text
from improver import Completion, TokenUsage

OPENAI_URL = "https://api.openai.com/v1"
OPENAI_HOST = "api.openai.com"


class OpenAIModel:
    def __init__(
        self, name: str, model: str, endpoint: Endpoint, policy: RetryPolicy, *, text_tool_calls: bool = False
    ) -> None:
        self.name = name
        self.model = model
        self.endpoint = endpoint
        self.policy = policy
        self.text_tool_calls = text_tool_calls
        base = (endpoint.base_url or OPENAI_URL).rstrip("/")
        self._url = httpx.URL(f"{base}/chat/completions")
        self._headers = {"Authorization": f"Bearer {endpoint.api_key}", "Content-Type": "application/json"}
        self._timeout = httpx.Timeout(policy.timeout)
        self._limit_param = "max_completion_tokens" if urlsplit(base).hostname == OPENAI_HOST else "max_tokens"

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            # OpenAI refuses an empty list; no tools means leaving the field out.
            params["tools"] = tools
        if max_tokens is not None:
            params[self._limit_param] = max_tokens
        request = encode(self.name, params)
        completion = await with_retries(self.name, self.policy, lambda: self._once(request))
        if self.text_tool_calls and tools:
            return read_text_calls(completion, tool_names(tools), messages)
        return completion

    async def _once(self, request: bytes) -> Completion:
        body = await post_json(self._url, self._headers, request, self._timeout, self.endpoint.key_hint)
        return completion_of(body, self.model)


def read_text_calls(completion: Completion, offered: list[str], messages: list[dict[str, Any]]) -> Completion:
    """`completion` with the tool calls its text holds made structured, when it has none;
    ids follow the calls already in `messages`, so each stays unique in the transcript."""
    message = completion.message
    text = message.get("content")
    if message.get("tool_calls") or not isinstance(text, str):
        return completion
    earlier = sum(len(m.get("tool_calls") or []) for m in messages)
    rest, calls = calls_in_text(text, offered, earlier)
    if not calls:
        return completion
    return Completion(assistant(rest, calls), completion.usage, completion.model)


def completion_of(body: Any, requested: str) -> Completion:
    """The answer in our terms; anything missing is a malformed body."""
    choices = body.get("choices") if isinstance(body, dict) else None
    if not isinstance(choices, list) or not choices:
        raise malformed("no choices")
    message = choices[0].get("message") if isinstance(choices[0], dict) else None
    if not isinstance(message, dict):
        raise malformed("the choice has no message")
    counts = token_counts(body.get("usage"), "prompt_tokens", "completion_tokens")
    content = message.get("content")
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise malformed("tool_calls is not a list")
    calls = [_call(c) for c in raw_calls]
    model = body.get("model")
    text = content if isinstance(content, str) else None
    return Completion(
        assistant(text, calls), TokenUsage(*counts), model if isinstance(model, str) and model else requested
    )


def _call(call: Any) -> dict[str, Any]:
    function = call.get("function") if isinstance(call, dict) else None
    call_id = call.get("id") if isinstance(call, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    arguments = function.get("arguments") if isinstance(function, dict) else None
    if isinstance(arguments, dict):
        # Some compatible servers send the arguments as an object, not as JSON text.
        arguments = json.dumps(arguments, ensure_ascii=False)
    if not (isinstance(call_id, str) and isinstance(name, str) and isinstance(arguments, str)):
        raise malformed("a tool call without an id, a name or arguments")
    return tool_call(call_id, name, arguments)
