"""A real provider (agentd's OpenAI and Anthropic clients, over HTTP to a loopback server in
their wire formats) under a real command candidate in the sandbox: a 400, 413 or 422
answer to the request the candidate shaped fails its run, not retried; a 5xx or a 429
through every retry is the infrastructure's, and the run is errored, as before."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from agentd.home import Home
from agentd.providers import make_model
from improver.base.variant import Variant
from improver.episodes.harness import RunResult, run_task
from tests.agentd.test_providers import ATTEMPTS, fast_home, server  # noqa: F401  (fixtures)
from tests.fakeservers import ModelServer
from tests.improver.candidatekit import program
from tests.improver.taskkit import FOLLOWS_THE_PROTOCOL, OPERATOR, paid_task


def run(wire: str, home: Home, tmp_path: Path) -> RunResult:
    spec = f"{wire}:test-model"
    candidate = program(tmp_path, FOLLOWS_THE_PROTOCOL)
    model = make_model(spec, home)
    return asyncio.run(run_task(paid_task(), Variant(OPERATOR, "", (spec,)), candidate, lambda _: model))


@pytest.mark.parametrize("status", [400, 413, 422])
def test_a_providers_refusal_of_the_candidates_request_fails_its_run(
    server: ModelServer,  # noqa: F811
    fast_home: Home,  # noqa: F811
    tmp_path: Path,
    status: int,
) -> None:
    server.answer_with(lambda request: server.error(status, "messages: the request is not valid"))
    result = run(server.wire, fast_home, tmp_path)
    assert (result.outcome, result.run.ended, result.reward, result.attempts) == ("failed", "broken", 0.0, 1)
    assert result.reason.startswith(
        f"sent a model request the provider refused ({server.wire}:test-model: HTTP {status}"
    )
    assert len(server.requests) == 1  # neither the provider's retries nor the harness's ran it again


@pytest.mark.parametrize("status", [429, 503])
def test_a_provider_failing_through_every_retry_still_errors_the_run(
    server: ModelServer,  # noqa: F811
    fast_home: Home,  # noqa: F811
    tmp_path: Path,
    status: int,
) -> None:
    server.answer_with(lambda request: server.error(status, "try again later"))
    result = run(server.wire, fast_home, tmp_path)
    assert (result.outcome, result.run.ended, result.failures) == ("errored", "errored", [])
    assert f"HTTP {status}" in result.reason and f"gave up after {ATTEMPTS} attempts" in result.reason
    assert result.attempts == 3 and len(server.requests) == 3 * ATTEMPTS
