"""Conversations with a simulated user: harvest, episodes, validation and leaks."""

from __future__ import annotations

import asyncio
import json
import os
import threading
from dataclasses import replace
from typing import Any

from openenv.core.generic_client import GenericEnvClient

from improver.base.protocol import Completion, EpisodeLimits, TokenUsage
from improver.base.variant import Variant
from improver.episodes.env import run_episode
from improver.episodes.harness import RunResult, run_cost, run_task
from improver.episodes.openenv import EnvServer, EnvSetup, address, listen
from improver.episodes.trials import run_trials
from improver.episodes.validate import check_task
from improver.tasks.harvest import Session, harvest
from improver.tasks.simuser import NOTHING_MORE, SimulatedUser, continued
from improver.tasks.task import Task, TaskSet, parse_task
from tests.improver.taskkit import OPERATOR, TOOLS, ScriptedModel, call, calls, follows_the_protocol, says

FIRST = "Please pay the Acme invoice that came in this morning."
LATER = "It is invoice 23, pay 7 USD to acme-ltd as it says."
TEAM = "And tell the team it was paid, once you have paid it today."
RECEIPT = "Please also keep a copy of the receipt in the shared folder."
USER_MODEL = "script:user"


def conversation(later: tuple[str, ...] = (LATER,)) -> Session:
    """The agent asked which invoice; the person said; the agent read it and paid."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": OPERATOR}, {"role": "user", "content": FIRST}]
    messages.append({"role": "assistant", "content": "Which invoice, and to whom?"})
    for text in later:
        messages.append({"role": "user", "content": text})
    messages += [
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "read_invoice", {"number": "23"})]},
        {"role": "tool", "tool_call_id": "c1", "content": "Invoice 23 from Acme: toner, 7 USD."},
        {"role": "assistant", "content": None, "tool_calls": [call("c2", "pay", {"to": "acme-ltd", "amount": "7"})]},
        {"role": "tool", "tool_call_id": "c2", "content": "paid 7 USD to acme-ltd"},
        {"role": "assistant", "content": "Paid 7 USD to acme-ltd."},
    ]
    return Session(
        id="s-talk",
        task=FIRST,
        transcript=messages,
        tools=TOOLS,
        ended="done",
        answer="Paid 7 USD to acme-ltd.",
        outcome="good",
        person_messages=1 + len(later),
    )


def talk_task(later: tuple[str, ...] = (LATER,)) -> Task:
    made = harvest([conversation(later)], "invoices", OPERATOR, "talk", simulate=USER_MODEL)
    (task,) = made.taskset.tasks
    return task


def agent_model() -> ScriptedModel:
    """Asks which invoice; once told (the last user message names it), reads and pays."""

    def script(messages: list[dict[str, Any]]) -> dict[str, Any]:
        told = any(m["role"] == "user" and "23" in str(m["content"]) for m in messages)
        if not told:
            return says("Which invoice, and to whom?")
        done = [m["function"]["name"] for a in messages for m in a.get("tool_calls") or []]
        if "read_invoice" not in done:
            return calls(("read_invoice", {"number": "23"}))
        if "pay" not in done:
            return calls(("pay", {"to": "acme-ltd", "amount": "7"}))
        return says("Paid.")

    return ScriptedModel(script, "script:agent")


def run(
    task: Task,
    user: ScriptedModel | Tallied,
    agent: ScriptedModel | Tallied | None = None,
    limits: EpisodeLimits = EpisodeLimits(),
) -> RunResult:
    models = {"script:agent": agent or agent_model(), USER_MODEL: user}
    variant = Variant(OPERATOR, "", ("script:agent",))
    return asyncio.run(run_task(task, variant, follows_the_protocol, models.__getitem__, limits, retries=1))


class Tallied:
    """A scripted model that keeps the sum of the tokens it reported; with `cost`, it
    reports that many for each answer (no more than the call allows), as a wordy one would."""

    def __init__(self, model: ScriptedModel, cost: int | None = None) -> None:
        self.model, self.name, self.cost = model, model.name, cost
        self.used = TokenUsage()

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        completion = await self.model.complete(messages, tools, max_tokens)
        if self.cost is not None:
            completion = replace(completion, usage=TokenUsage(min(self.cost, max_tokens or self.cost), 0))
        self.used = self.used + completion.usage
        return completion


def test_without_a_model_conversations_are_passed_over_and_with_one_they_make_tasks() -> None:
    plain = harvest([conversation()], "invoices", OPERATOR, "talk")
    assert (len(plain.taskset.tasks), plain.passed_over["conversation"]) == (0, 1)
    task = talk_task()
    assert task.task == FIRST and task.user == SimulatedUser(USER_MODEL, (LATER,))
    assert {"check": "makes", "tool": "pay", "arguments": {"to": "acme-ltd", "amount": "7"}} in task.checks


def test_the_hidden_part_is_stored_and_covered_by_the_digest() -> None:
    task = talk_task()
    again = parse_task(task.to_json(), "talk.json")
    assert again == task and again.digest == task.digest
    other = replace(task, user=SimulatedUser(USER_MODEL, ("It is invoice 24.",)))
    assert other.digest != task.digest
    tampered = {**task.to_json(), "user": {"model": USER_MODEL, "said": ["It is invoice 24."]}}
    try:
        parse_task(tampered, "talk.json")
    except Exception as exc:  # the stored digest no longer matches
        assert "digest" in str(exc)
    else:
        raise AssertionError("a changed hidden part was accepted")


def test_validation_replays_the_recorded_conversation_and_a_no_op_fails() -> None:
    assert asyncio.run(check_task(talk_task(), OPERATOR)) is None


def test_the_agent_goes_on_with_the_simulated_users_reply_and_passes() -> None:
    seen: list[list[dict[str, Any]]] = []

    def person(messages: list[dict[str, Any]]) -> dict[str, Any]:
        seen.append(messages)
        return says(LATER if len(seen) == 1 else NOTHING_MORE)

    result = run(talk_task(), ScriptedModel(person, USER_MODEL))
    assert (result.outcome, result.reward, result.run.answer) == ("passed", 1.0, "Paid.")
    assert [c.tool for c in result.run.calls] == ["read_invoice", "pay"] and "leaked" not in result.to_json()
    # It holds what the person said, and sees what the agent answered, in turn.
    first, second = seen
    assert LATER in first[0]["content"] and first[-1] == {"role": "user", "content": "Which invoice, and to whom?"}
    assert second[-2:] == [{"role": "assistant", "content": LATER}, {"role": "user", "content": "Paid."}]


def test_the_run_keeps_what_the_simulated_user_said_and_its_tokens_apart_from_the_candidates() -> None:
    agent, user = Tallied(agent_model()), Tallied(ScriptedModel([says(LATER), says(NOTHING_MORE)], USER_MODEL))
    result = run(talk_task(), user, agent)
    assert result.passed and result.user == (("Which invoice, and to whom?", LATER),)
    # The candidate's tokens are its model's alone; the simulated user's are kept beside them.
    assert (result.usage, result.user_usage) == (agent.used, user.used) and user.used.total > 0
    data = result.to_json()
    assert data["user"] == [{"answer": "Which invoice, and to whom?", "reply": LATER}]
    assert data["user_tokens"] == {"in": user.used.tokens_in, "out": user.used.tokens_out}
    assert data["tokens"] == {"in": agent.used.tokens_in, "out": agent.used.tokens_out}


def test_a_trial_counts_the_simulated_users_tokens_in_what_it_spent() -> None:
    agent, user = Tallied(agent_model()), Tallied(ScriptedModel([says(LATER), says(NOTHING_MORE)], USER_MODEL))
    models = {"script:agent": agent, USER_MODEL: user}
    task = talk_task()
    trial = asyncio.run(
        run_trials(Variant(OPERATOR, "", ("script:agent",)), [task], follows_the_protocol, models.__getitem__, runs=3)
    )
    assert trial.passed == 3 and user.used.total > 0
    # What a token budget is charged: both sides; and one run is fitted at both sides' most.
    assert trial.usage == agent.used + user.used
    assert run_cost(task, EpisodeLimits(max_tokens=1000)) == 2000


def test_a_simulated_user_held_to_its_own_tokens_ends_the_run_as_errored_not_the_candidates_limit() -> None:
    later = (LATER, TEAM, RECEIPT)
    user = Tallied(ScriptedModel([says(text) for text in later], USER_MODEL), cost=1000)
    result = run(talk_task(later), user, limits=EpisodeLimits(max_tokens=1500))
    # 1000 tokens, then the 500 its allowance left: nothing left for the third reply.
    assert (result.outcome, result.leaked, result.attempts) == ("errored", False, 1)
    assert "simulated user used up the tokens" in result.reason and result.user_usage.total == 1500
    assert [reply for _, reply in result.user] == [LATER, TEAM] and result.usage.total < 1500


def test_a_simulated_user_that_says_nothing_more_leaves_the_task_undone() -> None:
    result = run(talk_task(), ScriptedModel([says(NOTHING_MORE)], USER_MODEL))
    assert result.outcome == "failed" and result.run.calls == ()


def test_a_simulated_user_that_reveals_the_whole_hidden_part_at_once_leaks_the_episode() -> None:
    later = (LATER, "And tell the team it was paid, once you have paid it today.")
    user = ScriptedModel([says(" ".join(later))], USER_MODEL)
    result = run(talk_task(later), user)
    assert (result.outcome, result.leaked, result.reward, result.attempts) == ("errored", True, 0.0, 1)
    assert "hidden part" in result.reason and result.to_json()["leaked"] is True


def test_a_later_reply_that_gives_away_all_that_was_left_to_say_leaks_the_episode() -> None:
    later = (LATER, TEAM, RECEIPT)
    user = ScriptedModel([says(LATER), says(f"{TEAM} {RECEIPT}")], USER_MODEL)
    result = run(talk_task(later), user)
    assert (result.outcome, result.leaked, result.reward, result.attempts) == ("errored", True, 0.0, 1)
    assert "reply 2" in result.reason and "hidden part" in result.reason
    # The record shows the leaked reply; the agent, which had paid, never got it.
    assert result.user == (("Which invoice, and to whom?", LATER), ("Paid.", f"{TEAM} {RECEIPT}"))
    assert result.run.answer == "Paid." and [c.tool for c in result.run.calls] == ["read_invoice", "pay"]


def test_an_honest_conversation_is_not_flagged_however_its_replies_fall() -> None:
    later = (LATER, TEAM, RECEIPT)
    # One message a reply; two of three at once (one still left to say), then the last.
    for replies in ([LATER, TEAM, RECEIPT], [f"{LATER} {TEAM}", RECEIPT]):
        user = ScriptedModel([*(says(text) for text in replies), says(NOTHING_MORE)], USER_MODEL)
        result = run(talk_task(later), user)
        assert (result.outcome, result.leaked) == ("passed", False), result.reason
        assert [reply for _, reply in result.user] == replies and "leaked" not in result.to_json()


def test_a_simulated_user_that_fails_errors_the_run_rather_than_failing_it() -> None:
    result = run(talk_task(), ScriptedModel(lambda messages: RuntimeError("HTTP 500"), USER_MODEL))
    assert result.outcome == "errored" and not result.leaked and "simulated user" in result.reason


def over_pipes(task: Task, user: ScriptedModel | None) -> tuple[list[dict[str, Any]], Any]:
    """`task` as a trainer's episode over real pipes, the policy answering as agent_model
    does; every line the policy was sent, and the result."""
    to_env_r, to_env_w = os.pipe()
    to_policy_r, to_policy_w = os.pipe()
    received: list[dict[str, Any]] = []
    policy = agent_model()

    def serve() -> None:
        with open(to_policy_r, "rb") as inbox, open(to_env_w, "wb") as outbox:
            for line in inbox:
                received.append(json.loads(line))
                if "request" in received[-1]:
                    message = policy.replies(received[-1]["request"]["messages"])  # type: ignore[operator]
                    outbox.write((json.dumps({"message": message}) + "\n").encode())
                    outbox.flush()

    thread = threading.Thread(target=serve)
    thread.start()
    users = None if user is None else {USER_MODEL: user}.__getitem__
    with open(to_env_r, "rb") as reader, open(to_policy_w, "wb") as writer:
        result = asyncio.run(run_episode(task, OPERATOR, "", follows_the_protocol, reader, writer, users=users))
    thread.join(timeout=30)
    return received, result


def test_a_trainers_episode_goes_on_with_the_simulated_user_and_gets_its_reward() -> None:
    received, result = over_pipes(talk_task(), ScriptedModel([says(LATER), says(NOTHING_MORE)], USER_MODEL))
    done = received[-1]["done"]
    assert done["reward"] == 1.0 and result.passed
    assert done["user"] == [{"answer": "Which invoice, and to whom?", "reply": LATER}] and done["user_tokens"]["in"] > 0
    # The policy saw the person's reply as the next user message, never the hidden part before it.
    requests = [r["request"]["messages"] for r in received if "request" in r]
    assert all(LATER not in json.dumps(m) for m in requests[:1]) and {"role": "user", "content": LATER} in requests[1]


def test_a_trainers_episode_whose_simulated_user_leaks_is_an_error_line_not_a_reward() -> None:
    later = (LATER, "And tell the team it was paid, once you have paid it today.")
    received, result = over_pipes(talk_task(later), ScriptedModel([says(" ".join(later))], USER_MODEL))
    assert result is None and received[-1]["error"]["kind"] == "errored" and received[-1]["error"]["leaked"] is True


def test_a_trainers_episode_without_a_way_to_make_the_simulated_user_is_errored() -> None:
    received, result = over_pipes(talk_task(), None)
    assert result is None and "simulated user" in received[-1]["error"]["message"]


def over_openenv(task: Task, user: ScriptedModel) -> Any:
    """The last observation of `task` played through a real OpenEnv server and client."""
    server = EnvServer(
        EnvSetup(TaskSet("invoices", OPERATOR, (task,)), follows_the_protocol, users={USER_MODEL: user}.__getitem__)
    )
    sock = listen("127.0.0.1", 0)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sock)), daemon=True)
    thread.start()

    async def main(url: str) -> Any:
        async with GenericEnvClient(base_url=url) as env:
            result = await env.reset(task_id=task.name)
            while not result.done:
                message = agent_model().replies(result.observation["request"]["messages"])  # type: ignore[operator]
                result = await env.step({"message": message})
            return result

    try:
        return asyncio.run(main(address(sock)))
    finally:
        server.stop()
        thread.join(timeout=30)
        sock.close()


def test_the_openenv_client_plays_a_conversation_to_its_reward() -> None:
    last = over_openenv(talk_task(), ScriptedModel([says(LATER), says(NOTHING_MORE)], USER_MODEL))
    assert (last.reward, last.observation["outcome"], last.observation["calls"]) == (1.0, "passed", 2)
    assert last.observation["user"] == [{"answer": "Which invoice, and to whom?", "reply": LATER}]
    assert last.observation["user_tokens"]["in"] > 0


def test_an_openenv_episode_whose_simulated_user_leaks_says_so_and_never_passes_the_reply_on() -> None:
    later = (LATER, "And tell the team it was paid, once you have paid it today.")
    last = over_openenv(talk_task(later), ScriptedModel([says(" ".join(later))], USER_MODEL))
    assert (last.reward, last.observation["outcome"], last.observation["leaked"]) == (None, "errored", True)
    assert later[1] not in json.dumps(last.observation)


def test_a_reply_to_a_question_for_a_person_is_that_calls_result() -> None:
    asked = {
        "role": "assistant",
        "content": None,
        "tool_calls": [call("q1", "ask_person", {"question": "Which invoice?"})],
    }
    messages = [{"role": "system", "content": OPERATOR}, {"role": "user", "content": FIRST}, asked]
    assert continued(messages, "Invoice 23.") == [
        asked,
        {"role": "tool", "tool_call_id": "q1", "content": "Invoice 23."},
    ]
    finished = [*messages[:2], says("Which invoice?")]
    assert continued(finished, "Invoice 23.")[-1] == {"role": "user", "content": "Invoice 23."}
