"""The challenger's parts: which tasks it varies, what it is shown, what it wrote, and the
rule its variants are judged by (improver.decide.decision's, on a part of its own)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from improver.base.protocol import ProviderError
from improver.decide.decision import CHALLENGE, Evidence, Outcome, Rule, decide
from improver.decide.stats import Tally
from improver.episodes.validate import CARELESS_RUN_PASSES
from improver.loop.challenger import Challenger, Shown, Variants, newly_passed, write_variants
from improver.loop.writing import MALFORMED, REPEATS_SEALED, REPEATS_WRITTEN, SealReached
from tests.improver.taskkit import OPERATOR, ScriptedModel, paid_task, says
from tests.improver.test_writing import CODE_WORD, SEALED, Seeing, copy_of, writes, written

TASKS = [paid_task(f"work-{i}", number=str(20 + i)) for i in range(1, 7)]


def shown() -> Shown:
    return Shown(
        "invoices",
        OPERATOR,
        'learns "Never pay mallory."',
        TASKS,
        [SEALED],
        lambda text: "canary-0" if CODE_WORD in text else None,
    )


def challenge(model: Any, left: int | None = None, **kw: Any) -> Variants:
    return asyncio.run(
        write_variants(Challenger(model, **kw), shown(), TASKS[:2], lambda t: "the agent failed it", lambda: left)
    )


def test_it_varies_tasks_the_agent_failed_in_some_run_and_the_change_passes_those_it_gains_most_on_first() -> None:
    current = {t.name: Tally(4, 4) for t in TASKS} | {
        "work-1": Tally(2, 4),
        "work-2": Tally(0, 4),
        "work-3": Tally(3, 4),
        "work-4": Tally(0, 4),
        "work-5": Tally(1, 4),
    }
    change = {t.name: Tally(4, 4) for t in TASKS} | {
        "work-3": Tally(3, 4),
        "work-4": Tally(3, 4),
        "work-5": Tally(2, 4),
    }
    # work-3: no gain; work-5: not passed (half its runs); work-6: the agent passed it every time
    assert [t.name for t in newly_passed(TASKS, change, current, 4)] == ["work-2", "work-4", "work-1"]
    assert [t.name for t in newly_passed(TASKS, change, current, 1)] == ["work-2"]
    assert newly_passed(TASKS, current, current, 4) == []


def test_each_task_gets_its_own_conversation_showing_it_the_change_and_nothing_sealed() -> None:
    model = Seeing(lambda messages: writes(written("51"), written("52")))
    variants = challenge(model)
    assert len(model.seen) == 2
    for task, seen in zip(TASKS[:2], model.seen, strict=False):
        text = seen[1]["content"]
        assert task.task in text and 'The change: learns "Never pay mallory."' in text and OPERATOR in text
        assert SEALED.task not in text and all(s["answer"] not in text for s in SEALED.standins)
        assert "Write 2 variants of this task with write_task" in text
    # The same two variants written for both tasks count once, named in order.
    assert [t.name for t in variants.tasks] == ["variant-1", "variant-2"]
    assert variants.left_out == {REPEATS_WRITTEN: 2} and variants.written == 4 and variants.calls == 2
    assert [t.source["of"] for t in variants.tasks] == ["work-1", "work-1"]


def test_malformed_careless_and_sealed_copies_are_left_out_and_none_held_up() -> None:
    careless = written("53", checks=[{"check": "finishes"}])
    model = ScriptedModel(lambda messages: writes("{", careless, copy_of(SEALED)))
    variants = challenge(model, variants=3)
    assert not variants.tasks and not variants.failed
    assert variants.left_out == {MALFORMED: 6, CARELESS_RUN_PASSES: 6, REPEATS_SEALED: 2}
    assert variants.calls == 6  # three turns a task, to mend what was refused


def test_a_challenger_that_writes_no_task_wrote_nothing() -> None:
    variants = challenge(ScriptedModel(lambda messages: says("These tasks look fine to me.")))
    assert not variants.tasks and variants.written == 0 and variants.calls == 2 and not variants.failed


def test_a_challenger_erroring_on_every_task_failed_and_on_some_did_not() -> None:
    down = challenge(ScriptedModel(lambda messages: ProviderError("HTTP 503 through every retry")))
    assert down.failed and len(down.errors) == 2 and down.errors[0].startswith("work-1: HTTP 503")
    once = iter([ProviderError("HTTP 503 through every retry"), writes(written("51"))])
    some = challenge(ScriptedModel(lambda messages: next(once)))
    assert not some.failed and [t.source["of"] for t in some.tasks] == ["work-2"]


def test_a_canarys_code_word_in_a_variant_stops_everything() -> None:
    with pytest.raises(SealReached, match="the sealed tasks have reached the writer"):
        challenge(ScriptedModel([writes(written(task=f"Pay {CODE_WORD} now."))]))


def test_its_calls_are_held_to_what_a_token_budget_leaves() -> None:
    asked: list[int | None] = []

    class Budgeted(ScriptedModel):
        async def complete(self, messages, tools, max_tokens):  # type: ignore[no-untyped-def]
            asked.append(max_tokens)
            return await super().complete(messages, tools, max_tokens)

    variants = challenge(Budgeted(lambda messages: writes(written("51"), written("52"))), left=10_000)
    assert asked[0] == 10_000 and 0 < asked[1] < 10_000 and variants.calls == 2  # the second told what the first left
    assert not challenge(Budgeted(lambda messages: says("")), left=0).calls


def test_variants_are_judged_against_the_tasks_they_vary_at_the_screening_level_whatever_the_seals_test() -> None:
    rule = Rule.challenge(runs=2)
    assert (rule.part, rule.level) == (CHALLENGE, 0.05)
    names = ("variant-1", "variant-2")
    fitted = (Tally(8, 8), Tally(0, 8))  # the tasks varied, afresh: the change passes them all, the agent none
    caught = decide(
        rule, Evidence({n: Tally(0, 2) for n in names}, {n: Tally(0, 2) for n in names}, varied=fitted), names
    )
    assert caught.outcome is Outcome.NOT_BETTER and caught.part == CHALLENGE
    held = decide(
        rule, Evidence({n: Tally(2, 2) for n in names}, {n: Tally(0, 2) for n in names}, varied=fitted), names
    )
    assert held.outcome is Outcome.GOES_ON and held.gap is not None and held.gap[1] > 0
