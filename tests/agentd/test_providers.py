"""Model providers: the real OpenAI and Anthropic SDK clients against loopback servers
that speak each wire format, the retry policy, settings, and the script provider."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agentd.errors import AgentdError
from agentd.home import Home
from agentd.providers import connections, make_model, settings
from agentd.providers.retry import RetryPolicy
from agentd.providers.settings import KEYLESS
from improver.base.protocol import (
    Budget,
    Completion,
    EpisodeLimits,
    Model,
    ModelMisconfigured,
    ProviderError,
    TokenUsage,
)
from tests.fakeservers import ModelServer, Reply

KEY = "sk-test-key-4242"
PREFIX = {"openai": "OPENAI", "anthropic": "ANTHROPIC"}
ATTEMPTS = 3
TIMEOUT = 0.5  # seconds one try may take; the slow replies below take far longer

PAY_TOOL = {
    "type": "function",
    "function": {
        "name": "pay",
        "description": "Pays an invoice.",
        "parameters": {"type": "object", "properties": {"invoice": {"type": "integer"}}, "required": ["invoice"]},
    },
}
CHAT = [{"role": "system", "content": "You pay invoices."}, {"role": "user", "content": "Pay invoice 23."}]


def write_config(home: Home, text: str) -> None:
    home.root.mkdir(parents=True, exist_ok=True)
    home.config_path.write_text(text)


@pytest.fixture
def fast_home(home: Home, monkeypatch: pytest.MonkeyPatch) -> Home:
    """A home whose retry policy waits milliseconds, with no provider variables set."""
    for var in ("OPENAI_BASE_URL", "ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN"):
        monkeypatch.delenv(var, raising=False)
    write_config(home, f"[providers]\nattempts = {ATTEMPTS}\nbackoff = 0.01\nbackoff_cap = 0.05\ntimeout = {TIMEOUT}\n")
    return home


@pytest.fixture(params=["openai", "anthropic"])
def server(request: pytest.FixtureRequest, fast_home: Home, monkeypatch: pytest.MonkeyPatch) -> Iterator[ModelServer]:
    """A loopback server in one wire format, its base URL and a key in the environment."""
    with ModelServer(request.param) as s:
        monkeypatch.setenv(f"{PREFIX[s.wire]}_BASE_URL", s.base_url)
        monkeypatch.setenv(f"{PREFIX[s.wire]}_API_KEY", KEY)
        yield s


def model_for(server: ModelServer, home: Home) -> Model:
    return make_model(f"{server.wire}:test-model", home)


def ask(model: Model, messages: list[dict[str, Any]] = CHAT, tools: list[dict[str, Any]] | None = None) -> Completion:
    return asyncio.run(model.complete(messages, [PAY_TOOL] if tools is None else tools, None))


def sent_key(server: ModelServer) -> str:
    headers = server.requests[-1].headers
    return headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")


# Answers through each real SDK client


def test_a_text_answer_comes_back_in_chat_format_with_its_tokens(server: ModelServer, fast_home: Home) -> None:
    server.queue(server.text("Paid.", tokens_in=31, tokens_out=4))
    completion = ask(model_for(server, fast_home))
    assert completion.message == {"role": "assistant", "content": "Paid."}
    assert completion.usage == TokenUsage(31, 4)
    assert completion.model == "test-model"
    assert sent_key(server) == KEY
    assert server.requests[-1].body["model"] == "test-model"


def test_a_tool_call_answer_comes_back_with_its_arguments(server: ModelServer, fast_home: Home) -> None:
    server.queue(server.tool_calls(("pay", {"invoice": 23}), text="Paying it.", tokens_in=40, tokens_out=12))
    completion = ask(model_for(server, fast_home))
    (call,) = completion.message["tool_calls"]
    assert completion.message["content"] == "Paying it."
    assert call["type"] == "function" and call["id"]
    assert call["function"]["name"] == "pay"
    assert json.loads(call["function"]["arguments"]) == {"invoice": 23}
    assert completion.usage == TokenUsage(40, 12)


def test_the_tools_offered_reach_the_server_in_its_own_format(server: ModelServer, fast_home: Home) -> None:
    ask(model_for(server, fast_home))
    (tool,) = server.requests[-1].body["tools"]
    if server.wire == "openai":
        assert tool == PAY_TOOL
    else:
        assert tool == {
            "name": "pay",
            "description": "Pays an invoice.",
            "input_schema": PAY_TOOL["function"]["parameters"],
        }


def test_no_tools_means_the_field_is_left_out(server: ModelServer, fast_home: Home) -> None:
    ask(model_for(server, fast_home), tools=[])
    assert "tools" not in server.requests[-1].body


def test_openai_messages_go_out_as_they_are(fast_home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    with ModelServer("openai") as s:
        monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", KEY)
        asyncio.run(make_model("openai:m", fast_home).complete(CONVERSATION, [PAY_TOOL], 300))
    body = s.requests[-1].body
    assert body["messages"] == CONVERSATION
    # A custom base URL gets the parameter compatible servers understand.
    assert body["max_tokens"] == 300


CONVERSATION: list[dict[str, Any]] = [
    {"role": "system", "content": "You pay invoices."},
    {"role": "user", "content": "Pay invoices 23 and 24."},
    {
        "role": "assistant",
        "content": "Paying both.",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "pay", "arguments": '{"invoice": 23}'}},
            {"id": "c2", "type": "function", "function": {"name": "pay", "arguments": '{"invoice": 24}'}},
        ],
    },
    {"role": "tool", "tool_call_id": "c1", "content": "paid 23"},
    {"role": "tool", "tool_call_id": "c2", "content": "paid 24"},
    {"role": "user", "content": [{"type": "text", "text": "Thanks."}]},
]


def test_anthropic_gets_the_conversation_as_alternating_turns_of_blocks(
    fast_home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ModelServer("anthropic") as s:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", s.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        asyncio.run(make_model("anthropic:m", fast_home).complete(CONVERSATION, [PAY_TOOL], 300))
    body = s.requests[-1].body
    assert s.requests[-1].headers["anthropic-version"] == "2023-06-01"
    assert body["system"] == "You pay invoices."
    assert body["max_tokens"] == 300
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "Pay invoices 23 and 24."}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "Paying both."},
                {"type": "tool_use", "id": "c1", "name": "pay", "input": {"invoice": 23}},
                {"type": "tool_use", "id": "c2", "name": "pay", "input": {"invoice": 24}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "c1", "content": "paid 23"},
                {"type": "tool_result", "tool_use_id": "c2", "content": "paid 24"},
                {"type": "text", "text": "Thanks."},
            ],
        },
    ]


def test_anthropic_counts_cached_input_as_input(fast_home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    with ModelServer("anthropic") as s:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", s.base_url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
        body = {
            "id": "msg_x",
            "type": "message",
            "role": "assistant",
            "content": [{"type": "text", "text": "hi"}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {
                "input_tokens": 5,
                "cache_read_input_tokens": 100,
                "cache_creation_input_tokens": 20,
                "output_tokens": 3,
            },
        }
        s.queue(Reply(body=body))
        completion = ask(make_model("anthropic:m", fast_home))
    assert completion.usage == TokenUsage(125, 3)


def test_anthropic_refuses_a_part_it_cannot_carry_rather_than_drop_it(
    fast_home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    image = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:..."}}]}]
    with pytest.raises(ProviderError, match="anthropic:m: cannot send a message part of type 'image_url'"):
        ask(make_model("anthropic:m", fast_home), image)


def test_one_model_serves_several_event_loops(server: ModelServer, fast_home: Home) -> None:
    model = model_for(server, fast_home)
    assert ask(model).message["content"] == "ok"
    assert ask(model).message["content"] == "ok"
    assert len(server.requests) == 2


# Keep-alive connections


def test_calls_on_one_loop_reuse_one_connection_closed_with_the_loop(server: ModelServer, fast_home: Home) -> None:
    first, second = model_for(server, fast_home), make_model(f"{server.wire}:other-model", fast_home)

    async def turns() -> None:
        for model in (first, first, second):
            await model.complete(CHAT, [PAY_TOOL], None)

    asyncio.run(turns())
    assert [r.body["model"] for r in server.requests] == ["test-model", "test-model", "other-model"]
    assert len({r.connection for r in server.requests}) == 1
    assert server.connections_made == 1
    assert server.wait_for_no_connections()  # asyncio.run closed it as the loop ended


def test_calls_at_once_take_a_connection_each_and_give_it_back(server: ModelServer, fast_home: Home) -> None:
    server.delay = 0.05  # long enough that the eight calls of a round overlap
    model = model_for(server, fast_home)

    async def rounds() -> None:
        for _ in range(2):
            await asyncio.gather(*(model.complete(CHAT, [], None) for _ in range(8)))

    asyncio.run(rounds())
    assert len(server.requests) == 16
    assert server.connections_made == 8  # the second round found all eight idle
    assert server.wait_for_no_connections()


def test_idle_connections_beyond_the_limit_are_closed(
    server: ModelServer, fast_home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(connections, "MAX_IDLE", 2)
    server.delay = 0.05
    model = model_for(server, fast_home)

    async def rounds() -> None:
        for _ in range(2):
            await asyncio.gather(*(model.complete(CHAT, [], None) for _ in range(4)))

    asyncio.run(rounds())
    # Two of the first round's four were closed when given back: the second reused two
    # and opened two.
    assert server.connections_made == 6
    assert server.wait_for_no_connections()


def test_a_kept_alive_connection_the_server_drops_is_retried_on_a_new_one(server: ModelServer, fast_home: Home) -> None:
    model = model_for(server, fast_home)

    async def turns() -> list[Completion]:
        answered = await model.complete(CHAT, [], None)
        server.queue(Reply(drop=True), server.text("Paid on a new connection."))
        return [answered, await model.complete(CHAT, [], None)]

    first, second = asyncio.run(turns())
    assert (first.message["content"], second.message["content"]) == ("ok", "Paid on a new connection.")
    kept, dropped, retried = (r.connection for r in server.requests)
    assert dropped == kept and retried != kept
    assert server.connections_made == 2


# Retries

NOT_UTF8 = b'{"id": "caf\xe9"}'  # Latin-1 bytes where JSON must be UTF-8


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(lambda s: s.error(429), id="429"),
        pytest.param(lambda s: s.error(500), id="500"),
        pytest.param(lambda s: s.error(503, "overloaded"), id="503"),
        pytest.param(lambda s: Reply(drop=True), id="dropped-connection"),
        pytest.param(lambda s: Reply(delay=30 * TIMEOUT), id="time-out"),
        pytest.param(lambda s: Reply(body=b'{"choices": [{"mess'), id="cut-short"),
        pytest.param(
            lambda s: Reply(body=b"<html>bad gateway</html>", headers={"Content-Type": "text/html"}), id="html"
        ),
        pytest.param(lambda s: Reply(body={"object": "chat.completion"}), id="fields-missing"),
        pytest.param(lambda s: Reply(body=NOT_UTF8), id="not-utf-8"),
    ],
)
def test_a_transient_fault_is_retried_and_the_answer_still_comes(
    server: ModelServer, fast_home: Home, fault: Any
) -> None:
    server.queue(fault(server), server.text("Paid after all.", tokens_in=9, tokens_out=3))
    completion = ask(model_for(server, fast_home))
    assert completion.message["content"] == "Paid after all."
    assert completion.usage == TokenUsage(9, 3)
    assert len(server.requests) == 2


def test_a_fault_through_every_attempt_is_a_provider_error(server: ModelServer, fast_home: Home) -> None:
    server.answer_with(lambda request: server.error(503, "the model is overloaded"))
    with pytest.raises(ProviderError) as caught:
        ask(model_for(server, fast_home))
    message = str(caught.value)
    assert message.startswith(f"{server.wire}:test-model: HTTP 503 Service Unavailable: the model is overloaded")
    assert f"gave up after {ATTEMPTS} attempts" in message
    assert "\n" not in message
    assert len(server.requests) == ATTEMPTS


def test_a_body_that_is_never_text_is_a_provider_error(server: ModelServer, fast_home: Home) -> None:
    server.answer_with(lambda request: Reply(body=NOT_UTF8))
    with pytest.raises(ProviderError) as caught:
        ask(model_for(server, fast_home))
    assert str(caught.value) == (
        f"{server.wire}:test-model: malformed body: not valid UTF-8 (invalid continuation byte) (gave up after {ATTEMPTS} attempts)"
    )
    assert len(server.requests) == ATTEMPTS


def test_time_outs_through_every_attempt_are_a_provider_error(server: ModelServer, fast_home: Home) -> None:
    server.answer_with(lambda request: Reply(delay=30 * TIMEOUT))
    with pytest.raises(ProviderError, match=r"the request timed out .gave up after 3 attempts"):
        ask(model_for(server, fast_home))
    assert len(server.requests) == ATTEMPTS


def test_a_refused_key_fails_at_once_naming_the_variable(server: ModelServer, fast_home: Home) -> None:
    server.queue(server.error(401, "invalid x-api-key"))
    with pytest.raises(ProviderError) as caught:
        ask(model_for(server, fast_home))
    assert "HTTP 401 Unauthorized: invalid x-api-key" in str(caught.value)
    assert f"{PREFIX[server.wire]}_API_KEY" in str(caught.value)
    assert len(server.requests) == 1


def test_a_body_that_is_not_json_says_what_it_was(server: ModelServer, fast_home: Home) -> None:
    server.answer_with(lambda request: Reply(body=b"<html>bad gateway</html>", headers={"Content-Type": "text/html"}))
    with pytest.raises(ProviderError) as caught:
        ask(model_for(server, fast_home))
    assert (
        str(caught.value)
        == f"{server.wire}:test-model: malformed body: not JSON (text/html) (gave up after {ATTEMPTS} attempts)"
    )


def test_the_servers_retry_after_sets_the_wait(
    server: ModelServer, fast_home: Home, caplog: pytest.LogCaptureFixture
) -> None:
    # The policy's own back-off here is at most 0.01 s; the hint asks for 0.04 s.
    server.queue(server.error(429, headers={"Retry-After": "0.04"}))
    with caplog.at_level("WARNING", logger="agentd.providers"):
        assert ask(model_for(server, fast_home)).message["content"] == "ok"
    assert "HTTP 429 Too Many Requests; trying again in 0.04s (attempt 2 of 3)" in caplog.text


def test_what_orjson_refuses_still_travels(fast_home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    # A tool's output read with surrogateescape holds lone surrogates; some servers
    # send one escaped, half an emoji. The standard library's json carries both.
    answer = b'{"choices": [{"message": {"role": "assistant", "content": "half \\ud83d"}}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}'
    with ModelServer("openai") as s:
        monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
        s.queue(Reply(body=answer))
        completion = ask(make_model("openai:m", fast_home), [{"role": "user", "content": "caf\udce9"}])
    assert completion.message["content"] == "half \ud83d"
    assert s.requests[-1].body["messages"] == [{"role": "user", "content": "caf\udce9"}]


def test_a_request_that_cannot_be_json_fails_at_once(server: ModelServer, fast_home: Home) -> None:
    with pytest.raises(
        ProviderError, match=f"^{server.wire}:test-model: cannot send the request: it does not encode as JSON"
    ):
        ask(
            model_for(server, fast_home),
            tools=[{"type": "function", "function": {"name": "pay", "parameters": {"x": object()}}}],
        )
    assert server.requests == []


def test_a_bad_request_is_not_retried(server: ModelServer, fast_home: Home) -> None:
    server.queue(server.error(404, "no model named test-model"))
    with pytest.raises(ProviderError, match=r"HTTP 404 Not Found: no model named test-model$"):
        ask(model_for(server, fast_home))
    assert len(server.requests) == 1


def test_back_off_doubles_within_its_cap_and_heeds_retry_after() -> None:
    policy = RetryPolicy(attempts=6, backoff=0.5, backoff_cap=3.0)
    for attempt, full in [(1, 0.5), (2, 1.0), (3, 2.0), (4, 3.0), (5, 3.0)]:
        for _ in range(50):
            assert full / 2 <= policy.delay(attempt) <= full
    assert policy.delay(1, retry_after=2.5) == 2.5
    assert policy.delay(1, retry_after=60) == 3.0


# Settings


def test_an_unknown_provider_names_the_ones_there_are(fast_home: Home) -> None:
    with pytest.raises(
        AgentdError,
        match="unknown provider 'gemini' in 'gemini:pro'; the providers are openai, anthropic, local, script",
    ):
        make_model("gemini:pro", fast_home)


@pytest.mark.parametrize("spec", ["gpt-4o", "openai:", "openai:  "])
def test_a_malformed_spec_says_how_to_name_a_model(fast_home: Home, spec: str) -> None:
    with pytest.raises(
        AgentdError,
        match=re.escape("name one as openai:MODEL, anthropic:MODEL, local:NAME, local:PATH.gguf or script:PATH"),
    ):
        make_model(spec, fast_home)


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
def test_a_missing_key_names_the_variable_and_the_setting(fast_home: Home, provider: str) -> None:
    with pytest.raises(AgentdError) as caught:
        make_model(f"{provider}:m", fast_home)
    message = str(caught.value)
    assert f"{provider}:m needs an API key: set {PREFIX[provider]}_API_KEY" in message
    assert f"api_key under [{provider}] in {fast_home.config_path}" in message


def test_config_toml_gives_the_endpoint_and_key_and_the_environment_wins(
    fast_home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ModelServer("openai") as s:
        write_config(fast_home, f'[openai]\nbase_url = "{s.base_url}"\napi_key = "from-config-file"\n')
        ask(make_model("openai:m", Home(fast_home.root)))
        assert sent_key(s) == "from-config-file"
        monkeypatch.setenv("OPENAI_API_KEY", "from-environment")
        ask(make_model("openai:m", Home(fast_home.root)))
        assert sent_key(s) == "from-environment"


def test_a_server_at_a_base_url_may_go_without_a_key(fast_home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    with ModelServer("openai") as s:
        monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
        model = make_model("openai:local", fast_home)
        assert ask(model).message["content"] == "ok"
        assert sent_key(s) == KEYLESS
        assert f"`{KEYLESS}`" in (settings.__doc__ or "")  # the docs name what is sent
        # One that does want a key says which variable to set.
        s.queue(s.error(401))
        with pytest.raises(
            ProviderError, match=f"HTTP 401 Unauthorized; the server at {s.base_url} wants a key: set OPENAI_API_KEY"
        ):
            ask(model)


@pytest.mark.parametrize(
    ("provider", "url", "complaint"),
    [
        ("openai", "http://[::1", "OPENAI_BASE_URL is not a valid URL (Invalid IPv6 URL): 'http://[::1'"),
        ("openai", "http://127.0.0.1:80a/v1", "OPENAI_BASE_URL is not a valid URL (Port could not be cast"),
        ("openai", "localhost:8000", "OPENAI_BASE_URL must start with http:// or https://, not 'localhost:8000'"),
        ("anthropic", "127.0.0.1:8000", "ANTHROPIC_BASE_URL must start with http:// or https://, not '127.0.0.1:8000'"),
        ("anthropic", "https://:8443", "ANTHROPIC_BASE_URL names no host: 'https://:8443'"),
    ],
)
def test_a_bad_base_url_is_refused_naming_the_variable(
    fast_home: Home, monkeypatch: pytest.MonkeyPatch, provider: str, url: str, complaint: str
) -> None:
    monkeypatch.setenv(f"{PREFIX[provider]}_BASE_URL", url)
    with pytest.raises(AgentdError) as caught:
        make_model(f"{provider}:m", fast_home)
    assert str(caught.value).startswith(complaint)
    assert str(caught.value).endswith("; give one like http://127.0.0.1:8000")


@pytest.mark.parametrize(("key", "shown"), [("sk-abc\n", "'\\n'"), ("sk-abc def", "' '"), ("sk-\u2013abc", "'\u2013'")])
def test_a_key_that_cannot_go_in_a_header_is_refused_naming_the_variable(
    fast_home: Home, monkeypatch: pytest.MonkeyPatch, key: str, shown: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with pytest.raises(AgentdError) as caught:
        make_model("openai:m", fast_home)
    assert str(caught.value) == f"OPENAI_API_KEY holds {shown}, which an API key never does; set it to the key alone"


def test_a_bad_base_url_in_config_toml_names_the_setting(home: Home) -> None:
    write_config(home, '[anthropic]\nbase_url = "ftp://models.example"\n')
    with pytest.raises(AgentdError) as caught:
        make_model("anthropic:m", home)
    assert str(caught.value).startswith(
        f"base_url under [anthropic] in {home.config_path} must start with http:// or https://, not 'ftp://models.example'"
    )


@pytest.mark.parametrize(
    ("setting", "complaint"),
    [
        ("attempts = 0", "[providers] attempts must be a whole number of at least 1, not 0"),
        ("timeout = 'soon'", "[providers] timeout must be a number of seconds above 0, not 'soon'"),
        ("backof = 1", "[providers] has no setting 'backof'; the settings are attempts, backoff, backoff_cap, timeout"),
    ],
)
def test_a_bad_retry_setting_names_the_file_and_setting(home: Home, setting: str, complaint: str) -> None:
    write_config(home, f"[providers]\n{setting}\n[openai]\napi_key = 'k'\n")
    with pytest.raises(AgentdError) as caught:
        make_model("openai:m", home)
    assert str(caught.value) == f"{home.config_path}: {complaint}"


# The script provider

RULES = """\
[[rule]]
name = "heed the lesson"
system_contains = "Never pay"
last_contains = "invoice"
text = "I will not pay it without asking."

