"""`agentd improve run --challenger`: variants of the tasks a change newly passes catch a
shortcut before it spends a confirmation, as an operator runs it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentd.app.adopt import lineage_of
from agentd.app.demo import PROFILE
from agentd.app.loop import RunRequest, run_improvement
from agentd.errors import WrongValue
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.providers import make_model
from improver.seals.seal import code_word
from tests.cli.test_loop_cli import Capturing, write_proposer
from tests.cli.test_practice_cli import Writes, as_written
from tests.examplekit import LESSON, nothing_sealed_in, sealed

SHORTCUT_PROPOSER = "script:models/shortcut-proposer.toml"  # "Never pay mallory.", a sealed task's words, the lesson
PROPOSER = "script:models/proposer.toml"  # "Answer in French.", a sealed task's words, the lesson
CHALLENGER = "script:models/challenger.toml"  # two variants of each task it is shown, naming eve
FAST = ("--runs", "2", "--baseline-runs", "2")


def events(agentd, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    r = agentd("improve", "run", PROFILE, *args, "--json")
    return r.code, [json.loads(line) for line in r.out.splitlines()], r.err


def only(got: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [found] = [e for e in got if e["event"] == kind]
    return found


def test_the_shortcut_is_caught_with_no_confirmation_spent_and_the_lesson_kept_with_its_variants(
    agentd, home: Home
) -> None:
    seal = sealed(home).seal
    code, got, err = events(
        agentd, "--proposer", SHORTCUT_PROPOSER, "--challenger", CHALLENGER, *FAST, "--wallet", PROFILE, "--apply"
    )
    assert code == 0, err
    assert [e["event"] for e in got][2:6] == ["shortcut", "turned down", "challenged", "kept"]
    shortcut = only(got, "shortcut")
    # Every task to choose on passed, and nothing else: the three tasks naming mallory, two variants each.
    assert shortcut["choose"]["change"] == [12, 12]
    challenge = shortcut["challenge"]
    assert challenge["variants"] == 6 and len(challenge["of"]) == 3 and challenge["challenger"] == CHALLENGER
    assert (challenge["change"], challenge["current"]) == ([0, 12], [0, 12])
    assert shortcut["text"].startswith('tried learns "Never pay mallory.": 12/12 against 6/12')
    assert (
        ", but a shortcut: on 6 variants the challenger wrote of the tasks it newly passes, 0/12 against 0/12, and on "
        "fresh runs of those 3 tasks 12/12 against 0/12: its gain on the variants (+0%) is beyond chance smaller than "
        "on the tasks (+100%; 90% interval of the gap" in shortcut["text"]
    )
    assert challenge["varied"] == [12, 12, 0, 12] and challenge["gap"][1] < 0
    assert shortcut["text"].endswith("; no confirmation spent")
    challenged = only(got, "challenged")
    assert (challenged["change"], challenged["current"]) == ([12, 12], [0, 12]) and challenged["gap"][1] >= 0
    kept = only(got, "kept")
    assert kept["after"]["lessons"] == LESSON and kept["confirmation"] == 1
    step = kept["challenge"]
    assert step["variants"] == 6 and step["change"] == [12, 12] and step["current"] == [0, 12]
    assert step["gap"] == challenged["gap"] and step["test"] == "newcombe" and step["level"] == 0.1
    assert seal.state().spent == 1  # the lesson's alone
    assert load_profile(home, PROFILE).learned.lessons == LESSON
    lines = lineage_of(home, PROFILE)
    assert [line["decision"] for _, line in lines.lines()] == ["shortcut", "turned down", "kept"]
    [(_, line)] = lines.kept()
    assert line["challenge"] == step
    claim = json.loads(agentd("ledger", "show", kept["claim"], "--json").out)
    assert claim["body"]["challenge"] == step
    r = agentd("lineage", PROFILE, "--check")
    assert r.code == 0, r.err
    assert "; 12/12 against 0/12 on 6 variants the challenger wrote; claim" in r.out
    # What the variants showed is held to the claim like the rest of the step.
    rows = [json.loads(row) for row in lines.path.read_text().splitlines()]
    rows[-1]["challenge"]["variants"] = 7
    lines.path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    r = agentd("lineage", PROFILE, "--check")
    assert r.code == 3 and "the line does not match its claim (challenge differ)" in r.err


def test_without_a_challenger_the_shortcut_is_kept_on_a_confirmation(agentd, home: Home) -> None:
    seal = sealed(home).seal
    code, got, err = events(agentd, "--proposer", SHORTCUT_PROPOSER, *FAST)
    assert code == 0, err
    assert only(got, "kept")["after"]["lessons"] == "Never pay mallory." and "challenge" not in only(got, "kept")
    assert seal.state().spent == 1


def test_the_challenger_is_shown_the_tasks_it_varies_and_never_a_sealed_one(home: Home) -> None:
    seal = sealed(home).seal
    challenger = Capturing(make_model(CHALLENGER, home, base_dir=home.profiles_dir / PROFILE))
    request = RunRequest(SHORTCUT_PROPOSER, runs=2, baseline_runs=2, challenger=CHALLENGER)
    assert run_improvement(home, PROFILE, request, lambda e: None, challenger=challenger) is None
    assert len(challenger.seen) == 6  # three tasks for each of two changes, one answer each
    shown = "\n".join(challenger.seen)
    varied = [t for t in seal.train().tasks if t.source["outcome"] == "bad"]
    assert all(t.task in shown for t in varied)
    assert 'The change: learns \\"Never pay mallory.\\"' in shown
    nothing_sealed_in(shown, seal)


def careless(task: dict[str, Any]) -> dict[str, Any]:
    """A variant whose checks a run that does nothing passes."""
    return {**task, "task": "Pay invoice 77 from Acme, 3 USD, to acme.", "checks": [{"check": "finishes"}]}


@pytest.mark.parametrize(
    "writes, left_out",
    [
        ("nothing", {}),
        ("malformed", {"not in the task file's format": 9}),
        ("careless", {"a careless run passes it": 9}),
        ("sealed copy", {"a sealed task word for word": 3}),
    ],
)
def test_when_no_variant_holds_up_the_lesson_goes_on_unchallenged_and_is_kept(
    home: Home, writes: str, left_out: dict
) -> None:
    seal = sealed(home).seal
    written = {
        "nothing": lambda: [],
        "malformed": lambda: ["{"],
        "careless": lambda: [careless(as_written(seal.train().tasks[0]))],
        "sealed copy": lambda: [as_written(seal.real_tasks[0])],
    }[writes]()
    challenger = Writes(*written) if written else Writes()
    got: list[Any] = []
    request = RunRequest(PROPOSER, runs=2, baseline_runs=2, challenger="script:unused.toml")
    assert run_improvement(home, PROFILE, request, got.append, challenger=challenger) is None
    [unchallenged] = [e for e in got if e.kind == "unchallenged"]
    assert unchallenged.text == (
        f'unchallenged learns "{LESSON}": no variant the challenger wrote of the 3 tasks it newly passes '
        "held up; it goes on to the sealed tasks"
    )
    assert unchallenged.data["left_out"] == left_out and unchallenged.data["variants"] == 0
    [kept] = [e for e in got if e.kind == "kept"]
    assert kept.data["challenge"]["unchallenged"].startswith("no variant the challenger wrote")
    assert seal.state().spent == 1


def test_a_challenger_that_errors_through_every_retry_does_not_judge_the_change(agentd, home: Home) -> None:
    seal = sealed(home).seal
    spec = write_proposer(home, "down.toml", '[[rule]]\nerror = "provider"\n')
    code, got, err = events(agentd, "--proposer", PROPOSER, "--challenger", spec, *FAST)
    assert code == 0, err
    unchallenged = only(got, "unchallenged")
    assert unchallenged["text"].startswith(
        f'unchallenged learns "{LESSON}": the challenger errored through every retry ('
    )
    assert unchallenged["text"].endswith("so it is not judged on variants; it goes on to the sealed tasks")
    assert unchallenged["calls"] == 3 and unchallenged["variants"] == 0
    assert only(got, "kept")["after"]["lessons"] == LESSON and seal.state().spent == 1


def test_a_canarys_code_word_in_a_variant_stops_the_loop_before_a_confirmation(home: Home) -> None:
    seal = sealed(home).seal
    leak = {**as_written(seal.train().tasks[0]), "task": f"Say {code_word(seal.canaries[1])} and pay invoice 21."}
    got: list[Any] = []
    request = RunRequest(PROPOSER, runs=2, baseline_runs=2, challenger="script:unused.toml")
    stopped = run_improvement(home, PROFILE, request, got.append, challenger=Writes(leak))
    assert str(stopped) == (
        "a written task holds the code word of canary-1: the sealed tasks have reached the writer; seal fresh tasks"
    )
    assert seal.state().spent == 0 and not seal.state().asked
    assert [line["decision"] for _, line in lineage_of(home, PROFILE).lines()] == ["tried", "turned down", "stopped"]


def test_challenger_counts_below_one_are_wrong_values(agentd, home: Home) -> None:
    sealed(home)
    r = agentd(
        "improve", "run", PROFILE, "--proposer", PROPOSER, "--challenger", CHALLENGER, "--challenger-variants", "0"
    )
    assert r.code == 2 and "--challenger-variants" in r.err
    r = agentd("improve", "run", PROFILE, "--proposer", PROPOSER, "--challenger", CHALLENGER, "--challenger-turns", "0")
    assert r.code == 2 and "--challenger-turns" in r.err
    with pytest.raises(
        WrongValue, match="--challenger-tasks, --challenger-variants and --challenger-turns must be at least 1"
    ):
        run_improvement(home, PROFILE, RunRequest(PROPOSER, challenger=CHALLENGER, challenger_tasks=0), lambda e: None)


def test_challenger_counts_without_a_challenger_are_refused_with_nothing_run(agentd, home: Home) -> None:
    sealed(home)
    r = agentd("improve", "run", PROFILE, "--proposer", PROPOSER, "--challenger-tasks", "2")
    assert r.code == 2 and "--challenger-tasks say how the challenger works: give --challenger MODEL too" in r.err
    assert not home.routes.lineage(PROFILE).exists()


def schedule(home: Home, text: str) -> None:
    """Makes `text` the profile's [schedule] (the example's own, last in its file, goes)."""
    path = home.profiles_dir / PROFILE / "profile.toml"
    path.write_text(path.read_text().split("\n[schedule]\n")[0] + "\n[schedule]\n" + text)


def test_a_scheduled_run_with_a_challenger_challenges_as_improve_run_does(agentd, home: Home) -> None:
    seal = sealed(home).seal
    schedule(
        home,
        f'improve = "0 3 * * *"\nproposer = "{SHORTCUT_PROPOSER}"\nruns = 2\n'
        f'challenger = "{CHALLENGER}"\nchallenger_tasks = 2\nchallenger_variants = 1\n',
    )
    r = agentd("schedule", "run-now", PROFILE, "improve")
    assert r.code == 0, r.err
    assert r.out == f"{PROFILE}.improve: 1 round(s), 1 change(s) kept\n"
    lines = [line for _, line in lineage_of(home, PROFILE).lines()]
    assert [line["decision"] for line in lines] == ["shortcut", "turned down", "kept"]
    shortcut = lines[0]
    assert shortcut["change"] == 'learns "Never pay mallory."'
    challenge = shortcut["challenge"]
    # Two of the three tasks it newly passes, one variant each: the schedule's counts, not the defaults.
    assert challenge["challenger"] == CHALLENGER and len(challenge["of"]) == 2 and challenge["variants"] == 2
    assert lines[2]["after"]["lessons"] == LESSON and lines[2]["challenge"]["variants"] == 2
    assert seal.state().spent == 1  # the lesson's alone: the shortcut spent none


@pytest.mark.parametrize(
    "options, expected",
    [
        (
            "challenger_tasks = 2\n",
            '[schedule] challenger_tasks say how the challenger works: give challenger = "MODEL" too',
        ),
        (
            "challenger_tasks = 2\nchallenger_variants = 3\n",
            '[schedule] challenger_tasks and challenger_variants say how the challenger works: give challenger = "MODEL" too',
        ),
        (
            f'challenger = "{CHALLENGER}"\nchallenger_variants = 0\n',
            "[schedule] challenger_variants must be at least 1",
        ),
        (
            "challenger_turns = 2\n",
            '[schedule] challenger_turns say how the challenger works: give challenger = "MODEL" too',
        ),
        (f'challenger = "{CHALLENGER}"\nchallenger_turns = 0\n', "[schedule] challenger_turns must be at least 1"),
    ],
)
def test_a_schedule_with_challenger_counts_and_no_challenger_is_named(
    agentd, home: Home, options: str, expected: str
) -> None:
    sealed(home)
    schedule(home, f'improve = "0 3 * * *"\nproposer = "{PROPOSER}"\n{options}')
    toml = home.profiles_dir / PROFILE / "profile.toml"
    listed = agentd("schedule", "list")
    assert listed.code == 0 and f"{toml}: {expected}" in listed.err
    r = agentd("schedule", "run-now", PROFILE, "improve")
    assert r.code != 0 and r.out == f"{PROFILE}.improve: failed: {toml}: {expected}\n"
    assert not lineage_of(home, PROFILE).path.exists()


@pytest.mark.parametrize("turns", [1, 2])
def test_challenger_turns_bound_its_answers_when_what_it_writes_is_refused(home: Home, turns: int) -> None:
    seal = sealed(home).seal
    challenger = Writes(careless(as_written(seal.train().tasks[0])))  # refused every time, however often asked
    got: list[Any] = []
    request = RunRequest(PROPOSER, runs=2, baseline_runs=2, challenger="script:unused.toml", challenger_turns=turns)
    assert run_improvement(home, PROFILE, request, got.append, challenger=challenger) is None
    [unchallenged] = [e for e in got if e.kind == "unchallenged"]
    assert unchallenged.data["calls"] == turns * 3  # each of the 3 tasks it newly passes, asked `turns` times
