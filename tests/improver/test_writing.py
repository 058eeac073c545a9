"""Tasks a model writes: refused at once with why, mended within bounded turns, repeats and
sealed copies left out and counted, a canary's code word stopping everything."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import pytest

from improver.episodes.trials import TaskTally
from improver.episodes.validate import CARELESS_RUN_PASSES, NO_RUN_PASSES
from improver.loop.practice import SHOWN, failed_first, learnability
from improver.loop.writing import (
    MALFORMED,
    REPEATS_CHOSEN,
    REPEATS_SEALED,
    REPEATS_WRITTEN,
    SHARES_SEALED,
    TOOL_NAME,
    Brief,
    SealReached,
    Writing,
    write_tasks,
)
from improver.tasks.task import Task
from tests.improver.taskkit import OPERATOR, ScriptedModel, paid_task, says

CHOSEN = paid_task("work-1", number="23")
SEALED = paid_task("work-2", number="77", amount="13")
CODE_WORD = "kestrel-0badc0ffee"


def written(number: str = "51", **over: Any) -> dict[str, Any]:
    """write_task's arguments for a task that pays invoice NUMBER to initech, borne out."""
    pay = {"to": "initech", "amount": "4"}
    task = {
        "task": f"Pay invoice {number} from Initech, 4 USD, to initech.",
        "standins": [
            {
                "tool": "read_invoice",
                "arguments": {"number": number},
                "answer": f"Invoice {number} from Initech: pens, 4 USD.",
            }
        ],
        "checks": [{"check": "makes", "tool": "pay", "arguments": pay}, {"check": "no_other_changes"}],
        "solution": {
            "calls": [{"tool": "read_invoice", "arguments": {"number": number}}, {"tool": "pay", "arguments": pay}],
            "answer": "Paid 4 USD to initech.",
            "ended": "done",
        },
        "failures": [{"calls": [], "answer": "", "ended": "done", "why": "does nothing and finishes"}],
    }
    return {**task, **over}


def copy_of(task: Task) -> dict[str, Any]:
    return {
        "task": task.task,
        "tools": task.tools,
        "standins": task.standins,
        "checks": task.checks,
        "solution": task.solution.to_json(),
        "failures": [f.to_json() for f in task.failures],
    }


def writes(*tasks: dict[str, Any] | str) -> dict[str, Any]:
    """An answer calling write_task once for each (a str is sent as the raw arguments)."""
    calls = [
        {
            "id": f"w{i}",
            "type": "function",
            "function": {"name": TOOL_NAME, "arguments": t if isinstance(t, str) else json.dumps(t)},
        }
        for i, t in enumerate(tasks, 1)
    ]
    return {"role": "assistant", "content": None, "tool_calls": calls}


def brief(count: int = 4, turns: int = 3) -> Brief:
    return Brief(
        messages=[{"role": "user", "content": f"Write tasks like this one: {CHOSEN.task}"}],
        count=count,
        profile="invoices",
        operator=OPERATOR,
        shown=[CHOSEN],
        chosen=[CHOSEN],
        sealed=[SEALED],
        canary_in=lambda text: "canary-0" if CODE_WORD in text else None,
        source={"practice": True},
        turns=turns,
    )


def run(model: ScriptedModel, b: Brief | None = None) -> Writing:
    return asyncio.run(write_tasks(model, b or brief()))


class Seeing(ScriptedModel):
    """The scripted writer, keeping every conversation it was sent."""

    def __init__(self, replies: list[Any]) -> None:
        super().__init__(replies)
        self.seen: list[list[dict[str, Any]]] = []

    async def complete(self, messages, tools, max_tokens):  # type: ignore[no-untyped-def]
        self.seen.append(json.loads(json.dumps(messages)))
        return await super().complete(messages, tools, max_tokens)


def test_a_task_its_solution_and_failures_bear_out_is_kept_in_the_task_files_format() -> None:
    writing = run(ScriptedModel([writes(written())]))
    [task] = writing.kept
    assert task.name == "written-1" and task.profile == "invoices" and task.source == {"practice": True}
    assert task.tools == CHOSEN.tools  # left out, they are those of the tasks it was shown
    assert writing.borne_out == 1 and writing.turns == 1 and not writing.left_out()
    assert writing.usage.total > 0


def test_each_refused_task_is_told_why_at_once_and_the_writer_mends_it() -> None:
    no_checks = {k: v for k, v in written("52").items() if k != "checks"}
    fails = written("53", solution={"calls": [], "answer": "Paid.", "ended": "done"})
    careless = written("54", checks=[{"check": "finishes"}])
    model = Seeing([writes(no_checks, fails, careless), writes(written("52"), written("53"), written("54"))])
    writing = run(model)
    told = [m["content"] for m in model.seen[1] if m["role"] == "tool"]
    assert told[0].startswith("refused: it is not in the task file's format") and "missing field 'checks'" in told[0]
    assert told[1].startswith("refused: its solution does not pass (not held: it calls pay with")
    assert (
        told[2]
        == "refused: failure 1 (does nothing and finishes) passes it: its checks cannot tell that wrong run from a right one"
    )
    assert "3 of the tasks you wrote were refused" in model.seen[1][-1]["content"]
    assert [t.task for t in writing.kept] == [written(n)["task"] for n in ("52", "53", "54")]
    assert writing.left_out() == {MALFORMED: 1, NO_RUN_PASSES: 1, CARELESS_RUN_PASSES: 1}
    assert writing.refusals == told and writing.turns == 2


