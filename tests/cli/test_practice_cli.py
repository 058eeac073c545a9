"""`agentd improve practice` and `improve run --practice`, as an operator runs them."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from agentd.app.adopt import lineage_of
from agentd.app.demo import PROFILE
from agentd.app.practice import practise
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.providers import make_model
from improver.base.protocol import Completion, TokenUsage
from improver.loop.practice import PracticeRequest
from improver.loop.writing import TOOL_NAME
from improver.seals.seal import code_word
from improver.tasks.task import TaskSet, load_tasks
from tests.cli.test_loop_cli import Capturing
from tests.cli.test_wallet_cli import one_error_line
from tests.examplekit import LESSON, nothing_sealed_in, sealed

WRITER = "script:models/writer.toml"


def practice(agentd, *args: str) -> Any:
    return agentd("improve", "practice", PROFILE, *args)


class Writes:
    """A writer answering every turn with these write_task arguments (JSON text)."""

    name = "script:test-writer"

    def __init__(self, *arguments: dict[str, Any] | str) -> None:
        self.arguments = arguments

    async def complete(self, messages, tools, max_tokens) -> Completion:  # type: ignore[no-untyped-def]
        calls = [
            {
                "id": f"w{i}",
                "type": "function",
                "function": {"name": TOOL_NAME, "arguments": a if isinstance(a, str) else json.dumps(a)},
            }
            for i, a in enumerate(self.arguments, 1)
        ]
        return Completion({"role": "assistant", "content": None, "tool_calls": calls}, TokenUsage(1, 1), self.name)


def as_written(task: Any) -> dict[str, Any]:
    return {
        "task": task.task,
        "standins": task.standins,
        "checks": task.checks,
        "solution": task.solution.to_json(),
        "failures": [f.to_json() for f in task.failures],
    }


def test_the_readme_run_keeps_the_task_the_agent_fails_and_says_why_of_the_rest(agentd, home: Home) -> None:
    sealed(home)
    r = practice(agentd, "--writer", WRITER, "--count", "4", "--runs", "2")
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert lines[0] == f"{WRITER} wrote 4 tasks in 2 turns, 3 borne out by their own solutions and failures"
    assert lines[1] == (
        "refused, as it was told: failure 1 (does nothing and finishes) passes it: its checks cannot tell "
        "that wrong run from a right one"
    )
    assert set(lines[2:5]) == {
        "left out: 1 the same as another task it wrote",
        "left out: 1 a careless run passes it",
        "left out: 1 the agent as it is passes in every run of 2",
    }
    assert "ranked by learnability 4·p·(1−p)" in lines[5]
    assert lines[6].split() == [
        "practice-1",
        "p",
        "=",
        "0/2",
        "learnability",
        "0.00",
        "Pay",
        "invoice",
        "41",
        "from",
        "Vandelay,",
        "17",
        "USD,",
        "to",
        "vandelay.",
    ]
    path = Path(lines[7].removeprefix("wrote "))
    kept = load_tasks(path)
    assert path == home.routes.practice(PROFILE, kept.digest) and kept.validated
    assert [t.name for t in kept.tasks] == ["practice-1"] and kept.tasks[0].source["passed"] == [0, 2]
    assert f"--practice {path}" in lines[8]


def test_json_names_the_set_by_its_digest_and_out_puts_it_where_asked(agentd, home: Home) -> None:
    sealed(home)
    out = home.root / "mine.json"
    r = practice(agentd, "--writer", WRITER, "--out", str(out), "--json")
    assert r.code == 0, r.err
    got = json.loads(r.out)
    assert got["written"] == 4 and got["borne_out"] == 3 and got["turns"] == 2
    assert got["left_out"] == {
        "the same as another task it wrote": 1,
        "a careless run passes it": 1,
        "the agent as it is passes in every run": 1,
    }
    assert [k["task"] for k in got["kept"]] == ["practice-1"] and got["kept"][0]["learnability"] == 0.0
    assert got["file"] == str(out) and got["digest"] == load_tasks(out).digest
    assert got["ranked_by"] == "learnability 4·p·(1−p)"


def test_by_default_the_profiles_own_model_writes_and_one_that_writes_no_task_keeps_nothing(agentd, home: Home) -> None:
    sealed(home)
    r = practice(agentd)
    assert r.code == 1
    assert r.out == "script:models/agent.toml wrote no task (no write_task call); nothing was kept\n"
    assert not list(home.routes.root.glob(f"{PROFILE}-practice-*"))


def test_the_writer_is_shown_tasks_to_choose_on_the_failed_first_and_never_a_sealed_one(home: Home) -> None:
    seal = sealed(home).seal
    writer = Capturing(make_model(WRITER, home, base_dir=home.profiles_dir / PROFILE))
    done = practise(home, PROFILE, PracticeRequest(count=4, runs=2), WRITER, writer=writer)
    assert done.path is not None and len(writer.seen) == 2
    shown = "\n".join(writer.seen)
    first = json.loads(writer.seen[0])[0][1]["content"]
    train = seal.train()
    failed = [t.task for t in train.tasks if t.source["outcome"] == "bad"]
    passed = [t.task for t in train.tasks if t.source["outcome"] == "good"]
    assert max(first.index(t) for t in failed) < min(first.index(t) for t in passed)
    assert "You pay our suppliers' invoices." in first
    nothing_sealed_in(shown, seal)


def test_a_canarys_code_word_in_a_written_task_stops_it_and_writes_nothing(home: Home) -> None:
    seal = sealed(home).seal
    word = code_word(seal.canaries[0])
    task = {**as_written(seal.train().tasks[0]), "task": f"Say {word} and pay invoice 21."}
    stopped = "stopped: a written task holds the code word of canary-0: the sealed tasks have reached the writer; seal fresh tasks"
    with pytest.raises(AgentdError) as caught:
        practise(home, PROFILE, PracticeRequest(), WRITER, writer=Writes(task))
    assert str(caught.value) == stopped
    assert not list(home.routes.root.glob(f"{PROFILE}-practice-*"))


def test_a_copy_of_a_sealed_task_a_failing_solution_and_a_malformed_task_are_left_out(home: Home) -> None:
    seal = sealed(home).seal
    copy = as_written(seal.real_tasks[0])
    failing = {
        **as_written(seal.train().tasks[0]),
        "task": "Pay invoice 91 now.",
        "solution": {"calls": [], "answer": "", "ended": "done"},
    }
    done = practise(home, PROFILE, PracticeRequest(runs=1), WRITER, writer=Writes(copy, failing, "{"))
    assert done.path is None and not done.practice.ranked
    # Told of the two refused, it wrote all three again on each of its three turns; on the
    # last only two were read, as two of the four asked for were borne out by then.
    assert done.practice.writing.turns == 3
    assert done.practice.left_out == {
        "a sealed task word for word": 3,
        "no run passes it": 3,
        "not in the task file's format": 2,
    }


def test_run_with_practice_chooses_on_them_too_and_the_kept_step_names_the_set(agentd, home: Home) -> None:
    seal = sealed(home).seal
    path = Path(practice(agentd, "--writer", WRITER).out.splitlines()[7].removeprefix("wrote "))
    digest = load_tasks(path).digest
    r = agentd(
        "improve",
        "run",
        PROFILE,
        "--proposer",
        "script:models/proposer.toml",
        "--runs",
        "2",
        "--baseline-runs",
        "2",
        "--wallet",
        PROFILE,
        "--practice",
        str(path),
        "--json",
    )
    assert r.code == 0, r.err
    got = [json.loads(line) for line in r.out.splitlines()]
    assert (got[0]["passed"], got[0]["judged"]) == (6, 14)  # 6 tasks to choose on and 1 practice task, 2 runs each
    kept = next(e for e in got if e["event"] == "kept")
    assert kept["after"]["lessons"] == LESSON and kept["practice"] == digest
    assert kept["text"].endswith(f", chosen beside practice tasks {digest[:16]}")
    assert kept["choose"]["change"] == [14, 14]
    assert kept["sealed"]["change"][1] == 12  # the sealed tasks alone: 6 of them, 2 runs each
    claim = json.loads(agentd("ledger", "show", kept["claim"], "--json").out)
    assert claim["body"]["practice"] == digest
    assert [line["practice"] for _, line in lineage_of(home, PROFILE).kept()] == [digest]
    assert agentd("lineage", PROFILE, "--check").code == 0
    assert seal.state().spent == 1


def test_a_practice_set_holding_a_sealed_task_or_another_profiles_is_refused(agentd, home: Home) -> None:
    seal = sealed(home).seal
    leaked = home.root / "leaked.json"
    TaskSet(PROFILE, seal.sealed.operator, (replace(seal.real_tasks[0], name="practice-1"),), validated=True).save(
        leaked
    )
    r = agentd("improve", "run", PROFILE, "--proposer", "script:models/proposer.toml", "--practice", str(leaked))
    assert r.code == 1 and "practice task practice-1 is a sealed task" in r.err
    other = home.root / "other.json"
    TaskSet("someone", "", (), validated=True).save(other)
    r = agentd("improve", "run", PROFILE, "--proposer", "script:models/proposer.toml", "--practice", str(other))
    assert r.code == 1 and "practice tasks of profile someone, not invoices" in r.err
    assert seal.state().spent == 0 and not seal.state().asked


def test_writer_turns_bound_the_writers_answers(agentd, home: Home) -> None:
    sealed(home)
    # One answer: the task it is told is refused stays refused, unmended.
    r = practice(agentd, "--writer", WRITER, "--writer-turns", "1", "--json")
    assert r.code == 0, r.err
    got = json.loads(r.out)
    assert got["turns"] == 1 and got["written"] == 3 and got["borne_out"] == 2
    assert got["left_out"] == {"the same as another task it wrote": 1, "a careless run passes it": 1}
    assert [k["task"] for k in got["kept"]] == ["practice-1"]


def test_a_writer_told_it_has_more_answers_is_told_how_many(home: Home) -> None:
    sealed(home)
    writer = Capturing(make_model(WRITER, home, base_dir=home.profiles_dir / PROFILE))
    practise(home, PROFILE, PracticeRequest(count=4, runs=2, turns=5), WRITER, writer=writer)
    assert "You have 4 more answers." in writer.seen[-1]


@pytest.mark.parametrize("value", ["0", "-1", "two"])
def test_writer_turns_below_one_are_refused_in_one_line_with_exit_2(agentd, home: Home, value: str) -> None:
    sealed(home)
    r = practice(agentd, "--writer", WRITER, "--writer-turns", value)
    assert "Invalid value for '--writer-turns'" in one_error_line(r, code=2)
    assert not list(home.routes.root.glob(f"{PROFILE}-practice-*"))
