"""Simulated users: a conversation as a task.

A session where the person spoke more than once becomes a task whose first message is
the person's first message; what they said after it is the task's hidden part
(`SimulatedUser.said`, stored in the task and covered by its digest). When the agent
answers (it finishes or asks a person), a model playing that person, under
`instructions`, reads the conversation so far and either replies, the reply going to
the agent as its next user message, or says it has nothing more to say. It gets at most
`USER_TURNS` replies; the run is scored, as any other, on where it ended.

A simulated user whose reply gives away, at once, everything the person had yet to say
has leaked: the reply shares a run of eight words (the gates' overlap test) with every
message of the hidden part that no earlier reply shared one with, and there were at
least two such messages left. The first reply is checked against the whole hidden part,
each later one against what remains. The episode is not the agent's test any more, and
it ends as errored, never scored as failed.

Its model is the harness's side, not the candidate's: its tokens are not charged to the
run's token limit but held to one of their own, as large, over the run's attempts
together, and reported with the run (improver.episodes.harness), as are its replies.

Validation replays the recorded person (`RecordedPerson`): the same model seat, saying
exactly what the person said, in order.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from improver.base.errors import ImproverError
from improver.base.protocol import ASK_PERSON_TOOL, Completion, TokenUsage
from improver.tasks.overlap import word_runs

USER_TURNS = 8  # at most this many replies from a simulated user in one episode
NOTHING_MORE = "[nothing more to say]"  # what the simulated user answers when it is done
RECORDED = "recorded"  # the model spec of the recorded person, as validation replays it


@dataclass(frozen=True)
class SimulatedUser:
    model: str  # the model spec that plays the person
    said: tuple[str, ...]  # what the person said after the first message: the hidden part

    def to_json(self) -> dict[str, Any]:
        return {"model": self.model, "said": list(self.said)}

    @classmethod
    def from_json(cls, data: Any, where: str) -> SimulatedUser:
        if not isinstance(data, dict) or not isinstance(data.get("model"), str) or not data["model"].strip():
            raise ImproverError(f'{where}: field \'user\' must be {{"model": "provider:model", "said": [text, ...]}}')
        said = data.get("said")
        if not isinstance(said, list) or not said or not all(isinstance(s, str) for s in said):
            raise ImproverError(f"{where}: field 'user': 'said' must be a non-empty list of texts")
        return cls(data["model"], tuple(said))


def instructions(user: SimulatedUser, task: str) -> str:
    """What the model playing the person is told: who it is, what it knows, how to answer."""
    said = "\n".join(f"{i}. {text}" for i, text in enumerate(user.said, 1))
    return (
        "You are playing a person who asked an assistant for help. Your first message was:\n"
        f"{task}\n\nLater in the real conversation, in this order, you said:\n"
        f"{said}\n\n"
        "Reply to the assistant's latest message as that person would, in their words and in "
        "the first person. Say only what the assistant's message calls for: the next thing you "
        "said above that answers it, never everything at once, never anything you did not say, "
        "and never mention these instructions. When the assistant has done what you asked and "
        f"you have nothing left to say, reply exactly {NOTHING_MORE}"
    )


def user_view(user: SimulatedUser, task: str, turns: Sequence[tuple[str, str | None]]) -> list[dict[str, Any]]:
    """The conversation as the simulated user's model sees it: its instructions (with the
    person's first message), then each (agent's answer, person's reply) in turn, the
    agent's side in the "user" role and the person's in the "assistant" role."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": instructions(user, task)}]
    for answer, reply in turns:
        messages.append({"role": "user", "content": answer})
        if reply is not None:
            messages.append({"role": "assistant", "content": reply})
    return messages


def reply_of(completion: Completion) -> str | None:
    """The simulated user's reply, or None when it has nothing more to say."""
    text = str(completion.message.get("content") or "").strip()
    return None if not text or NOTHING_MORE in text else text


def leaked(user: SimulatedUser, earlier: Sequence[str], reply: str) -> bool:
    """Whether `reply`, after the simulated user's `earlier` replies, gives away at once
    all of the hidden part they had not yet said, at least two messages of it (see the
    module's text)."""
    told: set[tuple[str, ...]] = set().union(*(word_runs(text) for text in earlier))
    left = [text for text in user.said if not word_runs(text) & told]
    if len(left) < 2:
        return False
    shown = word_runs(reply)
    return all(word_runs(text) & shown for text in left)


class RecordedPerson:
    """The person as recorded: says what they said, in order, then nothing more.
    Validation's stand-in for the simulated user, so the recorded conversation replays."""

    name = RECORDED

    def __init__(self, user: SimulatedUser) -> None:
        self.user = user

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        replied = sum(1 for m in messages if m["role"] == "assistant")
        text = self.user.said[replied] if replied < len(self.user.said) else NOTHING_MORE
        return Completion({"role": "assistant", "content": text}, TokenUsage(), RECORDED)


def continued(messages: list[dict[str, Any]], reply: str) -> list[dict[str, Any]]:
    """The conversation after the task's message, given the person's `reply` to how the
    agent ended (`messages`: the agent's whole exchange, system and task first). A
    question to a person is answered as that tool call's result; a finished answer, by
    the next user message."""
    after = list(messages[2:])
    last: dict[str, Any] = next((m for m in reversed(after) if m["role"] == "assistant"), {})
    asked = [c for c in (last.get("tool_calls") or []) if c["function"]["name"] == ASK_PERSON_TOOL]
    if asked:
        return [*after, {"role": "tool", "tool_call_id": asked[0]["id"], "content": reply}]
    return [*after, {"role": "user", "content": reply}]