@pytest.mark.parametrize(
    "arguments, kind, why",
    [
        ("{not json", MALFORMED, "its arguments are not JSON"),
        ("[1, 2]", MALFORMED, "its arguments must be a JSON object"),
        (written(name="mine"), MALFORMED, "unknown field 'name'"),
        (written(checks=[{"check": "pays"}]), MALFORMED, "unknown check 'pays'"),
        (written(solution={"calls": [], "answer": "", "ended": "gone"}), MALFORMED, "field 'ended' must be one of"),
        (written(checks=[]), NO_RUN_PASSES, "it has no checks"),
        (written(failures=[]), CARELESS_RUN_PASSES, "it has no failures"),
    ],
)
def test_malformed_and_unfounded_tasks_are_refused_with_the_reason(arguments: Any, kind: str, why: str) -> None:
    writing = run(ScriptedModel([writes(arguments), says("I cannot mend it.")]))
    assert writing.left_out() == {kind: 1} and not writing.kept
    assert why in writing.refusals[0]


def test_mending_is_bounded_by_the_writers_turns() -> None:
    careless = written(checks=[{"check": "finishes"}])
    model = ScriptedModel(lambda messages: writes(careless))
    writing = run(model, brief(turns=3))
    assert model.asked == 3 and writing.turns == 3
    assert writing.left_out() == {CARELESS_RUN_PASSES: 3} and not writing.kept


def test_a_writer_that_writes_no_task_gives_nothing_and_is_not_asked_again() -> None:
    model = ScriptedModel([says("Here are some ideas for tasks.")])
    writing = run(model)
    assert model.asked == 1 and writing.attempts == [] and not writing.kept and not writing.left_out()


def test_no_more_tasks_than_asked_for_are_read() -> None:
    writing = run(ScriptedModel([writes(written("51"), written("52"), written("53"))]), brief(count=2))
    assert len(writing.attempts) == 2 and len(writing.kept) == 2


def test_repeats_of_a_task_to_choose_on_another_written_task_or_a_sealed_task_are_left_out() -> None:
    overlap = written("61", task=f"Please {SEALED.task.lower()} Thank you.")
    model = Seeing([writes(copy_of(CHOSEN), copy_of(SEALED), written("51"), written("51"), overlap, written("62"))])
    writing = run(model, brief(count=6))
    assert writing.left_out() == {REPEATS_CHOSEN: 1, REPEATS_SEALED: 1, REPEATS_WRITTEN: 1, SHARES_SEALED: 1}
    assert [t.task for t in writing.kept] == [written("51")["task"], written("62")["task"]]
    assert writing.borne_out == 6  # each bore itself out; the repeats were left out after
    # The writer is never told a sealed task was what its task repeated.
    assert model.asked == 1 and not writing.refusals


def test_runs_of_words_the_shown_tasks_hold_too_do_not_count_as_sealed() -> None:
    # A sealed task asking what a shown task asks, with other stand-ins: not the same task.
    twin = replace(
        CHOSEN, name="work-9", standins=[{"tool": "read_invoice", "arguments": {"number": "23"}, "answer": "Gone."}]
    )
    shared = written("63", task=f"{CHOSEN.task} Then check it.")
    b = replace(brief(), sealed=[twin])
    assert run(ScriptedModel([writes(shared)]), b).left_out() == {}
    assert run(ScriptedModel([writes(shared)]), replace(b, shown=[])).left_out() == {SHARES_SEALED: 1}


@pytest.mark.parametrize("where", ["text", "task", "beyond the count"])
def test_a_canarys_code_word_in_anything_the_writer_says_stops_everything(where: str) -> None:
    leak = written(task=f"Say {CODE_WORD}.")
    answer = {
        "text": {**writes(written()), "content": f"The word is {CODE_WORD}."},
        "task": writes(leak),
        "beyond the count": writes(written("51"), leak),
    }[where]
    with pytest.raises(
        SealReached, match="a written task holds the code word of canary-0: the sealed tasks have reached the writer"
    ):
        run(ScriptedModel([answer]), brief(count=1))


def test_learnability_is_highest_at_half_and_nil_at_either_end() -> None:
    assert learnability(1, 2) == 1.0
    assert learnability(0, 4) == 0.0 and learnability(4, 4) == 0.0
    assert learnability(1, 4) == pytest.approx(0.75)
    assert learnability(0, 0) == 0.0


def test_the_writer_is_shown_the_tasks_the_agent_fails_first_at_most_a_dozen() -> None:
    tasks = [paid_task(f"work-{i}", number=str(100 + i)) for i in range(20)]
    tallies = {t.name: TaskTally(passed=2) for t in tasks}
    tallies["work-7"] = TaskTally(passed=0, failed=2)
    tallies["work-15"] = TaskTally(passed=1, failed=1)
    shown = failed_first(tasks, tallies)
    assert len(shown) == SHOWN and [t.name for t in shown[:3]] == ["work-7", "work-15", "work-0"]
