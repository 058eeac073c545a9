"""The agent loop, against an episode that answers from a script."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from agentd.runtime import run_case
from improver.base.protocol import (
    ASK_PERSON_TOOL,
    Budget,
    Case,
    Completion,
    EpisodeLimits,
    LimitReached,
    ProviderError,
    TokenUsage,
)


def call(name: str, args: dict[str, Any], cid: str = "c1") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}],
    }


class ScriptedEpisode:
    def __init__(self, replies: list[Any], limits: EpisodeLimits = EpisodeLimits()) -> None:
        self.replies = list(replies)
        self.seen: list[list[dict[str, Any]]] = []
        self.calls: list[tuple[str, str]] = []
        self.budget = Budget(limits)

    async def model(self, messages, tools, max_tokens):
        self.budget.start_turn()
        self.seen.append([dict(m) for m in messages])
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return Completion(reply, TokenUsage(10, 5), "script:test")

    async def tool(self, call_id, name, arguments):
        self.calls.append((name, arguments))
        return f"answer to {name}"


CASE = Case(name="t", task="Pay invoice 21", tools=[], operator="You pay invoices.", lessons="Check payees.")


def test_tool_calls_are_run_and_fed_back_until_the_model_answers() -> None:
    ep = ScriptedEpisode([call("read_invoice", {"number": "21"}), {"role": "assistant", "content": "Paid."}])
    ending = asyncio.run(run_case(CASE, ep))
    assert ending.ended == "done" and ending.answer == "Paid."
    assert ep.calls == [("read_invoice", '{"number": "21"}')]
    roles = [m["role"] for m in ending.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert ending.messages[3] == {"role": "tool", "tool_call_id": "c1", "content": "answer to read_invoice"}
    assert ending.messages[0]["content"].startswith("You pay invoices.")
    assert "Check payees." in ending.messages[0]["content"]


def test_asking_a_person_ends_the_run() -> None:
    ep = ScriptedEpisode([call(ASK_PERSON_TOOL, {"question": "Is mallory right?"})])
    ending = asyncio.run(run_case(CASE, ep))
    assert (ending.ended, ending.answer) == ("asked", "Is mallory right?")
    assert ep.calls == []


def test_a_provider_fault_ends_the_run_as_errored_not_done() -> None:
    ep = ScriptedEpisode([call("read_invoice", {}), ProviderError("503 after 4 attempts")])
    ending = asyncio.run(run_case(CASE, ep))
    assert ending.ended == "errored" and "503" in ending.error


def test_the_turn_limit_ends_the_run() -> None:
    ep = ScriptedEpisode([call("read_invoice", {}, f"c{i}") for i in range(5)], EpisodeLimits(max_turns=3))
    ending = asyncio.run(run_case(CASE, ep))
    assert ending.ended == "limit" and "3 turns" in ending.error
    assert len(ep.calls) == 3


def test_a_limit_raised_by_the_episode_is_a_limit() -> None:
    ep = ScriptedEpisode([LimitReached("the run reached its limit of 10 tokens")])
    assert asyncio.run(run_case(CASE, ep)).ended == "limit"


def test_each_message_is_said_as_it_joins_the_transcript_a_call_before_it_runs() -> None:
    ep = ScriptedEpisode([call("pay", {"to": "acme"}), {"role": "assistant", "content": "Paid."}])
    heard: list[tuple[int, str]] = []  # (calls run so far, the role said)
    ending = asyncio.run(run_case(CASE, ep, lambda message: heard.append((len(ep.calls), message["role"]))))
    assert heard == [(0, "system"), (0, "user"), (0, "assistant"), (1, "tool"), (1, "assistant")]
    assert [role for _, role in heard] == [m["role"] for m in ending.messages]
