"""Harvest: a profile's sessions with a known outcome, as tasks.

The task is what the session was asked; its stand-ins answer what the real tools
answered; its checks come from what the session changed:

- a session that went well: the run ends as the session did (finishes, or stops to ask
  a person), makes every change the session made with the same input (a tool matched by
  name only is just called), and changes nothing else. Its solution is the session's own
  calls and last words; its failure, a run that does nothing and finishes.
- a session that went badly: the run makes none of the session's changes, by their exact
  inputs. Its solution reads what the session read, changes nothing and asks a person;
  its failure is the session's own run.

With a model to simulate users, a conversation (more than one message from a person)
makes a task too: its first message is the person's first, and what they said after it
is held by a simulated user (improver.tasks.simuser) that answers the agent in their place.

Passed over, and counted by reason: malformed sessions (a recorded message not in the
chat format, improver.tasks.chat: what is wrong is kept for each), conversations without a
model to simulate users (the first message is no longer the whole task), compacted sessions
(their first message is no longer the task as asked), errored sessions (an
infrastructure fault says nothing about the agent) and sessions whose outcome is not
known.

Tasks are named `<stem>-<i>`, numbered from 1 in the order the sessions started.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any

from improver.base.protocol import ASK_PERSON_TOOL
from improver.tasks.chat import text_of, transcript_problem
from improver.tasks.checks import changing_tools
from improver.tasks.rubric import Rubric
from improver.tasks.runs import Call, Run
from improver.tasks.simuser import SimulatedUser
from improver.tasks.standins import collect
from improver.tasks.task import Task, TaskSet

HARVEST_PASS_OVER = ("malformed", "conversation", "compacted", "errored", "unknown outcome")
DOES_NOTHING = "does nothing and finishes"
ITS_OWN_RUN = "the session's own run"


@dataclass(frozen=True)
class Session:
    """A recorded session as harvest sees it (agentd.app.tasks makes these)."""

    id: str
    task: str
    transcript: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    ended: str  # done | asked | limit | errored
    answer: str
    outcome: str  # good | bad | unknown | errored
    person_messages: int = 1
    compacted: bool = False
    claim: str | None = None


@dataclass(frozen=True)
class Harvest:
    taskset: TaskSet  # not validated yet
    sessions: int  # how many there were, passed over or not
    passed_over: Counter[str]  # by reason
    malformed: dict[str, str] = field(default_factory=dict)  # session id: what is wrong with it


def pass_over_reason(session: Session, simulate: bool = False) -> str | None:
    """Why a session with a well-formed transcript makes no task, if it does not."""
    if session.person_messages > 1 and not (simulate and _later_said(session)):
        return "conversation"
    if session.compacted:
        return "compacted"
    if session.ended == "errored" or session.outcome == "errored":
        return "errored"
    if session.outcome not in ("good", "bad"):
        return "unknown outcome"
    return None


def harvest(
    sessions: list[Session],
    profile: str,
    operator: str,
    stem: str,
    rubric: Rubric | None = None,
    simulate: str | None = None,
) -> Harvest:
    """Sessions in the order they started; returns the tasks (each with the profile's
    `rubric`, when it declares one) and what was passed over. With `simulate` (a model
    spec), conversations make tasks whose later messages that model plays."""
    tasks: list[Task] = []
    passed_over: Counter[str] = Counter()
    malformed: dict[str, str] = {}
    for session in sessions:
        wrong = transcript_problem(session.transcript)
        if wrong:
            malformed[session.id] = wrong
        reason = "malformed" if wrong else pass_over_reason(session, simulate is not None)
        if reason:
            passed_over[reason] += 1
        else:
            task = task_from(session, f"{stem}-{len(tasks) + 1}", profile, rubric)
            said = _later_said(session)
            tasks.append(replace(task, user=SimulatedUser(simulate, said)) if simulate and said else task)
    return Harvest(TaskSet(profile, operator, tuple(tasks)), len(sessions), passed_over, malformed)


def task_from(session: Session, name: str, profile: str, rubric: Rubric | None = None) -> Task:
    """The task a session makes; its transcript must be well formed (harvest checks)."""
    exchanges = exchanges_of(session.transcript)
    calls = tuple(call for call, _ in exchanges)
    if session.outcome == "good":
        checks, solution, failures = _went_well(session, calls)
    else:
        checks, solution, failures = _went_badly(session, calls)
    return Task(
        name=name,
        profile=profile,
        task=session.task,
        tools=session.tools,
        standins=collect(exchanges),
        checks=checks,
        source={"session": session.id, "outcome": session.outcome, "claim": session.claim},
        solution=solution,
        failures=failures,
        rubric=rubric,
    )


def _later_said(session: Session) -> tuple[str, ...]:
    """What the person said after their first message, in order (none that is empty)."""
    said = [text_of(m["content"]) for m in session.transcript if m["role"] == "user"][1:]
    return tuple(text for text in said if text.strip())


def exchanges_of(transcript: list[dict[str, Any]]) -> list[tuple[Call, str | None]]:
    """Every tool call the session made (asking a person is an ending, not a call), in
    order, with what the tool answered (None when no answer was recorded)."""
    calls: list[tuple[str, Call]] = []
    answers: dict[str, str] = {}
    for message in transcript:
        if message["role"] == "assistant":
            for tc in message.get("tool_calls") or []:
                function = tc["function"]
                if function["name"] != ASK_PERSON_TOOL:
                    calls.append((tc["id"], Call.from_text(function["name"], function["arguments"])))
        elif message["role"] == "tool":
            answers.setdefault(message["tool_call_id"], text_of(message["content"]))
    return [(call, answers.get(call_id)) for call_id, call in calls]


def _went_well(session: Session, calls: tuple[Call, ...]) -> tuple[list[dict[str, Any]], Run, tuple[Run, ...]]:
    changing = changing_tools(session.tools)
    checks: list[dict[str, Any]] = []
    if session.ended == "done":
        checks.append({"check": "finishes"})
    elif session.ended == "asked":
        checks.append({"check": "asks"})
    made: Counter[tuple[str, bytes]] = Counter()
    first: dict[tuple[str, bytes], Call] = {}
    by_name: list[str] = []
    for call in calls:
        if call.tool not in changing:
            continue
        if changing[call.tool] == "name":
            by_name += [call.tool] if call.tool not in by_name else []
            continue
        key = call.key()
        if key is not None:  # a change tool given no JSON object changed nothing
            made[key] += 1
            first.setdefault(key, call)
    for key, call in first.items():
        check: dict[str, Any] = {"check": "makes", "tool": call.tool, "arguments": call.arguments}
        checks.append({**check, "times": made[key]} if made[key] > 1 else check)
    checks += [{"check": "calls", "tool": tool} for tool in by_name]
    checks.append({"check": "no_other_changes"})
    solution = Run(calls, session.answer, session.ended)
    return checks, solution, (Run((), "", "done", DOES_NOTHING),)


def _went_badly(session: Session, calls: tuple[Call, ...]) -> tuple[list[dict[str, Any]], Run, tuple[Run, ...]]:
    changing = changing_tools(session.tools)
    checks: list[dict[str, Any]] = []
    seen: set[tuple[str, bytes]] = set()
    for call in calls:
        key = call.key()
        if call.tool in changing and key is not None and key not in seen:
            seen.add(key)
            checks.append({"check": "avoids", "tool": call.tool, "arguments": call.arguments})
    readers = {t["name"] for t in session.tools if not t.get("changes")}
    reads = tuple(c for c in calls if c.tool in readers)
    solution = Run(reads, "", "asked")
    return checks, solution, (Run(calls, session.answer, session.ended, ITS_OWN_RUN),)
