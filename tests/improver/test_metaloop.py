"""The improver loop's bookkeeping, with each improver graded by a stand-in: what it keeps,
what it says when a kept improver proposes the next change kept, and confirmations
spent on the held-out problems across runs."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from improver.base.errors import ImproverError
from improver.base.protocol import Completion, EpisodeLimits, TokenUsage
from improver.base.variant import Variant
from improver.decide.decision import Outcome
from improver.decide.stats import Tally
from improver.loop.lineage import Lineage
from improver.loop.running import BudgetTooSmall, Stop
from improver.meta.metaloop import MetaLoop
from improver.meta.problems import Graded, Problem
from improver.meta.proposing import TOOL_NAME
from improver.meta.replications import REPLICATIONS, columns, judged, part_rule
from improver.meta.spending import Spent
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


class ByRules:
    """The agent passes four more held tasks (in every run) for each rule the improver's
    instructions hold, on the problems named in `helps`, and none on the others; every
    grade asked for is kept, with its replication's seed."""

    def __init__(self, helps: tuple[str, ...]) -> None:
        self.helps = helps
        self.calls: list[tuple[str, str, str]] = []  # (improver id, problem, seed)

    async def __call__(self, improver: Settings, problem: Problem, seed: str) -> Graded:
        self.calls.append((improver.id, problem.name, seed))
        rules = improver.instructions.count(RULE) if problem.name in self.helps else 0
        tasks = problem.held.tasks
        after = {t.name: Tally(4 if i < 4 * rules else 0, 4) for i, t in enumerate(tasks)}
        return Graded(problem, {t.name: Tally(0, 4) for t in tasks}, after, Variant("op", "", ("m",)), {}, seed)

    def seeds(self, improver: Settings, problem: str) -> list[str]:
        return [seed for who, name, seed in self.calls if who == improver.id and name == problem]


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
    problems: list[Problem] | None = None,
    **options: Any,
) -> MetaLoop:
    loop = MetaLoop(
        profile="invoices",
        improver=Settings(),
        agent_variant=Variant("op", "", ("m",)),
        allowed_models=["m"],
        agent=None,
        models=None,
        proposer=AddsARule(),
        problems=problems or [problem("p0"), problem("p1")],  # type: ignore[arg-type]
        held_out=[held_out or problem("p2")],
        lineage=Lineage(lineage),
        confirmations=confirmations,
        on_event=lambda e: events.append(e.text),
        seed=7,
        **options,
    )
    loop.grades.grade = ByRules(helps)  # each improver graded by a stand-in, not a loop of its own
    return loop


def lines_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


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


class LosesAtFirst(ByRules):
    """ByRules, but on p3 the improver as it is leaves the agent passing half the held tasks
    and a changed one, in its first replications, none; its fresh replications, all."""

    async def __call__(self, improver: Settings, problem: Problem, seed: str) -> Graded:
        got = await super().__call__(improver, problem, seed)
        if problem.name != "p3":
            return got
        changed = improver.instructions.count(RULE) > 0
        first = len(self.seeds(improver, "p3")) <= REPLICATIONS
        passed = 0 if changed and first else 4
        tasks = problem.held.tasks
        after = {t.name: Tally(passed if changed or i % 2 else 0, 4) for i, t in enumerate(tasks)}
        return replace(got, after=after)


def test_a_problem_the_change_seems_to_lose_gets_fresh_replications_before_it_is_judged(tmp_path: Path) -> None:
    events: list[str] = []
    given = [problem(name) for name in ("p0", "p1", "p3", "p4")]
    loop = metaloop(tmp_path / "improvers.jsonl", events, helps=("p0", "p1", "p2", "p4"), problems=given)
    loop.grades.grade = grade = LosesAtFirst(("p0", "p1", "p2", "p4"))
    asyncio.run(loop.run(1))
    change = loop.improver
    assert change != Settings() and any(e.startswith("kept ") for e in events)
    # Its first replications on p3, then a batch of fresh ones: more than the improver as it is had.
    assert len(grade.seeds(change, "p3")) == 2 * REPLICATIONS
    assert len(grade.seeds(change, "p0")) == REPLICATIONS
    assert grade.seeds(change, "p3")[:REPLICATIONS] == grade.seeds(Settings(), "p3")[-REPLICATIONS:]
    kept = next(line for line in lines_of(tmp_path / "improvers.jsonl") if line["decision"] == "kept")
    assert kept["choose"]["change"] == [3 * REPLICATIONS, 4 * REPLICATIONS]


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
        '- its instructions, adding "Rule.": better on the problems to choose on (12/12 against 0/12), but not confirmed'
    )


