"""A judge that proposes marks: a model reads a session nobody marked and says how it went.

A proposal is only that: it is stored beside the routes (`PROFILE-judged.json`), never
on the ledger, until a person accepts it; then it becomes a mark recorded as the
judge's (`by: judge:MODEL`) and accepted by that person's wallet. The judge is asked
for one JSON object, `{"mark": "good" | "bad", "reason": "..."}`; an answer that is not
one, or a model that fails, proposes nothing and is counted with the reason. The judge
is never trained; it is shown only sessions whose outcome is unknown, which never
became tasks, so never a sealed one.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from improver.base.clock import utc_now
from improver.base.errors import ImproverError
from improver.base.files import write_atomic
from improver.base.nesting import loads_bounded
from improver.base.protocol import Model
from improver.tasks.chat import text_of
from improver.train.export import Transcript

MARKS = ("good", "bad")
DEFAULT_RUBRIC = (
    "Did the agent do what it was asked, correctly, making no change it should not have made "
    "and asking a person when it should have?"
)
MAX_TOKENS = 400
CONCURRENCY = 4
INSTRUCTIONS = """You judge how a session of an AI agent went, for its operator.
Judge by this question: {rubric}
Answer with one JSON object and nothing else: {{"mark": "good" or "bad", "reason": "one sentence saying why"}}."""


@dataclass(frozen=True)
class Proposal:
    session: str
    mark: str  # good | bad
    reason: str
    model: str  # the judge's model spec
    at: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Judged:
    proposals: list[Proposal] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # session -> why no mark was proposed


def render(transcript: Transcript) -> str:
    """The session as the judge reads it: each message a line or a few, tool calls shown."""
    lines = []
    for message in transcript.messages:
        role = message.get("role", "?")
        text = text_of(message.get("content"))
        if text:
            lines.append(f"[{role}] {text}")
        for call in message.get("tool_calls") or []:
            fn = call.get("function", {})
            lines.append(f"[{role} calls {fn.get('name')}] {fn.get('arguments')}")
    lines.append(f"[the session ended: {transcript.ended}]")
    return "\n".join(lines)


def verdict(text: str) -> tuple[str, str]:
    """(mark, reason) from the judge's answer; ImproverError saying what is wrong."""
    found = re.search(r"\{.*\}", text, re.DOTALL)
    try:
        data = loads_bounded(found.group(0) if found else text)
    except ValueError:  # not JSON, nested too deep, a number too long to read
        raise ImproverError(f"the judge did not answer with a JSON object: {text[:120]!r}") from None
    if not isinstance(data, dict) or data.get("mark") not in MARKS:
        raise ImproverError(f'the judge\'s answer has no "mark" of good or bad: {text[:120]!r}')
    reason = data.get("reason")
    if not isinstance(reason, str) or not reason.strip():
        raise ImproverError(f'the judge\'s answer gives no "reason": {text[:120]!r}')
    return data["mark"], reason.strip()


async def judge_one(model: Model, spec: str, transcript: Transcript, rubric: str) -> Proposal:
    messages = [
        {"role": "system", "content": INSTRUCTIONS.format(rubric=rubric or DEFAULT_RUBRIC)},
        {"role": "user", "content": render(transcript)},
    ]
    completion = await model.complete(messages, [], MAX_TOKENS)
    mark, reason = verdict(text_of(completion.message.get("content")))
    return Proposal(transcript.id, mark, reason, spec, utc_now())


async def judge(
    model: Model, spec: str, transcripts: Sequence[Transcript], rubric: str = "", concurrency: int = CONCURRENCY
) -> Judged:
    """Proposes a mark for each session; a judge that fails on one proposes nothing for it."""
    gate = asyncio.Semaphore(concurrency)
    judged = Judged()

    async def one(transcript: Transcript) -> None:
        async with gate:
            try:
                judged.proposals.append(await judge_one(model, spec, transcript, rubric))
            except Exception as exc:  # the judge's fault, whatever it is: counted, never a mark
                judged.failed[transcript.id] = str(exc) or type(exc).__name__

    await asyncio.gather(*(one(t) for t in transcripts))
    order = {t.id: i for i, t in enumerate(transcripts)}
    judged.proposals.sort(key=lambda p: order[p.session])
    return judged


def read_proposals(path: Path) -> dict[str, Proposal]:
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
        return {p["session"]: Proposal(**p) for p in data["proposals"]}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ImproverError(f"{path}: not a file of judged proposals ({exc}); move it aside and judge again") from None


def save_proposals(path: Path, proposals: dict[str, Proposal]) -> None:
    body = {"proposals": [p.to_json() for p in proposals.values()]}
    write_atomic(path, json.dumps(body, indent=2, ensure_ascii=False) + "\n")
