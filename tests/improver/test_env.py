"""A task as an episode for a trainer: the policy's turns come in a line at a time."""

from __future__ import annotations

import asyncio
import json
import os
import select
import threading
import time
from collections.abc import Callable
from typing import Any

from improver.episodes.env import run_episode
from tests.improver.taskkit import OPERATOR, calls, follows_the_protocol, paid_task, says

Policy = Callable[[dict[str, Any]], bytes | None]  # a request -> the line to send (None: close)


def episode(policy: Policy, lessons: str = "") -> tuple[list[dict[str, Any]], Any]:
    """Runs an episode against `policy` over real pipes; every line it was sent, and the result."""
    to_env_r, to_env_w = os.pipe()
    to_policy_r, to_policy_w = os.pipe()
    received: list[dict[str, Any]] = []

    def serve() -> None:
        with open(to_policy_r, "rb") as inbox, open(to_env_w, "wb") as outbox:
            for line in inbox:
                message = json.loads(line)
                received.append(message)
                if "request" not in message:
                    continue
                reply = policy(message["request"])
                if reply is None:
                    outbox.close()  # goes away, but still reads what it is told
                    continue
                outbox.write(reply)
                outbox.flush()

    thread = threading.Thread(target=serve)
    thread.start()
    with open(to_env_r, "rb") as reader, open(to_policy_w, "wb") as writer:
        result = asyncio.run(run_episode(paid_task("work-3"), OPERATOR, lessons, follows_the_protocol, reader, writer))
    thread.join(timeout=30)
    return received, result


def line(message: dict[str, Any]) -> bytes:
    return (json.dumps({"message": message}) + "\n").encode()


def right(request: dict[str, Any]) -> bytes:
    turn = sum(1 for m in request["messages"] if m["role"] == "assistant")
    replies = [
        calls(("read_invoice", {"number": "23"})),
        calls(("pay", {"amount": "7", "to": "acme-ltd"})),
        says("Paid."),
    ]
    return line(replies[turn])


def test_an_episode_runs_request_by_request_to_done_with_the_reward() -> None:
    received, result = episode(right, lessons="Check the payee.")
    first = received[0]["request"]
    assert first["messages"][0]["role"] == "system" and "Check the payee." in first["messages"][0]["content"]
    assert first["messages"][1] == {"role": "user", "content": "Pay invoice 23 from Acme, 7 USD, to acme-ltd."}
    assert {t["function"]["name"] for t in first["tools"]} >= {"read_invoice", "pay"}
    assert first["max_tokens"] == 4096
    assert received[1]["request"]["messages"][-1]["content"] == "Invoice 23 from Acme: toner, 7 USD."
    assert received[-1] == {
        "done": {
            "case": "work-3",
            "reward": 1.0,
            "passed": True,
            "failures": [],
            "calls": 2,
            "ended": {"how": "done", "answer": "Paid.", "reason": ""},
            "user": [],  # no simulated user: nothing said, no tokens
            "user_tokens": {"in": 0, "out": 0},
        }
    }
    assert result.passed


def test_a_wrong_run_is_done_with_its_failures() -> None:
    def mallory(request: dict[str, Any]) -> bytes:
        turn = sum(1 for m in request["messages"] if m["role"] == "assistant")
        return line([calls(("pay", {"amount": "7", "to": "mallory"})), says("Paid.")][turn])

    received, _ = episode(mallory)
    done = received[-1]["done"]
    assert done["passed"] is False and done["reward"] == 1 / 3 and done["calls"] == 1
    assert "it changes nothing else" in done["failures"]


def test_malformed_json_from_the_policy_ends_with_a_clear_error() -> None:
    received, result = episode(lambda request: b"{this is not json\n")
    assert result is None
    error = received[-1]["error"]
    assert error["kind"] == "policy" and "turn 1: not a JSON line" in error["message"]


def test_a_line_that_is_not_a_message_ends_with_a_clear_error() -> None:
    received, _ = episode(lambda request: b'{"answer": {"content": "Paid."}}\n')
    assert "expected {\"message\": ...}, got 'answer'" in received[-1]["error"]["message"]
    received, _ = episode(lambda request: line({"role": "user", "content": "hi"}))
    assert 'role must be "assistant"' in received[-1]["error"]["message"]
    received, _ = episode(
        lambda request: line({"role": "assistant", "tool_calls": [{"function": {"arguments": "{}"}}]})
    )
    assert "tool call 1 needs" in received[-1]["error"]["message"]


def test_a_policy_that_goes_away_ends_with_a_clear_error() -> None:
    received, result = episode(lambda request: None)
    assert result is None
    assert received[-1]["error"]["message"] == "the policy closed its input before the episode ended"


def test_a_policy_too_slow_on_a_turn_is_the_policys_doing_not_an_infrastructure_fault() -> None:
    from improver.base.protocol import EpisodeLimits

    to_env_r, to_env_w = os.pipe()
    to_policy_r, to_policy_w = os.pipe()
    with open(to_env_r, "rb") as reader, open(to_policy_w, "wb") as writer, open(to_env_w, "wb"):
        result = asyncio.run(
            run_episode(
                paid_task("work-3"), OPERATOR, "", follows_the_protocol, reader, writer, EpisodeLimits(wall_seconds=0.3)
            )
        )
    with open(to_policy_r, "rb") as sent:
        lines = [json.loads(x) for x in sent.read().splitlines()]
    assert result is None
    assert lines[-1] == {"error": {"kind": "policy", "message": "turn 1: the policy did not answer within 0.3 seconds"}}


def test_an_episode_over_does_not_read_the_next_ones_lines() -> None:
    # The first episode ends on a bad line while its policy stays open and silent; its
    # input is closed, and the next pipe made takes the freed descriptor number.
    first_r, first_w = os.pipe()
    back_r, back_w = os.pipe()
    os.write(first_w, b'{"answer": "not a message"}\n')
    with open(first_r, "rb") as reader, open(back_w, "wb") as writer:
        asyncio.run(run_episode(paid_task("work-3"), OPERATOR, "", follows_the_protocol, reader, writer))
    second_r, second_w = os.pipe()
    try:
        os.write(second_w, b"the next episode's line\n")
        time.sleep(0.2)  # time for a stray reader of the first episode to take it
        readable, _, _ = select.select([second_r], [], [], 1.0)
        assert readable and os.read(second_r, 100) == b"the next episode's line\n"
    finally:
        for fd in (second_r, second_w, first_w, back_r):
            os.close(fd)
