"""The harness with agentd's own parts: its runtime in-process and as `agentd case
--stdio`, on models made by its providers (a real loopback server, a scripted model).
The harness's own behaviour is tested in tests/improver/test_harness.py."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from agentd.home import Home
from agentd.providers import make_model
from agentd.runtime import run_case
from improver.base.protocol import EpisodeLimits
from improver.base.variant import Variant
from improver.episodes.harness import Command, RunResult, run_task
from sandbox import SandboxUnavailable, make_runner, python_request
from tests.fakeservers import ModelServer
from tests.improver.candidatekit import program, runner
from tests.improver.taskkit import FOLLOWS_THE_PROTOCOL, OPERATOR, ScriptedModel, paid_task, pays_right

# What `python -m agentd case --stdio` imports; mounted read-only, nothing else of the checkout.
PACKAGES = ("agentd", "improver", "ledger", "sandbox")
STDIO = Command(runner(), python_request(("-m", "agentd", "case", "--stdio"), packages=PACKAGES))
# Seconds the loopback model takes over each answer, and the candidate's wall time: less
# than the three answers of a run take (6 s), so counting the model's time would run the
# candidate out whatever the machine's speed; the candidate's own time (a Python process
# starting, for the program) has the whole 5 s, which a loaded machine does not use up.
SLOW = 2.0
WALL = EpisodeLimits(wall_seconds=2.5 * SLOW, call_seconds=2.5 * SLOW)


def test_the_runtime_in_process_and_over_stdio_passes_a_task_it_does_right() -> None:
    for candidate in (run_case, STDIO):
        model = ScriptedModel(pays_right())
        result = asyncio.run(
            run_task(paid_task(), Variant(OPERATOR, "", ("script:test",)), candidate, lambda spec, model=model: model)
        )
        assert (result.outcome, result.reward, result.run.answer) == ("passed", 1.0, "Paid.")
        assert [c.tool for c in result.run.calls] == ["read_invoice", "pay"] and result.usage.total > 0


def test_a_loopback_server_that_always_500s_makes_the_run_errored(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    home.root.mkdir(parents=True)
    home.config_path.write_text("[providers]\nattempts = 2\nbackoff = 0.01\nbackoff_cap = 0.01\n")
    with ModelServer("openai") as server:
        server.answer_with(lambda request: server.error(500, "down"))
        monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
        variant = Variant(OPERATOR, "", ("openai:m",))
        factory = lambda spec: make_model(spec, home)
        for candidate in (run_case, STDIO):
            before = len(server.requests)
            result = asyncio.run(run_task(paid_task(), variant, candidate, factory, EpisodeLimits(), retries=1))
            assert result.outcome == "errored" and result.attempts == 2
            assert len(server.requests) - before == 4  # 2 tries of the run x 2 attempts per call


def loopback_run(
    home: Home, monkeypatch: pytest.MonkeyPatch, server: ModelServer, candidate, limits: EpisodeLimits
) -> RunResult:
    """`candidate` on the paid task, on openai:m served by `server`."""
    home.root.mkdir(parents=True, exist_ok=True)
    home.config_path.write_text("[providers]\nattempts = 1\ntimeout = 30\n")
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    variant = Variant(OPERATOR, "", ("openai:m",))
    return asyncio.run(
        run_task(paid_task(), variant, candidate, lambda spec: make_model(spec, home), limits, retries=0)
    )


def test_the_time_a_slow_model_takes_is_not_the_candidates(
    tmp_path: Path, home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ModelServer("openai", delay=SLOW) as server:
        for candidate in (run_case, program(tmp_path, FOLLOWS_THE_PROTOCOL)):
            server.queue(
                server.tool_calls(("read_invoice", {"number": "23"})),
                server.tool_calls(("pay", {"to": "acme-ltd", "amount": "7"})),
                server.text("Paid."),
            )
            result = loopback_run(home, monkeypatch, server, candidate, WALL)
            assert (result.outcome, result.run.ended, result.failures) == ("passed", "done", [])
            assert result.turns == 3


def test_a_model_that_does_not_answer_within_the_calls_time_errors_the_run(
    tmp_path: Path, home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    with ModelServer("openai", delay=WALL.call_seconds + 1) as server:  # longer than the call may take: one way to end
        for candidate in (run_case, program(tmp_path, FOLLOWS_THE_PROTOCOL)):
            result = loopback_run(home, monkeypatch, server, candidate, WALL)
            assert (result.outcome, result.run.ended, result.failures) == ("errored", "errored", [])
            assert (
                result.reason == "openai:m: the model did not answer within 5 seconds (the call's limit, call_seconds)"
            )


def test_a_scripted_model_without_a_rule_for_the_conversation_errors_the_run_without_retries(
    tmp_path: Path, home: Home
) -> None:
    rules = tmp_path / "late.toml"
    rules.write_text('[[rule]]\nturn = 5\ntext = "Too late."\n')
    made: list[str] = []

    def factory(spec: str):
        made.append(spec)
        return make_model(spec, home)

    variant = Variant(OPERATOR, "", (f"script:{rules}",))
    for candidate in (run_case, program(tmp_path, FOLLOWS_THE_PROTOCOL)):
        made.clear()
        result = asyncio.run(run_task(paid_task(), variant, candidate, factory, EpisodeLimits(), retries=2))
        assert (result.outcome, result.failures, result.attempts) == ("errored", [], 1)
        assert result.reason.startswith(f"{rules}: no rule matches turn 1")
        assert len(made) == 1  # tried once: another try would only fail the same way


@pytest.mark.parametrize("name", ["bwrap", "docker"])
def test_the_runtime_passes_through_either_runner(name: str) -> None:
    try:
        runner = make_runner(name)
    except SandboxUnavailable:
        if name == "docker" and os.environ.get("AGENTD_REQUIRE_DOCKER") != "1":
            pytest.skip("no Docker engine here")
        raise
    stdio = Command(runner, python_request(("-m", "agentd", "case", "--stdio"), packages=PACKAGES))
    model = ScriptedModel(pays_right())
    result = asyncio.run(run_task(paid_task(), Variant(OPERATOR, "", ("script:test",)), stdio, lambda spec: model))
    assert (result.outcome, result.run.answer) == ("passed", "Paid.")
