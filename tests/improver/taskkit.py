"""What the improver's tests share: the invoice tools, recorded sessions, a scripted model,
and candidates of their own (the improver is tested without agentd's runtime)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

from improver.base.protocol import Case, Completion, Ending, Episode, LimitReached, ProviderError, TokenUsage
from improver.tasks.harvest import Session, task_from
from improver.tasks.task import Task

OPERATOR = "You pay our suppliers' invoices. Read the invoice first, then pay it."
TOOLS: list[dict[str, Any]] = [
    {
        "name": "read_invoice",
        "description": "Reads an invoice by its number.",
        "parameters": {"type": "object", "properties": {"number": {"type": "string"}}, "required": ["number"]},
        "changes": False,
        "match": "input",
    },
    {
        "name": "pay",
        "description": "Pays an amount to a payee.",
        "parameters": {"type": "object", "properties": {"to": {"type": "string"}, "amount": {"type": "string"}}},
        "changes": True,
        "match": "input",
    },
    {
        "name": "notify",
        "description": "Tells the team, with a timestamp that differs on every run.",
        "parameters": {"type": "object", "properties": {"text": {"type": "string"}}},
        "changes": True,
        "match": "name",
    },
]


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def transcript(task: str, steps: list[tuple[str, dict[str, Any], str]], answer: str | None) -> list[dict[str, Any]]:
    """A session's messages: each step a tool call and what the tool answered."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": OPERATOR}, {"role": "user", "content": task}]
    for i, (name, args, result) in enumerate(steps, 1):
        messages.append({"role": "assistant", "content": None, "tool_calls": [call(f"c{i}", name, args)]})
        messages.append({"role": "tool", "tool_call_id": f"c{i}", "content": result})
    if answer is not None:
        messages.append({"role": "assistant", "content": answer})
    return messages


def paid_session(
    number: str = "23", payee: str = "acme-ltd", amount: str = "7", outcome: str = "good", **kw: Any
) -> Session:
    """A session that read an invoice and paid `payee`."""
    task = f"Pay invoice {number} from Acme, {amount} USD, to acme-ltd."
    steps = [
        ("read_invoice", {"number": number}, f"Invoice {number} from Acme: toner, {amount} USD."),
        ("pay", {"to": payee, "amount": amount}, f"paid {amount} USD to {payee}"),
    ]
    fields: dict[str, Any] = dict(
        id=f"s-{number}-{payee}",
        task=task,
        transcript=transcript(task, steps, f"Paid {amount} USD to {payee}."),
        tools=TOOLS,
        ended="done",
        answer=f"Paid {amount} USD to {payee}.",
        outcome=outcome,
    )
    fields.update(kw)
    return Session(**fields)


def paid_task(name: str = "work-1", **kw: Any) -> Task:
    return task_from(paid_session(**kw), name, "invoices")


Reply = dict[str, Any] | Exception
Script = Callable[[list[dict[str, Any]]], Reply]


class ScriptedModel:
    """A model that answers from a list of replies in turn (or a function of the
    messages); an Exception in the list is raised instead. Counts words as tokens."""

    def __init__(self, replies: list[Reply] | Script, name: str = "script:test") -> None:
        self.replies = replies
        self.name = name
        self.asked = 0
        self.in_flight = 0
        self.most_in_flight = 0

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0)
            reply = self.replies(messages) if callable(self.replies) else self.replies[self._turn(messages)]
        finally:
            self.in_flight -= 1
        self.asked += 1
        if isinstance(reply, Exception):
            raise reply
        words = sum(len(str(m.get("content") or "").split()) for m in messages)
        return Completion(reply, TokenUsage(words, len(str(reply.get("content") or "").split()) + 1), self.name)

    @staticmethod
    def _turn(messages: list[dict[str, Any]]) -> int:
        return sum(1 for m in messages if m["role"] == "assistant")


def says(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def calls(*items: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [call(f"m{i}", n, a) for i, (n, a) in enumerate(items, 1)],
    }


def pays_right() -> list[Reply]:
    """The model's turns for a run that reads invoice 23 and pays acme-ltd."""
    return [calls(("read_invoice", {"number": "23"})), calls(("pay", {"to": "acme-ltd", "amount": "7"})), says("Paid.")]


def always_fails() -> Script:
    def script(messages: list[dict[str, Any]]) -> Reply:
        return ProviderError("HTTP 500 through every retry")

    return script


async def follows_the_protocol(case: Case, episode: Episode) -> Ending:
    """An in-process candidate: asks the model, runs every tool call it makes, and ends when
    it answers in words (the smallest agent the harness can score); it carries a
    conversation on from where the case says it is."""
    prompt = "\n\n".join(part for part in (case.operator, case.lessons) if part)
    messages: list[dict[str, Any]] = [{"role": "system", "content": prompt}, {"role": "user", "content": case.task}]
    messages += case.conversation  # a simulated user's episode goes on from where it is
    try:
        while True:
            try:
                message = (await episode.model(messages, case.tools, None)).message
            except ProviderError as exc:
                return Ending("errored", messages=messages, error=str(exc))
            messages.append(message)
            if not message.get("tool_calls"):
                return Ending("done", answer=message.get("content") or "", messages=messages)
            for c in message["tool_calls"]:
                answer = await episode.tool(c["id"], c["function"]["name"], c["function"]["arguments"])
                messages.append({"role": "tool", "tool_call_id": c["id"], "content": answer})
    except LimitReached as exc:
        return Ending("limit", messages=messages, error=str(exc))


# The same candidate as a program speaking the JSON-lines protocol (see tests.improver.
# test_harness.program, which writes it to a file after the lines that read the case).
FOLLOWS_THE_PROTOCOL = """
messages = [{'role': 'user', 'content': case['task']}]
while True:
    send('model', {'messages': messages, 'tools': case['tools']})
    reply = receive()
    if 'error' in reply:
        sys.exit(0)
    message = reply['completion']['message']
    messages.append(message)
    if not message.get('tool_calls'):
        send('done', {'answer': message['content']})
        break
    for call in message['tool_calls']:
        send('tool', {'id': call['id'], 'name': call['function']['name'], 'arguments': call['function']['arguments']})
        messages.append({'role': 'tool', 'tool_call_id': call['id'], 'content': receive()['result']['content']})
"""
