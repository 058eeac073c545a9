"""A candidate cannot turn its failures into "errored" runs, which are left out of the
counts: a model request a command candidate shaped wrong is checked before anything is
sent, and a provider's refusal of a request as the candidate shaped it (HTTP 400, 413,
422), both fail its run, saying why, and are not retried. Only the infrastructure's
faults (a provider that fails through every retry, a rate limit, the sandbox) error a run."""

from __future__ import annotations

from pathlib import Path

import pytest

from improver.base.protocol import Case, Ending, Episode, ProviderError, RequestRefused
from improver.episodes.harness import RunResult
from tests.improver.candidatekit import program
from tests.improver.taskkit import FOLLOWS_THE_PROTOCOL, ScriptedModel, pays_right
from tests.improver.test_harness import run

# A candidate program that asks for one model answer with REQUEST's fields, then says done.
ASKS = """
request = {{'messages': [{{'role': 'user', 'content': case['task']}}], 'tools': case['tools'], **{request}}}
send('model', request)
reply = receive()
send('done', {{'answer': 'Paid.'}})
"""


def failed_for(result: RunResult, why: str) -> None:
    """Failed, broken, at reward 0, once, with the reason in the run and its failures."""
    assert (result.outcome, result.run.ended, result.reward, result.attempts) == ("failed", "broken", 0.0, 1)
    assert result.reason.startswith(why), result.reason
    assert result.failures[0] == f"the candidate broke the run: it {result.reason}"


@pytest.mark.parametrize(
    "request_, why",
    [
        (
            "{'messages': 'pay invoice 23'}",
            "sent a malformed model request: messages must be a list of chat messages, at least one, not 'pay",
        ),
        (
            "{'messages': [{'role': 'user', 'content': {'text': 'pay'}}]}",
            "sent a malformed model request: message 1: content must be text, or a list of text parts",
        ),
        (
            "{'messages': [{'role': 'robot', 'content': 'pay'}]}",
            "sent a malformed model request: message 1: role must be one of system, developer, user, assistant, tool",
        ),
        (
            "{'messages': [{'role': 'user', 'content': 'pay'}, {'role': 'tool', 'content': 'paid'}]}",
            "sent a malformed model request: message 2: a tool message needs the tool_call_id it answers",
        ),
        (
            "{'max_tokens': -1}",
            "sent a malformed model request: max_tokens must be a whole number from 1 to the run's limit of 100000, "
            "or null, not -1",
        ),
        ("{'max_tokens': 10**9}", "sent a malformed model request: max_tokens must be a whole number from 1"),
        ("{'max_tokens': True}", "sent a malformed model request: max_tokens must be a whole number from 1"),
        (
            "{'tools': [{'name': 'pay'}]}",
            "sent a malformed model request: tool 1: must be {type: function, function: {name,",
        ),
    ],
)
def test_a_malformed_model_request_fails_the_run_before_anything_is_sent(
    tmp_path: Path, request_: str, why: str
) -> None:
    model = ScriptedModel(pays_right())
    result = run(program(tmp_path, ASKS.format(request=request_)), model)
    failed_for(result, why)
    assert model.asked == 0 and result.usage.total == 0


def test_a_providers_refusal_of_the_request_the_candidate_shaped_fails_its_run(tmp_path: Path) -> None:
    refused = RequestRefused("openai:m: HTTP 400 Bad Request: Invalid 'messages[0].content': expected a string")
    model = ScriptedModel([refused])
    result = run(program(tmp_path, ASKS.format(request="{}")), model)
    failed_for(result, f"sent a model request the provider refused ({refused})")
    assert model.asked == 1


@pytest.mark.parametrize(
    "fault",
    [
        ProviderError("openai:m: HTTP 503 Service Unavailable (gave up after 4 attempts)"),
        ProviderError("openai:m: HTTP 429 Too Many Requests (gave up after 4 attempts)"),
        ProviderError("openai:m: the connection failed (ConnectError) (gave up after 4 attempts)"),
    ],
)
def test_an_infrastructure_fault_under_a_well_formed_request_is_still_errored(
    tmp_path: Path, fault: ProviderError
) -> None:
    result = run(program(tmp_path, ASKS.format(request="{'max_tokens': 512}")), ScriptedModel([fault] * 3))
    assert (result.outcome, result.run.ended, result.attempts, result.failures) == ("errored", "errored", 3, [])
    assert result.reason == f"script:test: {fault}"


def test_a_providers_refusal_fails_an_in_process_candidates_run_too() -> None:
    async def carries_on(case: Case, episode: Episode) -> Ending:
        try:
            await episode.model([{"role": "user", "content": case.task}], case.tools, None)
        except ProviderError as exc:
            return Ending("errored", error=str(exc))  # it says it errored: the harness knows better
        return Ending("done", answer="Paid.")

    refused = RequestRefused("anthropic:m: HTTP 413 Payload Too Large: prompt is too long")
    failed_for(run(carries_on, ScriptedModel([refused])), f"sent a model request the provider refused ({refused})")


def test_a_well_formed_request_at_the_limits_still_passes(tmp_path: Path) -> None:
    follows = FOLLOWS_THE_PROTOCOL.replace(
        "'content': case['task']}", "'content': [{'type': 'text', 'text': case['task']}]}"
    ).replace("'tools': case['tools']}", "'tools': case['tools'], 'max_tokens': 100000}")
    result = run(program(tmp_path, follows))
    assert (result.outcome, result.reward, result.attempts) == ("passed", 1.0, 1)
