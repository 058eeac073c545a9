"""The improver loop's bookkeeping, with each improver graded by a stand-in: what it keeps,
what it says when a kept improver proposes the next change kept, and confirmations
spent on the held-out problems across runs."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from improver.base.protocol import Completion, TokenUsage
from improver.base.variant import Variant
from improver.decide.stats import Tally
from improver.episodes.trials import TaskTally, TrialResult
from improver.loop.lineage import Lineage
from improver.meta.grading import Grade
from improver.meta.metaloop import MetaLoop
from improver.meta.problems import Graded, Problem
from improver.meta.proposing import TOOL_NAME
from improver.seals.settings import Settings
from improver.tasks.task import TaskSet
from tests.improver.taskkit import paid_task

RULE = " Rule."


class AddsARule:
    """A proposer that adds one sentence to the instructions it is given, every time."""

    name = "test:adds-a-rule"

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        arguments = json.dumps({"instructions": messages[0]["content"] + RULE})
        call = {"id": "c1", "type": "function", "function": {"name": TOOL_NAME, "arguments": arguments}}
        return Completion({"role": "assistant", "content": None, "tool_calls": [call]}, TokenUsage(1, 1), self.name)


def graded_by_rules(helps: tuple[str, ...]) -> Grade:
    """The agent passes four more held tasks (in every run) for each rule the improver's
    instructions hold, on the problems named in `helps`, and none on the others."""

    async def grade(improver: Settings, problem: Problem) -> Graded:
        rules = improver.instructions.count(RULE) if problem.name in helps else 0
        tasks = problem.held.tasks
        after = {t.name: Tally(4 if i < 4 * rules else 0, 4) for i, t in enumerate(tasks)}
        return Graded(problem, {t.name: Tally(0, 4) for t in tasks}, after, Variant("op", "", ("m",)), {})

    return grade


def problem(name: str) -> Problem:
    def tasks(part: str, n: int) -> TaskSet:
        # Each task its own invoice, so no two problems share a task.
        made = (paid_task(f"{name}-{part}-{i}", number=f"{name}-{part}-{i}") for i in range(n))
        return TaskSet("invoices", "op", tuple(made), validated=True)

    return Problem(name, tasks("train", 2), tasks("held", 16))


def metaloop(
    lineage: Path,
    events: list[str],
    helps: tuple[str, ...] = ("p0", "p1", "p2"),
    held_out: Problem | None = None,
    confirmations: int = 4,
) -> MetaLoop:
    loop = MetaLoop(
        profile="invoices",
        improver=Settings(),
        agent_variant=Variant("op", "", ("m",)),
        allowed_models=["m"],
        agent=None,
        models=None,
        proposer=AddsARule(),
        problems=[problem("p0"), problem("p1")],  # type: ignore[arg-type]
        held_out=[held_out or problem("p2")],
        lineage=Lineage(lineage),
        confirmations=confirmations,
        on_event=lambda e: events.append(e.text),
    )
    loop.grades.grade = graded_by_rules(helps)  # each improver graded by a stand-in, not a loop of its own
    return loop


def test_a_kept_improver_that_proposes_the_next_change_kept_is_named(tmp_path: Path) -> None:
    events: list[str] = []
    loop = metaloop(tmp_path / "improvers.jsonl", events)
    asyncio.run(loop.run(2))
    kept = [e for e in events if e.startswith("kept ")]
    assert len(kept) == 2 and loop.stopped is None
    first, second = (k.rsplit(" ", 1)[1] for k in kept)
    assert f"the improver step {first} kept went on to propose the change step {second} kept" in events
    assert loop.improver.instructions == Settings().instructions + RULE + RULE
    lines = [json.loads(line) for line in (tmp_path / "improvers.jsonl").read_text().splitlines()]
    assert [line["confirmation"] for line in lines if line["decision"] == "kept"] == [1, 2]
    assert lines[-1]["proposed_by_step"] == first


def test_a_change_better_only_on_the_problems_given_spends_a_confirmation_and_is_not_kept(tmp_path: Path) -> None:
    events: list[str] = []
    asyncio.run(metaloop(tmp_path / "improvers.jsonl", events, helps=("p0", "p1")).run(1))
    assert any(e.startswith("tried its instructions, adding") and "(confirmation 1 of 4 spent)" in e for e in events)
    assert not any(e.startswith("kept ") for e in events)
    again: list[str] = []
    loop = metaloop(tmp_path / "improvers.jsonl", again, helps=("p0", "p1"))
    asyncio.run(loop.run(1))
    assert 'turned down: its instructions, adding "Rule.": tried already' in again


def test_spent_confirmations_stop_the_run(tmp_path: Path) -> None:
    events: list[str] = []
    loop = metaloop(tmp_path / "improvers.jsonl", events, confirmations=1)
    asyncio.run(loop.run(2))
    assert loop.stopped is not None and "spent their 1 confirmations" in str(loop.stopped)


class ProposesWhatIsNotItsToChange:
    name = "test:overreaches"

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        calls = [
            {"id": f"c{i}", "type": "function", "function": {"name": TOOL_NAME, "arguments": arguments}}
            for i, arguments in enumerate(['{"max_lessons": 9000}', '{"failed_shown": 0}', "not json"], 1)
        ]
        return Completion({"role": "assistant", "content": None, "tool_calls": calls}, TokenUsage(1, 1), self.name)


def test_a_proposal_that_makes_no_improver_is_turned_down_saying_why(tmp_path: Path) -> None:
    events: list[str] = []
    loop = metaloop(tmp_path / "improvers.jsonl", events)
    loop.proposer = ProposesWhatIsNotItsToChange()
    asyncio.run(loop.run(1))
    assert f"round 1: the improver {Settings().id} proposed 3 changes to itself" in events
    assert any(e.startswith("turned down: a proposal: 'max_lessons' is not the improver's to change") for e in events)
    assert "turned down: a proposal: failed_shown must be a whole number of at least 1" in events
    assert "turned down: a proposal: its arguments are not valid JSON" in events


def contested(grade: Grade) -> Grade:
    """The improver as it is leaves the agent passing the last held task; a changed one
    leaves it failing that task in its first runs, which fresh runs then pass."""

    async def graded(improver: Settings, problem: Problem) -> Graded:
        got = await grade(improver, problem)
        got.after[problem.held.tasks[-1].name] = Tally(0 if improver.instructions.count(RULE) else 4, 4)
        return got

    return graded


def test_a_task_the_change_seems_to_lose_gets_fresh_runs_before_it_is_judged(tmp_path: Path) -> None:
    events: list[str] = []
    loop = metaloop(tmp_path / "improvers.jsonl", events)
    loop.grades.grade = contested(loop.grades.grade)
    asked: list[tuple[str, int]] = []

    async def passes_every_run(variant: Variant, tasks: Sequence[Any], runs: int) -> TrialResult:
        asked.extend((t.name, runs) for t in tasks)
        return TrialResult(variant, runs, [], {t.name: TaskTally(passed=runs) for t in tasks})

    loop.trials.trial = passes_every_run  # type: ignore[method-assign]
    asyncio.run(loop.run(1))
    assert ("p0-held-15", 4) in asked and ("p1-held-15", 4) in asked and ("p2-held-15", 4) in asked
    assert any(e.startswith("kept ") for e in events)


class Quotes(AddsARule):
    """A proposer that adds the ask of one task to the instructions, as if it had seen it."""

    def __init__(self, ask: str) -> None:
        self.ask = ask

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        arguments = json.dumps({"instructions": f"{messages[0]['content']}{RULE}\nFor example: {self.ask}"})
        call = {"id": "c1", "type": "function", "function": {"name": TOOL_NAME, "arguments": arguments}}
        return Completion({"role": "assistant", "content": None, "tool_calls": [call]}, TokenUsage(1, 1), self.name)


def test_a_proposal_holding_a_held_out_task_stops_the_run_before_it_is_tried(tmp_path: Path) -> None:
    events: list[str] = []
    loop = metaloop(tmp_path / "improvers.jsonl", events)
    held = loop.held_out[0].held.tasks[5]
    loop.proposer = Quotes(held.task.upper())  # case is no disguise
    asyncio.run(loop.run(2))
    assert loop.stopped is not None
    assert str(loop.stopped) == (
        "a proposal holds task p2-held-5 of held-out problem p2: the held-out tasks reached the proposer; hold out fresh problems"
    )
    assert not any(e.startswith(("kept ", "tried ", "round 2")) for e in events)
    assert loop.improver == Settings()
    lines = [json.loads(line) for line in (tmp_path / "improvers.jsonl").read_text().splitlines()]
    assert [line["decision"] for line in lines] == ["stopped"]


def test_a_proposal_repeating_what_the_proposer_was_shown_goes_on(tmp_path: Path) -> None:
    # A task of p0 shares runs of words with p2's tasks (they differ only in their numbers):
    # those runs were shown, so they are no sign that the held-out tasks reached it.
    events: list[str] = []
    loop = metaloop(tmp_path / "improvers.jsonl", events)
    loop.proposer = Quotes(loop.problems[0].held.tasks[3].task)
    asyncio.run(loop.run(1))
    assert loop.stopped is None and any(e.startswith("kept ") for e in events)


def test_a_held_out_task_asked_in_fewer_than_eight_words_is_found_word_for_word(tmp_path: Path) -> None:
    p2 = problem("p2")
    short = replace(p2.held.tasks[0], task="Refund Initech twice.")
    p2 = replace(p2, held=replace(p2.held, tasks=(short, *p2.held.tasks[1:])))
    loop = metaloop(tmp_path / "improvers.jsonl", [], held_out=p2)
    loop.proposer = Quotes("Never refund initech twice!")
    asyncio.run(loop.run(1))
    assert loop.stopped is not None and "holds task p2-held-0 of held-out problem p2" in str(loop.stopped)
    other = metaloop(tmp_path / "other.jsonl", [], held_out=p2)
    other.proposer = Quotes("Refund Initech once.")
    asyncio.run(other.run(1))
    assert other.stopped is None


class Listens(AddsARule):
    """AddsARule, keeping what it was shown each round."""

    def __init__(self) -> None:
        self.shown: list[str] = []

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        self.shown.append(messages[-1]["content"])
        return await super().complete(messages, tools, max_tokens)


def test_the_improver_is_told_how_its_changes_went_in_the_loops_words_on_problems(tmp_path: Path) -> None:
    loop = metaloop(tmp_path / "improvers.jsonl", [], helps=("p0", "p1"))
    loop.proposer = listens = Listens()
    asyncio.run(loop.run(2))
    told = listens.shown[1].split("Tried before, and how it went:\n\n")[1]
    assert told.startswith(
        '- its instructions, adding "Rule.": better on the problems to choose on (32/128 against 0/128), but not confirmed'
    )