def test_both_improvers_are_graded_on_the_same_fresh_replications_which_the_lineage_names(tmp_path: Path) -> None:
    loop = metaloop(tmp_path / "improvers.jsonl", [], helps=("p0", "p1"))
    asyncio.run(loop.run(1))
    grade = loop.grades.grade
    assert isinstance(grade, ByRules)
    change = Settings(instructions=Settings().instructions + RULE)
    line = next(line for line in lines_of(tmp_path / "improvers.jsonl") if line["decision"] == "not confirmed")
    assert line["replications"] == REPLICATIONS and line["improver"] == change.id
    for part, given in (("choose", loop.problems), ("sealed", loop.held_out)):
        for p in given:
            seeds = grade.seeds(change, p.name)
            assert line["seeds"][part][p.digest] == seeds and len(set(seeds)) == REPLICATIONS
            assert grade.seeds(Settings(), p.name)[-REPLICATIONS:] == seeds  # the improver as it is: the same
    # Every seed is the run's, the problem's, the replication's and the comparison's: named again, drawn again.
    again = metaloop(tmp_path / "again.jsonl", [], helps=("p0", "p1"))
    asyncio.run(again.run(1))
    assert lines_of(tmp_path / "again.jsonl")[-1]["seeds"] == line["seeds"]


class TwoRules(AddsARule):
    """Proposes two changes at once: a rule added, and two."""

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        calls = [
            {
                "id": f"c{n}",
                "type": "function",
                "function": {
                    "name": TOOL_NAME,
                    "arguments": json.dumps({"instructions": messages[0]["content"] + RULE * n}),
                },
            }
            for n in (1, 2)
        ]
        return Completion({"role": "assistant", "content": None, "tool_calls": calls}, TokenUsage(1, 1), self.name)


def test_each_comparison_grades_the_improver_as_it_is_afresh(tmp_path: Path) -> None:
    loop = metaloop(tmp_path / "improvers.jsonl", [], helps=("p0", "p1"))  # neither change is confirmed
    loop.proposer = TwoRules()
    asyncio.run(loop.run(1))
    grade = loop.grades.grade
    assert isinstance(grade, ByRules)
    tried = [line for line in lines_of(tmp_path / "improvers.jsonl") if line["decision"] == "not confirmed"]
    assert len(tried) == 2 and tried[0]["comparison"] != tried[1]["comparison"]
    for p in loop.problems:
        seeds = grade.seeds(Settings(), p.name)
        # What it was shown of itself, then once for each comparison: never a grade kept from before.
        assert len(seeds) == 3 * REPLICATIONS and len(set(seeds)) == 3 * REPLICATIONS
        assert [line["seeds"]["choose"][p.digest] for line in tried] == [
            seeds[REPLICATIONS:-REPLICATIONS],
            seeds[-REPLICATIONS:],
        ]
    assert len(grade.seeds(Settings(), "p2")) == 2 * REPLICATIONS


@pytest.mark.parametrize(
    ("given", "held", "said"),
    [
        (["p0", "p0"], ["p2"], "--problem p0 is given twice: give each problem once"),
        (["p0", "p1"], ["p2", "p2"], "--held-out-problem p2 is given twice: give each problem once"),
        (
            ["p0", "copy of p0"],
            ["p2"],
            "--problem copy of p0 is given twice (the same tasks as --problem p0): give each",
        ),
        (
            ["p0", "p1"],
            ["copy of p1"],
            "--held-out-problem copy of p1 is also a --problem (p1): held-out problems must be",
        ),
    ],
)
def test_a_problem_given_twice_is_refused_before_anything_runs(
    tmp_path: Path, given: list[str], held: list[str], said: str
) -> None:
    def named(name: str) -> Problem:
        return replace(problem(name.removeprefix("copy of ")), name=name)

    with pytest.raises(ImproverError) as refused:
        MetaLoop(
            profile="invoices",
            improver=Settings(),
            agent_variant=Variant("op", "", ("m",)),
            allowed_models=["m"],
            agent=None,  # type: ignore[arg-type]
            models=None,  # type: ignore[arg-type]
            proposer=AddsARule(),
            problems=[named(n) for n in given],
            held_out=[named(n) for n in held],
            lineage=Lineage(tmp_path / "improvers.jsonl"),
        )
    assert str(refused.value).startswith(said) and "\n" not in str(refused.value)
    assert not (tmp_path / "improvers.jsonl").exists()


def sharing(name: str, spent: Problem, tasks: int = 1) -> Problem:
    """A held-out problem of its own tasks and the first `tasks` held tasks of `spent`."""
    own = problem(name)
    return replace(own, held=replace(own.held, tasks=(*spent.held.tasks[:tasks], *own.held.tasks[tasks:])))


def test_a_held_out_task_spent_in_an_earlier_set_counts_against_a_new_one(tmp_path: Path) -> None:
    path = tmp_path / "improvers.jsonl"
    asyncio.run(metaloop(path, [], helps=("p0", "p1")).run(1))  # confirmation 1 of p2's spent, nothing kept
    p5 = sharing("p5", problem("p2"))  # fresh held-out problems, but for one task of p2's
    events: list[str] = []
    loop = metaloop(path, events, helps=("p0", "p1", "p5"), held_out=p5)
    loop.proposer = TwoRules()  # one rule was tried already; two were not
    asyncio.run(loop.run(1))
    kept = next(line for line in lines_of(path) if line["decision"] == "kept")
    assert kept["confirmation"] == 2 and any("(confirmation 2 of 4), as step" in e for e in events)
    assert kept["held_out_tasks"] == sorted(t.content_key for t in (*p5.train.tasks, *p5.held.tasks))


