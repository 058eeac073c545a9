"""`openai:MODEL`: an OpenAI-compatible Chat Completions endpoint, with tool calls.

The same wire format is served by OpenAI and by vLLM, Ollama, llama.cpp and others, so
`[openai] base_url` (or OPENAI_BASE_URL) points it at any of them; the key comes from
OPENAI_API_KEY or `[openai] api_key` (see `agentd.providers.settings`). Transcripts are
already in this format, so messages and tools go out as they are.

The answer's length limit is sent as `max_completion_tokens` to OpenAI itself (its
newer models refuse `max_tokens`) and as `max_tokens` to any other server, the name
the compatible servers have long understood.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit

import openai
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion, ChatCompletionMessage

from agentd.providers.chat import assistant, tool_call
from agentd.providers.retry import RetryPolicy, with_retries
from agentd.providers.sdk import PerLoop, failure, malformed
from agentd.providers.settings import Endpoint
from improver import Completion, Usage

OPENAI_HOST = "api.openai.com"


class OpenAIModel:
    def __init__(self, name: str, model: str, endpoint: Endpoint, policy: RetryPolicy) -> None:
        self.name = name
        self.model = model
        self.endpoint = endpoint
        self.policy = policy
        self._clients = PerLoop(self._client)
        official = endpoint.base_url is None or urlsplit(endpoint.base_url).hostname == OPENAI_HOST
        self._limit_param = "max_completion_tokens" if official else "max_tokens"

    def _client(self) -> openai.AsyncOpenAI:
        # max_retries=0: our policy (agentd.providers.retry) is the only one.
        return openai.AsyncOpenAI(
            api_key=self.endpoint.api_key,
            base_url=self.endpoint.base_url,
            max_retries=0,
            timeout=self.policy.timeout,
        )

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        params: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            # OpenAI refuses an empty list; no tools means leaving the field out.
            params["tools"] = tools
        if max_tokens is not None:
            params[self._limit_param] = max_tokens
        return await with_retries(self.name, self.policy, lambda: self._once(params))

    async def _once(self, params: dict[str, Any]) -> Completion:
        try:
            result = await (await self._clients.get()).chat.completions.create(**params)
        except Exception as exc:
            mapped = failure(exc, openai, self.endpoint.key_hint)
            if mapped is None:
                raise
            raise mapped from exc
        return _completion(result, self.model)


def _completion(result: object, requested: str) -> Completion:
    """The answer in our terms; anything missing is a malformed body (the SDK, lenient,
    builds objects from whatever JSON came back)."""
    if not isinstance(result, ChatCompletion) or not isinstance(result.choices, list) or not result.choices:
        raise malformed("no choices")
    message = getattr(result.choices[0], "message", None)
    if not isinstance(message, ChatCompletionMessage):
        raise malformed("the choice has no message")
    usage = result.usage
    if not isinstance(usage, CompletionUsage) or not all(
        isinstance(n, int) for n in (usage.prompt_tokens, usage.completion_tokens)
    ):
        raise malformed("no token counts (usage)")
    content = message.content if isinstance(message.content, str) else None
    calls = [_call(c) for c in message.tool_calls or []]
    model = result.model if isinstance(result.model, str) and result.model else requested
    return Completion(assistant(content, calls), Usage(usage.prompt_tokens, usage.completion_tokens), model)


def _call(call: Any) -> dict[str, Any]:
    call_id = getattr(call, "id", None)
    function = getattr(call, "function", None)
    name = getattr(function, "name", None)
    arguments = getattr(function, "arguments", None)
    if isinstance(arguments, dict):
        # Some compatible servers send the arguments as an object, not as JSON text.
        arguments = json.dumps(arguments, ensure_ascii=False)
    if not (isinstance(call_id, str) and isinstance(name, str) and isinstance(arguments, str)):
        raise malformed("a tool call without an id, a name or arguments")
    return tool_call(call_id, name, arguments)
