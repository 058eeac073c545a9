"""The harness: a candidate on a task, in-process or as a real process, scored by the
harness's own checks over what it answered."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import pytest

from improver.base.protocol import Budget, Case, Completion, Ending, Episode, EpisodeLimits, ProviderError, TokenUsage
from improver.base.variant import Variant
from improver.episodes.harness import Command, RunResult, run_task
from improver.seals.seal import make_canary
from tests.improver.candidatekit import program
from tests.improver.taskkit import (
    FOLLOWS_THE_PROTOCOL,
    OPERATOR,
    ScriptedModel,
    always_fails,
    calls,
    follows_the_protocol,
    paid_task,
    pays_right,
    says,
)

VARIANT = Variant(OPERATOR, "", ("script:test",))


def run(
    candidate, model: ScriptedModel | None = None, limits: EpisodeLimits = EpisodeLimits(), retries: int = 2, task=None
) -> RunResult:
    model = model or ScriptedModel(pays_right())
    return asyncio.run(run_task(task or paid_task(), VARIANT, candidate, lambda spec: model, limits, retries))


def test_a_candidate_in_process_passes_a_task_it_does_right() -> None:
    model = ScriptedModel(pays_right())
    result = run(follows_the_protocol, model)
    assert (result.outcome, result.reward, result.failures) == ("passed", 1.0, [])
    assert [c.tool for c in result.run.calls] == ["read_invoice", "pay"]
    assert result.turns == 3 and result.usage.total > 0 and result.attempts == 1


def test_a_program_over_stdio_passes_the_same_task(tmp_path: Path) -> None:
    result = run(program(tmp_path, FOLLOWS_THE_PROTOCOL))
    assert (result.outcome, result.reward) == ("passed", 1.0)
    assert [c.tool for c in result.run.calls] == ["read_invoice", "pay"]
    assert result.run.answer == "Paid." and result.usage.total > 0


def test_paying_the_wrong_payee_fails_and_says_what_went_wrong() -> None:
    model = ScriptedModel([calls(("pay", {"to": "mallory", "amount": "7"})), says("Paid.")])
    result = run(follows_the_protocol, model)
    assert result.outcome == "failed"
    assert result.failures == ['it calls pay with {"amount":"7","to":"acme-ltd"}', "it changes nothing else"]
    assert result.reward == pytest.approx(1 / 3)


def test_stand_ins_answer_what_was_recorded_and_errors_for_the_unrecorded() -> None:
    seen: list[str] = []

    async def agent(case: Case, episode: Episode) -> Ending:
        seen.append(await episode.tool("1", "read_invoice", '{"number": "23"}'))
        seen.append(await episode.tool("2", "read_invoice", '{"number": "99"}'))
        return Ending("done", answer="")

    result = run(agent)
    assert seen[0] == "Invoice 23 from Acme: toner, 7 USD."
    assert "no answer was recorded for read_invoice" in seen[1]
    assert len(result.run.calls) == 2


def test_a_provider_that_fails_through_every_retry_is_errored_not_failed() -> None:
    model = ScriptedModel(always_fails())
    result = run(follows_the_protocol, model, retries=2)
    assert result.outcome == "errored" and result.failures == [] and result.run.ended == "errored"
    assert result.attempts == 3 and model.asked == 3  # one model call failed on each try
    assert "HTTP 500" in result.reason


def test_a_model_that_cannot_be_made_is_a_harness_fault() -> None:
    def factory(spec: str):
        raise RuntimeError("no key for openai")

    result = asyncio.run(run_task(paid_task(), VARIANT, follows_the_protocol, factory, EpisodeLimits(), retries=0))
    assert result.outcome == "errored" and "no key for openai" in result.reason


def test_a_command_that_cannot_be_started_is_errored_after_retries(tmp_path: Path) -> None:
    candidate = program(tmp_path, "")
    missing = replace(candidate.request, argv=(str(tmp_path / "no-such-candidate"),))
    result = run(Command(candidate.runner, missing), retries=1)
    assert result.outcome == "errored" and result.attempts == 2
    assert "cannot start the candidate" in result.reason


def test_a_candidate_that_prints_garbage_fails(tmp_path: Path) -> None:
    result = run(program(tmp_path, "print('I am done, trust me')\n"))
    assert result.outcome == "failed" and result.reward == 0.0 and result.run.ended == "broken"
    assert "not the protocol" in result.failures[0]


def test_a_candidate_line_nested_beyond_any_parser_fails_its_run_not_the_round(tmp_path: Path) -> None:
    result = run(program(tmp_path, "sys.stdout.write('[' * 200_000 + '\\n'); sys.stdout.flush()\n"))
    assert result.outcome == "failed" and result.run.ended == "broken"
    assert "nested deeper than 100 levels" in result.failures[0]


def test_a_candidate_cannot_claim_a_pass(tmp_path: Path) -> None:
    result = run(program(tmp_path, "send('done', {'answer': 'Paid.', 'passed': True, 'reward': 1.0})\n"))
    assert result.outcome == "failed" and result.run.ended == "done"
    assert 'it calls pay with {"amount":"7","to":"acme-ltd"}' in result.failures


def test_a_candidate_that_floods_its_output_fails(tmp_path: Path) -> None:
    flood = "for _ in range(100):\n    sys.stdout.write('x' * 10000)\nsys.stdout.flush()\ntime.sleep(30)\n"
    result = run(program(tmp_path, flood), limits=EpisodeLimits(max_output_bytes=50_000))
    assert result.outcome == "failed" and "flooded its output" in result.failures[0]


def test_a_candidate_that_floods_in_many_lines_fails(tmp_path: Path) -> None:
    flood = "while True:\n    send('tool', {'id': '1', 'name': 'read_invoice', 'arguments': '{\"number\": \"23\"}'})\n    receive()\n"
    result = run(program(tmp_path, flood), limits=EpisodeLimits(max_output_bytes=20_000))
    assert result.outcome == "failed" and "flooded its output" in result.failures[0]


def test_a_candidate_that_floods_after_it_said_it_was_done_is_still_stopped(tmp_path: Path) -> None:
    # Its output fills the harness's buffer, which stops reading it: the run must end all the same.
    flood = "send('done', {'answer': 'Paid.'})\nsys.stdout.write('x' * 1_000_000)\nsys.stdout.flush()\n"
    result = run(program(tmp_path, flood), limits=EpisodeLimits(max_output_bytes=50_000))
    assert (result.outcome, result.run.ended, result.run.answer) == ("failed", "done", "Paid.")


def test_a_candidate_that_never_answers_is_stopped_at_the_wall_time(tmp_path: Path) -> None:
    result = run(program(tmp_path, "time.sleep(600)\n"), limits=EpisodeLimits(wall_seconds=1.0))
    assert result.outcome == "failed" and "did not finish within 1 seconds" in result.failures[0]


def test_a_candidate_that_exits_early_fails(tmp_path: Path) -> None:
    result = run(program(tmp_path, "sys.stderr.write('giving up\\n'); sys.exit(3)\n"))
    assert result.outcome == "failed"
    assert "exited before it said it was done or asked a person (exit status 3: giving up)" in result.failures[0]


def test_a_call_to_an_unknown_tool_is_answered_with_an_error_and_kept(tmp_path: Path) -> None:
    body = """
    send('tool', {'id': '1', 'name': 'delete_all', 'arguments': '{}'})
    answer = receive()['result']['content']
    send('done', {'answer': answer})
    """
    result = run(program(tmp_path, body))
    assert result.run.answer == "error: there is no tool named 'delete_all'"
    assert [c.tool for c in result.run.calls] == ["delete_all"]
    assert result.outcome == "failed"


def test_a_candidate_that_crashes_in_process_fails() -> None:
    async def agent(case: Case, episode: Episode) -> Ending:
        raise RuntimeError("bug")

    result = run(agent)
    assert result.outcome == "failed" and "crashed: RuntimeError: bug" in result.failures[0]


def test_a_candidate_cannot_claim_it_errored() -> None:
    async def agent(case: Case, episode: Episode) -> Ending:
        return Ending("errored", error="the provider is down, honest")

    result = run(agent)
    assert result.outcome == "failed" and "said it errored" in result.failures[0]


def test_the_turn_limit_ends_the_run_as_a_limit(tmp_path: Path) -> None:
    model = ScriptedModel(lambda messages: calls(("read_invoice", {"number": "23"})))
    for candidate in (follows_the_protocol, program(tmp_path, FOLLOWS_THE_PROTOCOL)):
        result = run(candidate, model, limits=EpisodeLimits(max_turns=2))
        assert result.run.ended == "limit" and result.outcome == "failed" and result.turns == 2
        assert "limit of 2 turns" in result.reason


def test_the_token_limit_ends_the_run_as_a_limit() -> None:
    model = ScriptedModel(lambda messages: calls(("read_invoice", {"number": "23"})))
    result = run(follows_the_protocol, model, limits=EpisodeLimits(max_tokens=30))
    assert result.run.ended == "limit" and "tokens" in result.reason


class Greedy:
    """A model that spends half of what each call is given (at least `least`), and fails
    as a provider from the `fails_from`-th call of an attempt on."""

    name = "script:test"

    def __init__(self, least: int = 0, fails_from: int = 0) -> None:
        self.given: list[int | None] = []
        self.least, self.fails_from = least, fails_from

    async def complete(self, messages, tools, max_tokens) -> Completion:  # type: ignore[no-untyped-def]
        self.given.append(max_tokens)
        if self.fails_from and sum(m["role"] == "assistant" for m in messages) + 1 >= self.fails_from:
            raise ProviderError("scripted outage")
        assert max_tokens is not None
        spent = min(max(max_tokens // 2, self.least), max_tokens)
        return Completion(calls(("read_invoice", {"number": "23"})), TokenUsage(spent, 0), self.name)


def test_every_model_call_is_given_no_more_than_its_run_has_left() -> None:
    model = Greedy(least=1)
    result = asyncio.run(
        run_task(paid_task(), VARIANT, follows_the_protocol, lambda spec: model, EpisodeLimits(max_tokens=5000))
    )
    assert model.given[:4] == [4096, 2952, 1476, 738]  # the answer's default length, then what the run has left
    assert result.run.ended == "limit" and result.usage.total == 5000


def test_retries_of_an_errored_run_share_its_token_limit() -> None:
    model = Greedy(least=400, fails_from=2)  # each attempt spends 400 tokens, then its provider fails
    result = asyncio.run(
        run_task(paid_task(), VARIANT, follows_the_protocol, lambda spec: model, EpisodeLimits(max_tokens=1000), 2)
    )
    # attempt 1 spends 500 of 1000, attempt 2 400 of the 500 left, attempt 3 the last 100
    assert model.given == [1000, 500, 500, 100, 100]
    assert result.outcome == "errored" and result.usage.total == 1000  # not scored a failure for running out on a retry


def test_a_candidate_in_process_that_floods_its_calls_fails() -> None:
    async def agent(case: Case, episode: Episode) -> Ending:
        while True:
            await episode.tool("1", "pay", '{"to": "' + "x" * 10_000 + '"}')

    result = run(agent, limits=EpisodeLimits(max_output_bytes=50_000))
    assert result.outcome == "failed" and "flooded its output: more than 50000 bytes" in result.failures[0]


# What a candidate is told, and what it inherits


def test_a_candidate_is_sent_an_opaque_case_name_and_results_keep_the_tasks(tmp_path: Path) -> None:
    canary = make_canary(0, paid_task(), "heron-42")

    async def agent(case: Case, episode: Episode) -> Ending:
        return Ending("done", answer=case.name)

    for candidate in (agent, program(tmp_path, "send('done', {'answer': case['name']})\n")):
        result = run(candidate, task=canary)
        assert result.run.answer == canary.digest[:16]
        assert result.task == "canary-0"


def test_a_program_inherits_no_keys_from_the_harness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secrets = {
        "OPENAI_API_KEY": "sk-harness",
        "ANTHROPIC_API_KEY": "sk-ant-harness",
        "AGENTD_WALLET_PASSPHRASE": "hunter2",
    }
    for name, value in secrets.items():
        monkeypatch.setenv(name, value)
    tells = program(tmp_path, "import os\nsend('done', {'answer': json.dumps(dict(os.environ))})\n")
    seen = json.loads(run(tells).run.answer)
    assert not set(secrets) & set(seen)
    assert seen["LANG"] == "C.UTF-8" and seen["HOME"] == "/tmp"
    # The request's environment is the program's whole environment.
    given = replace(tells.request, env={**tells.request.env, "OPENAI_API_KEY": "sk-given"})
    seen = json.loads(run(replace(tells, request=given)).run.answer)
    assert seen["OPENAI_API_KEY"] == "sk-given" and "ANTHROPIC_API_KEY" not in seen


def test_one_model_call_is_held_to_its_own_length_and_deadline() -> None:
    budget = Budget(EpisodeLimits(max_tokens=10_000, call_tokens=512, call_seconds=0.2, wall_seconds=60))
    assert [budget.allowance(asked) for asked in (None, 100, 5_000)] == [512, 100, 512]
    budget.spend(TokenUsage(9_800, 0))
    assert budget.allowance(None) == 200  # what the run has left, when that is less

    async def slow() -> None:
        await asyncio.sleep(5)

    with pytest.raises(ProviderError, match=r"did not answer within 0.2 seconds \(the call's limit, call_seconds\)"):
        asyncio.run(budget.wait_for_model(slow()))