@pytest.mark.parametrize("confirmations", [1, 8])
def test_a_new_set_holding_a_task_spent_beyond_its_confirmations_is_refused(tmp_path: Path, confirmations: int) -> None:
    path = tmp_path / "improvers.jsonl"
    asyncio.run(metaloop(path, [], helps=("p0", "p1"), confirmations=1).run(1))  # p2's one confirmation: level 0.05
    before = path.read_text()
    with pytest.raises(ImproverError) as refused:
        metaloop(path, [], held_out=sharing("p5", problem("p2")), confirmations=confirmations)
    # At 0.05/8 a confirmation, one at 0.05 spent the task's eight.
    assert str(refused.value) == (
        f"held-out task p2-held-0 of p5 has spent {confirmations} of {confirmations} confirmations with earlier "
        f"held-out problems, all that --confirmations {confirmations} allows a task: give fresh held-out problems"
    )
    assert path.read_text() == before  # nothing ran
    metaloop(path, [], held_out=problem("p6"), confirmations=confirmations)  # fresh ones are taken


def test_a_token_budget_stops_the_run_before_it_is_passed(tmp_path: Path) -> None:
    events: list[str] = []
    limits = EpisodeLimits(max_tokens=1000)
    loop = metaloop(tmp_path / "improvers.jsonl", events, limits=limits, max_tokens=1001)
    asyncio.run(loop.run(3))  # a round's proposal costs 2 tokens: then no run of what it proposes could follow
    assert str(loop.stopped) == "the next step could pass the budget of 1001 tokens (2 used)"
    assert events.count("round 1: the improver " + Settings().id + " proposed 1 change to itself") == 1
    assert not any(e.startswith("round 2") for e in events) and "2 tokens used" in events
    assert lines_of(tmp_path / "improvers.jsonl")[-1]["decision"] == "stopped"
    with pytest.raises(BudgetTooSmall, match="--max-tokens 999 is less than one run may cost"):
        metaloop(tmp_path / "other.jsonl", [], limits=limits, max_tokens=999)


def test_a_set_counts_past_what_its_most_tested_task_spent_at_its_own_level() -> None:
    def line(held: str, n: int, k: int, tasks: list[str] | None) -> dict[str, Any]:
        return {"decision": "not confirmed", "held_out_digest": held, "confirmation": n, "confirmations": k} | (
            {"held_out_tasks": tasks} if tasks is not None else {}
        )

    lines = (
        line("old", 1, 4, None),  # written before tasks were named: its set's alone
        line("s1", 1, 4, ["a", "b"]),
        line("s1", 2, 4, ["a", "b"]),
        line("s2", 1, 2, ["b"]),  # at 0.05/2: two of a set allowing 4
    )
    tasks = {"a": "a of s3", "b": "b of s3", "c": "c of s3"}
    assert Spent("s3", tasks, 4, lines).by_task() == {"a": 2.0, "b": 4.0, "c": 0.0}
    with pytest.raises(ImproverError, match="held-out task b of s3 has spent 4 of 4 confirmations"):
        Spent("s3", tasks, 4, lines).check_new()
    fresh = Spent("s3", {"a": "a of s3", "c": "c of s3"}, 4, lines)
    fresh.check_new()
    assert fresh.next_number() == 3  # its first, numbered past the two task a spent
    assert Spent("old", {"d": "d"}, 4, lines).next_number() == 2
    spent = Spent("s1", {"a": "a", "b": "b"}, 4, lines)
    with pytest.raises(Stop, match="held-out task b has spent 4 of 4 confirmations with earlier held-out problems"):
        spent.next_number()


def test_a_problem_is_cut_at_the_mean_of_both_improvers_replications_and_errored_ones_count_for_neither() -> None:
    def left(passed: int) -> dict[str, Tally]:
        return {"t": Tally(passed, 4)}

    given = columns(["p", "q"], [[left(4), left(3), {}], [{}]], [[left(0), left(1), left(3)], [left(2)]])
    assert given.splits["p"].cut == pytest.approx(2.75 / 5) and given.change == {
        "p": Tally(2, 2)
    }  # q: no judged replication
    assert given.current == {"p": Tally(1, 3), "q": Tally(0, 1)}

    async def more(name: str, count: int) -> list[dict[str, Tally]]:
        raise AssertionError("a problem not judged is not contested")

    said = asyncio.run(
        judged(part_rule("choose", "stratified", 4, 3), ["p", "q"], [[left(4)], [{}]], [[left(0)], [left(1)]], more)
    )
    assert said.outcome is Outcome.NOT_JUDGED and said.thin == ("q",)