[[rule]]
name = "read first"
turn = 1
tools_offered = "read_invoice"
[[rule.calls]]
name = "read_invoice"
arguments = { number = 23 }

[[rule]]
name = "pay what was read"
last_contains = ["acme", "5 usd"]
last_not_contains = "disputed"
text = "Paying now."
[[rule.calls]]
name = "pay"
arguments = { to = "acme-ltd", amount = "5", invoice = "23" }
[[rule.calls]]
name = "note"
arguments = { text = "paid" }

[[rule]]
name = "flaky"
last_contains = "flaky"
error = "provider"

[[rule]]
name = "fallback"
system_not_contains = "strict"
text = "Done."
"""

READ_TOOL = {"type": "function", "function": {"name": "read_invoice", "parameters": {"type": "object"}}}


def script_model(tmp_path: Path, home: Home, rules: str = RULES) -> Model:
    (tmp_path / "models").mkdir(exist_ok=True)
    (tmp_path / "models" / "agent.toml").write_text(rules)
    return make_model("script:models/agent.toml", home, base_dir=tmp_path)


def chat(system: str, *turns: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"role": "system", "content": system}, *turns]


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


ASSISTANT = {"role": "assistant", "content": "…"}


def test_the_first_matching_rule_answers(tmp_path: Path, home: Home) -> None:
    model = script_model(tmp_path, home)
    read = ask(model, chat("Pay invoices.", user("Pay invoice 23.")), [READ_TOOL])
    assert read.message["tool_calls"] == [
        {"id": "call_1_1", "type": "function", "function": {"name": "read_invoice", "arguments": '{"number": 23}'}}
    ]
    assert read.model == "script:models/agent.toml"
    # Matching ignores case; the lesson in the system prompt wins over the later rules.
    heeded = ask(
        model, chat("Pay invoices.\n\nNEVER PAY a payee an invoice names.", user("Pay invoice 23.")), [READ_TOOL]
    )
    assert heeded.message == {"role": "assistant", "content": "I will not pay it without asking."}


def test_turn_and_tools_offered_decide_too(tmp_path: Path, home: Home) -> None:
    model = script_model(tmp_path, home)
    # Without read_invoice offered, rule 2 does not hold: the fallback answers.
    assert ask(model, chat("Pay.", user("Pay invoice 23.")), []).message["content"] == "Done."
    # On turn 2 rule 2 does not hold either.
    assert (
        ask(model, chat("Pay.", user("Pay invoice 23."), ASSISTANT, user("go on")), [READ_TOOL]).message["content"]
        == "Done."
    )


def test_the_last_user_or_tool_message_is_matched_and_calls_get_fixed_ids(tmp_path: Path, home: Home) -> None:
    model = script_model(tmp_path, home)
    tool = {"role": "tool", "tool_call_id": "call_1_1", "content": "Invoice 23: Acme, 5 USD, to acme-ltd."}
    paying = ask(model, chat("Pay.", user("Pay invoice 23."), ASSISTANT, tool), [READ_TOOL])
    assert paying.message["content"] == "Paying now."
    assert [(c["id"], c["function"]["name"]) for c in paying.message["tool_calls"]] == [
        ("call_2_1", "pay"),
        ("call_2_2", "note"),
    ]
    assert json.loads(paying.message["tool_calls"][0]["function"]["arguments"]) == {
        "to": "acme-ltd",
        "amount": "5",
        "invoice": "23",
    }
    disputed = {**tool, "content": "Invoice 23: Acme, 5 USD, disputed."}
    assert ask(model, chat("Pay.", user("Pay invoice 23."), ASSISTANT, disputed)).message["content"] == "Done."


def test_scripted_tokens_are_whitespace_words(tmp_path: Path, home: Home) -> None:
    model = script_model(tmp_path, home)
    messages = chat("Pay invoices.", user("Pay invoice 23."))  # 2 + 3 words
    assert ask(model, messages, [READ_TOOL]).usage == TokenUsage(5, 2)  # out: '{"number": 23}' is 2 words
    assert ask(model, chat("Pay invoices.", user("All good.")), []).usage == TokenUsage(4, 1)


@pytest.mark.parametrize(
    "max_tokens, usage",
    [
        (None, TokenUsage(5, 2)),
        (7, TokenUsage(5, 2)),
        (6, TokenUsage(5, 1)),
        (3, TokenUsage(3, 0)),
        (0, TokenUsage(0, 0)),
    ],
)
def test_a_scripted_answer_reports_no_more_than_its_max_tokens(
    tmp_path: Path, home: Home, max_tokens: int | None, usage: TokenUsage
) -> None:
    messages = chat("Pay invoices.", user("Pay invoice 23."))  # 5 words in, 2 out
    completion = asyncio.run(script_model(tmp_path, home).complete(messages, [READ_TOOL], max_tokens))
    assert completion.usage == usage and completion.message["tool_calls"][0]["function"]["name"] == "read_invoice"


def test_a_scripted_provider_error_is_a_provider_error(tmp_path: Path, home: Home) -> None:
    with pytest.raises(ProviderError, match=r"script:models/agent.toml: rule 4 \('flaky'\) scripts a provider error"):
        ask(script_model(tmp_path, home), chat("Pay.", user("this one is flaky")))


def test_no_matching_rule_is_the_rules_authors_mistake_not_a_providers(tmp_path: Path, home: Home) -> None:
    model = script_model(tmp_path, home)
    with pytest.raises(ModelMisconfigured) as caught:
        ask(model, chat("Be strict.", user("Hello")), [])
    assert str(caught.value) == (
        f"{tmp_path}/models/agent.toml: no rule matches turn 1 (last message: 'Hello'); "
        "add one, or end the file with a rule without conditions"
    )
    assert not isinstance(caught.value, ProviderError)  # a provider's fault would be retried


def test_an_absolute_script_path_ignores_the_base_dir(tmp_path: Path, home: Home) -> None:
    script_model(tmp_path, home)
    model = make_model(f"script:{tmp_path / 'models' / 'agent.toml'}", home, base_dir=tmp_path / "elsewhere")
    assert ask(model, chat("Pay.", user("x")), []).message["content"] == "Done."


def test_a_missing_rules_file_is_named(tmp_path: Path, home: Home) -> None:
    with pytest.raises(AgentdError, match=f"script:nope.toml: no rules file at {tmp_path}/nope.toml"):
        make_model("script:nope.toml", home, base_dir=tmp_path)


def test_a_rules_file_that_does_not_parse_names_file_and_line(tmp_path: Path, home: Home) -> None:
    broken = '[[rule]]\ntext = "ok"\n\n[[rule]]\ntext = "unterminated\n'
    with pytest.raises(AgentdError, match=f"{tmp_path}/models/agent.toml: line 5: "):
        script_model(tmp_path, home, broken)


@pytest.mark.parametrize(
    ("second_rule", "complaint"),
    [
        ('name = "pay"\ntxt = "typo"', "rule 2 ('pay'): unknown key 'txt'; a rule's keys are name,"),
        ('turn = 0\ntext = "x"', "rule 2: turn must be a number from 1 up, or a list of them"),
        ('last_contains = 3\ntext = "x"', "rule 2: last_contains must be a non-empty string or a list of them"),
        (
            'name = "mute"\nturn = 2',
            "rule 2 ('mute'): gives no reply; add text, [[rule.calls]] or error = \"provider\"",
        ),
        ('error = "timeout"', "rule 2: error must be \"provider\", not 'timeout'"),
        ('error = "provider"\ntext = "x"', "rule 2: a rule with error gives no text or calls"),
        ('delay = -1\ntext = "x"', "rule 2: delay must be a number of seconds, 0 or more, not -1"),
        ('delay = "long"\ntext = "x"', "rule 2: delay must be a number of seconds, 0 or more, not 'long'"),
        ("[[rule.calls]]\narguments = { a = 1 }", "rule 2: call 1 needs a name (the tool to call)"),
        (
            '[[rule.calls]]\nname = "pay"\narguments = { when = 2024-01-01 }',
            "rule 2: call 1: arguments hold a date or time",
        ),
    ],
)
def test_an_invalid_rule_names_file_rule_and_line(tmp_path: Path, home: Home, second_rule: str, complaint: str) -> None:
    rules = f'# two rules\n[[rule]]\ntext = "fine"\n\n[[rule]]\n{second_rule}\n'
    with pytest.raises(AgentdError) as caught:
        script_model(tmp_path, home, rules)
    assert str(caught.value).startswith(f"{tmp_path}/models/agent.toml:5: {complaint}")


def test_a_rules_file_without_rules_is_refused(tmp_path: Path, home: Home) -> None:
    with pytest.raises(AgentdError, match=r"agent.toml: no rules; add at least one"):
        script_model(tmp_path, home, "# nothing yet\n")
    with pytest.raises(AgentdError, match=r"agent.toml: unknown key 'rules'; a rules file holds only"):
        script_model(tmp_path, home, '[[rules]]\ntext = "x"\n')


# A call's deadline cuts off every provider


DEADLINE = EpisodeLimits(call_seconds=0.5)
PAST_IT = "did not answer within 0.5 seconds \\(the call's limit, call_seconds\\)"


def test_a_call_trickling_past_its_deadline_is_cut_off_and_not_tried_again(
    server: ModelServer, fast_home: Home
) -> None:
    # A byte every 0.1 s: no read waits longer than the try's time-out, only the deadline ends it.
    server.queue(replace(server.text("Paid."), trickle=0.1))
    answer = model_for(server, fast_home).complete(CHAT, [PAY_TOOL], None)
    with pytest.raises(ProviderError, match=PAST_IT):
        asyncio.run(Budget(DEADLINE).wait_for_model(answer))
    assert len(server.requests) == 1
    assert server.wait_for_no_connections()


def test_a_scripted_model_slower_than_its_deadline_is_cut_off(tmp_path: Path, home: Home) -> None:
    slow = script_model(tmp_path, home, '[[rule]]\ndelay = 600\ntext = "Done."\n')
    with pytest.raises(ProviderError, match=PAST_IT):
        asyncio.run(Budget(DEADLINE).wait_for_model(slow.complete(CHAT, [], None)))
    quick = script_model(tmp_path, home, '[[rule]]\ndelay = 0.01\ntext = "Done."\n')
    assert ask(quick, CHAT, []).message["content"] == "Done."
