"""`agentd improve improver`: the improver improved on the invoices example's scripted
problems, made the profile's, shown, taken back and held to its claim; bad input refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from agentd.app.demo import PROFILE
from agentd.home import Home
from improver.seals.settings import INSTRUCTIONS
from improver.tasks.task import load_tasks
from tests.fakeservers import ModelServer

PROPOSER = "script:models/improver.toml"
SENTENCE = "Write one lesson per failure."


def problems(home: Home) -> dict[str, str]:
    folder = home.profiles_dir / PROFILE / "problems"
    return {f"p{i}": f"{folder / f'p{i}-train.json'},{folder / f'p{i}-held.json'}" for i in range(3)}


@pytest.fixture
def given(agentd, home: Home) -> dict[str, str]:
    made = agentd("init", "--example", PROFILE)
    assert made.code == 0, made.err
    return problems(home)


def improve_with(agentd, given: dict[str, str], held_out: str, *args: str):
    return agentd(
        "improve",
        "improver",
        PROFILE,
        "--proposer",
        PROPOSER,
        "--problem",
        given["p0"],
        "--problem",
        given["p1"],
        "--held-out-problem",
        held_out,
        "--runs",
        "4",
        "--seed",
        "0",
        *args,
    )


def improve(agentd, given: dict[str, str], *args: str):
    return improve_with(agentd, given, given["p2"], *args)


def improver_file(home: Home) -> Path:
    return home.profiles_dir / PROFILE / "improver.json"


def test_the_readme_run_keeps_one_lesson_per_failure_applies_it_and_turns_down_the_repeat(
    agentd, home: Home, given
) -> None:
    r = improve(agentd, given, "--rounds", "2", "--apply", "--wallet", PROFILE)
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    first = lines[0]
    assert first.startswith("the improver as it is (") and first.endswith(
        "on the problems to choose on the agent passed 64/128 held-out runs before its changes and 384/768 after, "
        "over 12 grading loops"
    )
    default = first.split("(")[1].split(")")[0]
    assert lines[1] == f"round 1: the improver {default} proposed 1 change to itself"
    kept = lines[2]
    assert kept.startswith(
        f'kept its instructions, adding "{SENTENCE}": with it the agent ended above the mean of both improvers\' '
        "grading loops in 12/12 against 0/12 (stratified test, "
    )
    assert "of them on the problems to choose on, and in 6/6 against 0/6 (stratified test, one-sided p 0.0011" in kept
    assert "on the problems held out (confirmation 1 of 4), as step " in kept
    step = kept.rsplit(" ", 1)[1]
    assert lines[3].startswith("published as claim ")
    assert lines[4] == f"profile {PROFILE}'s improver is now the one step {step} kept"
    now = json.loads(improver_file(home).read_text())
    assert now["instructions"] == f"{INSTRUCTIONS}\n\n{SENTENCE}"
    assert lines[5].startswith("round 2: the improver ") and lines[5] != lines[1]
    assert lines[6] == "turned down: changes nothing: tried already"

    shown = agentd("improve", "improver", PROFILE, "--show", "--json")
    assert shown.code == 0, shown.err
    data = json.loads(shown.out)
    assert lines[5].split()[4] == data["improver"] and data["instructions"].endswith(SENTENCE) and data["exists"]

    listed = agentd("lineage", PROFILE)
    assert listed.code == 0, listed.err
    assert (
        f'improver {lines[5].split()[4]}, step {step}: its instructions, adding "{SENTENCE}" — 12/12 against 0/12 on the '
        in listed.out
    )
    assert "6/6 against 0/6 on those held out (confirmation 1 of 4); claim " in listed.out
    assert [line["step"] for line in json.loads(agentd("lineage", PROFILE, "--json").out)["improvers"]] == [step]
    check = agentd("lineage", PROFILE, "--check")
    assert check.code == 0, check.err
    assert (
        f"improver {data['improver']}, kept as step {step}: on the ledger as claim {lines[3].split()[-1][:16]}"
        in check.out
    )


def test_a_kept_improver_on_the_ledger_that_the_lineage_does_not_hold_fails_the_check(
    agentd, home: Home, given
) -> None:
    assert improve(agentd, given, "--wallet", PROFILE).code == 0
    home.routes.improvers(PROFILE).unlink()
    check = agentd("lineage", PROFILE, "--check")
    assert check.code == 3
    assert "keeps an improver of invoices that" in check.err


def test_undo_takes_back_an_improver_restoring_the_operators_own_file_exactly(agentd, home: Home, given) -> None:
    own = '{"changes_per_round": 2,\n "instructions": "Mend what failed."}\n'  # the operator's own spacing
    improver_file(home).write_text(own)
    before = agentd("improve", "improver", PROFILE, "--show").out
    assert "changes a round 2" in before and "Mend what failed." in before
    # The scripted proposer adds its sentence to the default instructions: a rewrite of these.
    r = improve(agentd, given, "--apply")
    assert r.code == 0, r.err
    assert "kept its instructions, rewritten as" in r.out and "changes a round" not in r.out
    undone = agentd("improve", "undo", PROFILE)
    assert undone.code == 0, undone.err
    assert "improver is" in undone.out and "again, the one it replaced" in undone.out
    assert improver_file(home).read_text() == own
    assert agentd("improve", "improver", PROFILE, "--show").out == before
    again = agentd("improve", "undo", PROFILE)
    assert again.code != 0 and "has no change to take back" in again.err


def test_undo_of_the_first_improver_removes_the_file_it_wrote(agentd, home: Home, given) -> None:
    assert improve(agentd, given, "--apply").code == 0
    assert improver_file(home).exists()
    undone = agentd("improve", "undo", PROFILE, "--json")
    assert undone.code == 0, undone.err
    assert json.loads(undone.out)["improver"]["instructions"] == INSTRUCTIONS
    assert not improver_file(home).exists()


def test_undo_refuses_when_the_improver_was_changed_since(agentd, home: Home, given) -> None:
    assert improve(agentd, given, "--apply").code == 0
    improver_file(home).write_text('{"failed_shown": 2}\n')
    r = agentd("improve", "undo", PROFILE)
    assert r.code == 1 and "was changed since step" in r.err
    assert improver_file(home).read_text() == '{"failed_shown": 2}\n'


def test_show_prints_the_default_improver_in_text(agentd, given) -> None:
    r = agentd("improve", "improver", PROFILE, "--show")
    assert r.code == 0, r.err
    assert "(the default: no improver.json yet)" in r.out.splitlines()[0]
    assert "settings: changes a round 3, failed tasks shown 8, sees what was tried before yes" in r.out
    assert INSTRUCTIONS.splitlines()[0] in r.out


def test_without_apply_the_profile_keeps_its_improver(agentd, home: Home, given) -> None:
    r = improve(agentd, given)
    assert r.code == 0, r.err
    assert "kept its instructions" in r.out and "improver is now" not in r.out
    assert not improver_file(home).exists()


def bad_inputs(home: Home, given: dict[str, str]) -> dict[str, tuple[list[str], str]]:
    train = given["p0"].split(",")[0]
    not_tasks, copy = home.root / "not-tasks.json", home.root / "copy.json"
    not_tasks.write_text('{"hello": "world"}')
    copy.write_text(Path(train).read_text())  # the same tasks in another file
    rest = [f"--problem={given['p1']}", f"--held-out-problem={given['p2']}"]
    return {
        "not two files": ([f"--problem={train}", *rest], "is not two task files"),
        "unreadable": ([f"--problem={train},{home.root / 'missing.json'}", *rest], "missing.json"),
        "not task files": ([f"--problem={train},{not_tasks}", *rest], "not-tasks.json"),
        "one file twice": ([f"--problem={train},{train}", *rest], "names one file twice"),
        "overlapping tasks": ([f"--problem={train},{copy}", *rest], "of HELD is also in TRAIN"),
        "held out is a problem": (
            [f"--problem={given['p0']}", f"--held-out-problem={given['p0']}"],
            "is also a --problem",
        ),
        "no problem": ([f"--held-out-problem={given['p2']}"], "--problem is missing"),
        "a problem twice": (
            [f"--problem={given['p0']}", f"--problem={given['p0']}", f"--held-out-problem={given['p2']}"],
            f"--problem {given['p0']} is given twice: give each problem once",
        ),
        "a held-out problem twice": (
            [f"--problem={given['p0']}", f"--held-out-problem={given['p2']}", f"--held-out-problem={given['p2']}"],
            f"--held-out-problem {given['p2']} is given twice: give each problem once",
        ),
        "a problem twice by another name": (
            [
                f"--problem={given['p0']}",
                f"--problem={given['p0'].replace('/problems/', '/problems/../problems/')}",
                *rest[1:],
            ],
            f"is given twice (the same tasks as --problem {given['p0']}): give each problem once",
        ),
        "held out shares a task": (
            [f"--problem={given['p0']}", f"--held-out-problem={given['p2'].split(',')[0]},{given['p0'].split(',')[1]}"],
            "held-out problems must hold tasks the improvers were not chosen on",
        ),
    }


@pytest.mark.parametrize(
    "case",
    [
        "not two files",
        "unreadable",
        "not task files",
        "one file twice",
        "overlapping tasks",
        "held out is a problem",
        "no problem",
        "held out shares a task",
        "a problem twice",
        "a held-out problem twice",
        "a problem twice by another name",
    ],
)
def test_bad_problems_are_refused_in_one_line_with_exit_2_and_nothing_written(
    agentd, home: Home, given, case: str
) -> None:
    args, expected = bad_inputs(home, given)[case]
    r = agentd("improve", "improver", PROFILE, "--proposer", PROPOSER, *args)
    assert r.code == 2, (r.out, r.err)
    assert r.err.count("\n") == 1 and r.err.startswith("agentd: error: ") and expected in r.err
    assert not home.routes.improvers(PROFILE).exists() and not improver_file(home).exists()


def test_an_unknown_profile_is_refused_with_exit_1_as_in_every_command(agentd, home: Home, given) -> None:
    r = agentd(
        "improve",
        "improver",
        "nobody",
        "--proposer",
        PROPOSER,
        "--problem",
        given["p0"],
        "--held-out-problem",
        given["p2"],
    )
    assert r.code == 1 and r.err.count("\n") == 1 and "no profile named 'nobody'" in r.err
    assert not home.routes.improvers("nobody").exists()


def test_json_streams_each_event_with_its_data(agentd, home: Home, given) -> None:
    r = improve(agentd, given, "--json", "--wallet", PROFILE)
    assert r.code == 0, r.err
    events = [json.loads(line) for line in r.out.splitlines()]
    kept = next(e for e in events if e["event"] == "kept")
    assert kept["choose"]["change"] == [12, 12] and kept["held"]["current"] == [0, 6] and kept["confirmation"] == 1
    assert kept["replications"] == 6 and all(len(seeds) == 6 for seeds in kept["seeds"]["choose"].values())
    assert next(e for e in events if e["event"] == "published")["claim"] == kept["claim"]


def test_a_held_out_task_spent_with_other_held_out_problems_is_refused_in_one_line(agentd, home: Home, given) -> None:
    assert improve(agentd, given, "--confirmations", "1").code == 0  # p2's one confirmation spent, and kept
    # Other held-out problems, of three of p2's held tasks: a set of its own, whose tasks are spent.
    train, held = given["p2"].split(",")
    some = load_tasks(Path(held))
    replace(some, tasks=some.tasks[:3]).save(home.root / "three.json")
    r = improve_with(agentd, given, f"{train},{home.root / 'three.json'}", "--confirmations", "1")
    assert r.code == 1 and r.err.count("\n") == 1 and r.out == ""
    assert r.err.startswith("agentd: error: held-out task ") and r.err.endswith(
        "has spent 1 of 1 confirmations with earlier held-out problems, all that --confirmations 1 allows a task: "
        "give fresh held-out problems\n"
    )


def test_held_out_problems_keep_the_confirmations_first_given(agentd, home: Home, given) -> None:
    assert improve(agentd, given).code == 0
    r = improve(agentd, given, "--confirmations", "8")
    assert r.code != 0 and "were given with --confirmations 4 before" in r.err


def test_sigterm_stops_the_run_cleanly_with_the_stop_recorded(home: Home, given) -> None:
    toml = home.profiles_dir / PROFILE / "profile.toml"
    # An agent model that takes half a second an answer, so SIGTERM lands while an improver is graded.
    toml.write_text(toml.read_text().replace('models = ["script:models/agent.toml"]', 'models = ["openai:slow"]'))
    argv = [
        sys.executable,
        "-m",
        "agentd",
        "--home",
        str(home.root),
        "improve",
        "improver",
        PROFILE,
        "--proposer",
        PROPOSER,
        "--problem",
        given["p0"],
        "--held-out-problem",
        given["p2"],
        "--runs",
        "2",
    ]
    with ModelServer("openai", delay=0.5) as server:
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env={**os.environ, "OPENAI_BASE_URL": server.base_url}
        )
        while len(server.requests) < 2 and proc.poll() is None:
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert b"stopped: interrupted" in out and b"Traceback" not in err
    lines = [json.loads(line) for line in home.routes.improvers(PROFILE).read_text().splitlines()]
    assert lines[-1]["decision"] == "stopped" and not improver_file(home).exists()


def test_a_proposal_holding_a_held_out_problems_task_stops_the_run_and_nothing_is_kept(
    agentd, home: Home, given
) -> None:
    held = json.loads(Path(given["p2"].split(",")[1]).read_text())["tasks"][0][
        "task"
    ]  # "Pay invoice 133 from Soylent, ..."
    leaks = home.profiles_dir / PROFILE / "models" / "leaks.toml"
    leaks.write_text(
        "[[rule]]\n"
        'tools_offered = "propose_improver"\n'
        "[[rule.calls]]\n"
        'name = "propose_improver"\n'
        f"arguments = {{ instructions = {json.dumps(INSTRUCTIONS + ' Remember: ' + held)} }}\n"
        "[[rule]]\n"
        'tools_offered = "propose_change"\n'
        "[[rule.calls]]\n"
        'name = "propose_change"\n'
        'arguments = { lessons = "Pay each invoice promptly." }\n'
    )
    r = agentd(
        "improve",
        "improver",
        PROFILE,
        "--proposer",
        "script:models/leaks.toml",
        "--problem",
        given["p0"],
        "--problem",
        given["p1"],
        "--held-out-problem",
        given["p2"],
        "--runs",
        "2",
        "--rounds",
        "2",
        "--apply",
        "--wallet",
        PROFILE,
    )
    assert r.code == 1, r.err
    stopped = [line for line in r.out.splitlines() if line.startswith("stopped: ")]
    assert stopped == [
        f"stopped: a proposal holds task p2-held-1 of held-out problem {given['p2']}: the held-out tasks reached the proposer; "
        "hold out fresh problems"
    ]
    assert not any(line.startswith(("round ", "kept ", "tried ", "published ")) for line in r.out.splitlines())
    lines = [json.loads(line) for line in home.routes.improvers(PROFILE).read_text().splitlines()]
    assert [line["decision"] for line in lines] == ["stopped"]
    assert not improver_file(home).exists()
    assert json.loads(agentd("lineage", PROFILE, "--json").out)["improvers"] == []


def test_a_budget_smaller_than_one_run_is_refused_before_anything_is_spent(agentd, home: Home, given) -> None:
    r = improve(agentd, given, "--max-tokens", "19999")
    assert r.code == 2 and r.out == ""
    assert r.err == (
        "agentd: error: --max-tokens 19999 is less than one run may cost (the profile's limit of 20000 tokens a run): "
        "give at least 20000\n"
    )
    assert not home.routes.improvers(PROFILE).exists()


@pytest.mark.parametrize("budget", [20000, 150000, 400000])
def test_a_token_budget_stops_the_run_before_it_is_passed(agentd, home: Home, given, budget: int) -> None:
    r = improve(agentd, given, "--max-tokens", str(budget), "--json")
    assert r.code == 1, r.err
    got = [json.loads(line) for line in r.out.splitlines()]
    tokens = next(e for e in got if e["event"] == "tokens")
    used = tokens["tokens_in"] + tokens["tokens_out"]
    stops = [e["text"] for e in got if e["event"] == "stopped"]
    assert stops == [f"stopped: the next step could pass the budget of {budget} tokens ({used} used)"]
    assert 0 < used <= budget if budget > 20000 else used <= budget
    assert not any(e["event"] == "kept" for e in got)
    lines = [json.loads(line) for line in home.routes.improvers(PROFILE).read_text().splitlines()]
    assert lines[-1]["decision"] == "stopped"


def test_help_says_what_replications_and_max_tokens_are(agentd) -> None:
    r = agentd("improve", "improver", "--help")
    assert r.code == 0
    text = " ".join(r.out.split())
    assert "--replications INTEGER RANGE" in text and "[default: 6; x>=1]" in text
    assert "--max-tokens INTEGER RANGE Stop before this many tokens (proposals, grading loops and trials" in text
