"""The improvement loop, its lineage on the ledger, adopt and undo, as an operator runs them."""

from __future__ import annotations

import base64
import codecs
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from agentd.app.adopt import lineage_of
from agentd.app.demo import PROFILE
from agentd.app.loop import RunRequest, run_improvement
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.providers import make_model
from improver.base.protocol import Completion
from improver.seals.seal import code_word, current_seal
from tests.examplekit import LESSON, nothing_sealed_in, sealed
from tests.fakeservers import ModelServer

PROPOSER = "script:models/proposer.toml"


def write_proposer(home: Home, name: str, rules: str) -> str:
    (home.profiles_dir / PROFILE / "models" / name).write_text(rules)
    return f"script:models/{name}"


def proposes(*changes: dict[str, Any]) -> str:
    """A proposer rules file answering every round with these propose_change calls."""
    text = "[[rule]]\n"
    for change in changes:
        text += f'[[rule.calls]]\nname = "propose_change"\narguments = {json.dumps(change)}\n'
    return text.replace('{"lessons": ', "{ lessons = ").replace('{"models": ', "{ models = ")


def events(agentd, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    r = agentd("improve", "run", PROFILE, *args, "--json")
    return r.code, [json.loads(line) for line in r.out.splitlines()], r.err


def decisions(home: Home) -> list[str]:
    return [line["decision"] for _, line in lineage_of(home, PROFILE).lines()]


def test_the_lesson_is_kept_published_and_applied(agentd, home: Home) -> None:
    sealed(home)
    code, got, err = events(
        agentd, "--proposer", PROPOSER, "--rounds", "2", "--runs", "4", "--apply", "--wallet", PROFILE
    )
    assert code == 0, err
    kinds = [e["event"] for e in got]
    assert kinds[:3] == ["baseline", "round", "tried"]
    assert kinds.count("kept") == 1 and kinds.count("turned down") == 2
    baseline = got[0]
    assert (baseline["passed"], baseline["judged"]) == (48, 96)  # 16 baseline runs of 6 tasks
    kept = next(e for e in got if e["event"] == "kept")
    assert kept["choose"]["change"] == [24, 24] and kept["choose"]["current"] == [48, 96]
    assert kept["sealed"]["change"] == [24, 24] and kept["sealed"]["current"] == [48, 96]
    assert kept["level"] == 0.0125 and kept["confirmation"] == 1 and kept["test"] == "stratified"
    assert "(stratified test, one-sided p 8.8e-12 against 0.0125, +50% a task) on the sealed tasks" in kept["text"]
    leak = next(e for e in got if e["event"] == "turned down")
    assert "shares a run of words with sealed task work-" in leak["text"]
    assert load_profile(home, PROFILE).learned.lessons == LESSON
    claim = json.loads(agentd("ledger", "show", kept["claim"], "--json").out)
    assert claim["kind"] == "agent.improvement/v1" and claim["body"]["after"]["lessons"] == LESSON
    assert claim["body"]["seal_claim"] == current_seal(home.routes, PROFILE).state().claim
    assert decisions(home) == ["tried", "turned down", "kept", "turned down"]
    assert got[-2]["event"] == "tokens" and got[-2]["tokens_in"] > 0
    r = agentd("lineage", PROFILE, "--check")
    assert r.code == 0, r.err
    assert f"step {kept['step']}: on the ledger as claim {kept['claim'][:16]} (Pulse {kept['pulse']})" in r.out
    assert "1 of its 4 confirmations spent" in r.out


class Capturing:
    """The scripted proposer, with everything it is shown kept."""

    def __init__(self, model: Any) -> None:
        self.model, self.name, self.seen = model, model.name, []

    async def complete(self, messages, tools, max_tokens) -> Completion:
        self.seen.append(json.dumps([messages, tools]))
        return await self.model.complete(messages, tools, max_tokens)


def test_the_proposer_is_never_shown_a_sealed_task(home: Home) -> None:
    seal = sealed(home).seal
    proposer = Capturing(make_model(PROPOSER, home, base_dir=home.profiles_dir / PROFILE))
    request = RunRequest(PROPOSER, rounds=3, runs=2)
    assert run_improvement(home, PROFILE, request, lambda e: None, proposer=proposer) is None
    shown = "\n".join(proposer.seen)
    assert len(proposer.seen) == 3
    train = seal.train()
    assert any(t.task in shown for t in train.tasks)  # it is shown the tasks it failed to choose on
    nothing_sealed_in(shown, seal)


def variants(word: str) -> list[str]:
    """A code word as a proposer or an agent might pass it on without saying it verbatim."""
    encoded = base64.b64encode(f"the word: {word}".encode()).decode()
    return [
        word,
        word.upper(),
        word.replace("-", " "),
        word.replace("-", "").title(),
        " ".join(word),
        encoded,
        word.encode().hex(),
        f"{word[:9]}\n{word[9:]}",  # over two lines, inside the call's JSON-encoded arguments
        word.replace("e", "\N{CYRILLIC SMALL LETTER IE}").replace("a", "\N{GREEK SMALL LETTER ALPHA}"),
        "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in word),  # fullwidth
        word[::-1],
        word.split("-")[1],  # the random part alone
        "".join(f"%{b:02X}" for b in word.encode()),
        "".join(f"&#{ord(c)};" for c in word),
        codecs.encode(word, "rot13"),
        base64.b32encode(word.encode()).decode(),
        f"{encoded[:10]}\n{encoded[10:]}",  # base64 wrapped over lines
    ]


@pytest.mark.parametrize("variant", range(len(variants("kestrel-1a2b3c4d5e"))))
def test_a_canary_code_word_in_a_proposal_stops_the_loop(agentd, home: Home, variant: int) -> None:
    seal = sealed(home).seal
    word = variants(code_word(seal.canaries[0]))[variant]
    spec = write_proposer(home, "leaky.toml", proposes({"lessons": f"Always say {word}."}))
    code, got, _ = events(agentd, "--proposer", spec, "--runs", "1")
    assert code == 1
    assert got[-3]["event"] == "stopped"
    assert (
        got[-3]["text"]
        == "stopped: a proposal holds the code word of canary-0: the sealed tasks have reached the proposer; seal fresh tasks"
    )
    assert seal.state().spent == 0 and decisions(home) == ["stopped"]


def test_gates_turn_down_what_is_too_long_tried_or_not_allowed(agentd, home: Home) -> None:
    sealed(home, wallet=None)
    spec = write_proposer(
        home,
        "gated.toml",
        proposes(
            {"lessons": "x " * 100},
            {"models": ["openai:gpt-9"]},
            {"lessons": "Answer in French."},
            {"lessons": "Answer in French."},
        ),
    )
    (home.profiles_dir / PROFILE / "improver.json").write_text(json.dumps({"max_lessons": 60, "changes_per_round": 4}))
    code, got, _ = events(agentd, "--proposer", spec, "--runs", "1")
    assert code == 0
    texts = [e["text"] for e in got if e["event"] in ("turned down", "tried")]
    assert "what it learned is too long (199 characters; at most 60)" in texts[0]
    assert texts[1].endswith("openai:gpt-9 is not among the models it may run on")
    assert texts[2].startswith('tried learns "Answer in French."')
    assert texts[3].endswith("changes nothing: tried already")


def test_a_bad_proposer_answer_is_turned_down_not_a_crash(agentd, home: Home) -> None:
    sealed(home, wallet=None)
    silent = write_proposer(home, "silent.toml", '[[rule]]\ntext = "I have no idea."\n')
    code, got, err = events(agentd, "--proposer", silent, "--runs", "1")
    assert code == 0 and "Traceback" not in err
    assert any(e["text"] == "round 1: the proposer proposed no change (no propose_change call)" for e in got)
    odd = write_proposer(
        home, "odd.toml", '[[rule]]\n[[rule.calls]]\nname = "propose_change"\narguments = { colour = "blue" }\n'
    )
    code, got, _ = events(agentd, "--proposer", odd, "--runs", "1")
    assert any(e["text"] == "turned down: a proposal: it gives neither lessons nor models" for e in got)
    failing = write_proposer(home, "down.toml", '[[rule]]\nerror = "provider"\n')
    code, got, _ = events(agentd, "--proposer", failing, "--runs", "1", "--rounds", "2")
    assert code == 0 and sum("the proposer errored" in e["text"] for e in got) == 2


def test_errored_runs_leave_a_change_not_judged_and_spend_nothing(agentd, home: Home) -> None:
    seal = sealed(home, wallet=None).seal
    (home.profiles_dir / PROFILE / "models" / "flaky.toml").write_text('[[rule]]\nerror = "provider"\n')
    spec = write_proposer(home, "flakyp.toml", proposes({"models": ["script:models/flaky.toml"]}))
    code, got, _ = events(agentd, "--proposer", spec, "--runs", "2", "--model", "script:models/flaky.toml")
    assert code == 0
    verdict = [e for e in got if e["event"] == "not judged"]
    assert len(verdict) == 1 and verdict[0]["errored"] == 12 and "no confirmation spent" in verdict[0]["text"]
    assert seal.state().spent == 0


def test_a_change_clearly_worse_goes_no_further(agentd, home: Home) -> None:
    sealed(home, wallet=None)
    models = home.profiles_dir / PROFILE / "models"
    # Pays mallory even when the task names the payee: worse than the agent on every task.
    (models / "reckless.toml").write_text((models / "agent.toml").read_text().replace('to = "{to}"', 'to = "mallory"'))
    spec = write_proposer(home, "recklessp.toml", proposes({"models": ["script:models/reckless.toml"]}))
    code, got, _ = events(agentd, "--proposer", spec, "--runs", "4", "--model", "script:models/reckless.toml")
    dropped = [e for e in got if e["event"] == "dropped"]
    assert code == 0 and len(dropped) == 1 and "goes no further" in dropped[0]["text"]
    archive = json.loads(next(home.routes.root.glob(f"{PROFILE}-archive-*.json")).read_text())
    assert [v["label"] for v in archive["variants"]] == ["the agent as it was"]


def test_a_spent_seal_stops_the_loop_and_says_seal_fresh_tasks(agentd, home: Home) -> None:
    seal = sealed(home, wallet=None, confirmations=1).seal
    seal.spend_confirmation()
    spec = write_proposer(home, "lesson.toml", proposes({"lessons": LESSON}))
    code, got, _ = events(agentd, "--proposer", spec, "--runs", "2")
    assert code == 1 and got[-3]["text"].endswith("has spent its 1 confirmations: seal fresh tasks")


def test_the_kill_switch_stops_the_loop_before_it_starts(agentd, home: Home) -> None:
    sealed(home, wallet=None)
    agentd("kill-switch", "on")
    r = agentd("improve", "run", PROFILE, "--proposer", PROPOSER)
    assert r.code == 1 and "kill switch is on" in r.err
    assert not lineage_of(home, PROFILE).path.exists()


@pytest.mark.parametrize("budget", [0, 1000, 1999])
def test_a_budget_smaller_than_one_run_is_refused_before_anything_is_spent(agentd, home: Home, budget: int) -> None:
    sealed(home, wallet=None)
    toml = home.profiles_dir / PROFILE / "profile.toml"
    toml.write_text(toml.read_text().replace("max_tokens = 20000", "max_tokens = 2000"))  # a run costs at most this
    r = agentd("improve", "run", PROFILE, "--proposer", PROPOSER, "--max-tokens", str(budget))
    assert r.code == 2 and r.out == ""
    assert r.err == (
        f"agentd: error: --max-tokens {budget} is less than one run may cost (the profile's limit of 2000 tokens a run): "
        "give at least 2000\n"
    )
    assert not lineage_of(home, PROFILE).path.exists() and not list(home.routes.root.glob(f"{PROFILE}-archive-*"))


@pytest.mark.parametrize("budget", [2000, 5000])
def test_a_token_budget_stops_before_it_is_passed(agentd, home: Home, budget: int) -> None:
    sealed(home, wallet=None)
    toml = home.profiles_dir / PROFILE / "profile.toml"
    toml.write_text(toml.read_text().replace("max_tokens = 20000", "max_tokens = 2000"))  # a run costs at most this
    code, got, _ = events(
        agentd,
        "--proposer",
        PROPOSER,
        "--runs",
        "2",
        "--baseline-runs",
        "2",
        "--rounds",
        "3",
        "--max-tokens",
        str(budget),
    )
    assert code == 1
    stop = next(e for e in got if e["event"] == "stopped")
    assert f"budget of {budget} tokens" in stop["text"]
    used = got[-2]["tokens_in"] + got[-2]["tokens_out"]
    assert used <= budget
    if budget == 5000:  # enough for the agent as it is, and more
        assert got[0]["event"] == "baseline" and used > 0


def wordy(words: int, *calls: dict[str, Any]) -> str:
    """A rules file whose every answer costs `words` tokens and more (the calls' arguments)."""
    return proposes(*calls).replace("[[rule]]\n", f'[[rule]]\ntext = "{"word " * words}"\n', 1)


def used_and_stop(got: list[dict[str, Any]]) -> tuple[int, str]:
    tokens = next(e for e in got if e["event"] == "tokens")
    stop = next((e["text"] for e in got if e["event"] == "stopped"), "")
    return tokens["tokens_in"] + tokens["tokens_out"], stop


# From just above one run's limit (2000) to several rounds, with the agent as written
# (cheap runs) or one whose every answer would cost 3000 words (each run held to its
# limit), and a proposer whose every answer costs 1500 words and more.
@pytest.mark.parametrize(
    "budget, agent_words",
    [
        (2001, None),
        (2600, 3000),
        (3999, None),
        (4000, 3000),
        (4001, None),
        (5500, 3000),
        (7000, None),
        (8100, 3000),
        (9999, None),
        (12000, 3000),
        (14500, None),
        (17000, 3000),
        (19999, None),
        (23000, 3000),
        (27000, 3000),
        (36000, 3000),
        (42000, 3000),
        (50000, 3000),
        (61000, 3000),
        (90000, 3000),
    ],
)
def test_the_token_budget_is_never_passed(agentd, home: Home, budget: int, agent_words: int | None) -> None:
    sealed(home, wallet=None)
    toml = home.profiles_dir / PROFILE / "profile.toml"
    toml.write_text(toml.read_text().replace("max_tokens = 20000", "max_tokens = 2000"))  # a run costs at most this
    if agent_words:
        (home.profiles_dir / PROFILE / "models" / "agent.toml").write_text(
            f'[[rule]]\ntext = "{"word " * agent_words}"\n'
        )
    proposer = write_proposer(
        home, "wordy.toml", wordy(1500, {"lessons": "Read the invoice twice."}, {"lessons": "Pay nobody."})
    )
    args = ("--proposer", proposer, "--runs", "2", "--baseline-runs", "4", "--rounds", "3", "--max-tokens", str(budget))
    code, got, _ = events(agentd, *args)
    used, stop = used_and_stop(got)
    assert used <= budget
    if code == 1:  # stopped only when not one more run could fit
        assert stop == f"stopped: the next step could pass the budget of {budget} tokens ({used} used)"
        assert budget - used < 2000
    else:
        assert code == 0 and [e["event"] for e in got].count("round") == 3


def test_a_proposer_that_asks_for_more_than_the_budget_leaves_is_held_to_what_is_left(agentd, home: Home) -> None:
    sealed(home, wallet=None)
    toml = home.profiles_dir / PROFILE / "profile.toml"
    toml.write_text(toml.read_text().replace("max_tokens = 20000", "max_tokens = 2000"))
    proposer = write_proposer(home, "wordy.toml", wordy(200_000, {"lessons": "Read the invoice twice."}))
    code, got, _ = events(
        agentd, "--proposer", proposer, "--runs", "2", "--baseline-runs", "2", "--max-tokens", "60000"
    )
    used, stop = used_and_stop(got)
    assert code == 1 and got[0]["event"] == "baseline" and any(e["event"] == "round" for e in got)
    assert used == 60000  # its answer counted what the budget left it, no more
    assert stop == "stopped: the next step could pass the budget of 60000 tokens (60000 used)"


def test_a_second_run_for_the_profile_refuses_naming_the_lock(agentd, home: Home) -> None:
    sealed(home, wallet=None)
    with FileLock(str(home.routes.loop_lock(PROFILE))):
        r = agentd("improve", "run", PROFILE, "--proposer", PROPOSER)
    assert r.code == 1 and "invoices-loop.lock" in r.err and "another agentd improve run" in r.err


def test_sigterm_in_a_trial_stops_cleanly_and_the_next_run_goes_on(home: Home) -> None:
    seal = sealed(home, wallet=None).seal
    toml = home.profiles_dir / PROFILE / "profile.toml"
    scripted = toml.read_text()
    # A model that takes half a second an answer, so SIGTERM lands in the middle of a trial.
    toml.write_text(scripted.replace('models = ["script:models/agent.toml"]', 'models = ["openai:slow"]'))
    argv = [sys.executable, "-m", "agentd", "--home", str(home.root), "improve", "run", PROFILE, "--proposer", PROPOSER]
    with ModelServer("openai", delay=0.5) as server:
        env = {**os.environ, "OPENAI_BASE_URL": server.base_url}
        proc = subprocess.Popen([*argv, "--concurrency", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        while len(server.requests) < 2:
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert b"stopped: interrupted during a trial" in out and b"Traceback" not in err
    assert seal.state().spent == 0 and decisions(home) == ["stopped"]
    json.loads(next(home.routes.root.glob(f"{PROFILE}-archive-*.json")).read_text())
    toml.write_text(scripted)
    again = subprocess.run([*argv, "--runs", "2"], capture_output=True, timeout=120)
    assert again.returncode == 0, again.stderr
    assert b"kept learns" in again.stdout


def test_adopt_and_undo_restore_exactly(agentd, home: Home) -> None:
    sealed(home, wallet=None)
    before = load_profile(home, PROFILE).learned
    _code, got, _ = events(agentd, "--proposer", PROPOSER, "--runs", "2")
    step = next(e for e in got if e["event"] == "kept")["step"]
    assert load_profile(home, PROFILE).learned == before  # without --apply nothing changes
    r = agentd("improve", "adopt", PROFILE, step[:8])
    assert r.code == 0 and r.out.strip() == f"profile {PROFILE} now has learned what step {step} kept"
    assert load_profile(home, PROFILE).learned.lessons == LESSON
    r = agentd("improve", "undo", PROFILE)
    assert r.code == 0 and f"took back step {step}" in r.out
    assert load_profile(home, PROFILE).learned == before
    r = agentd("improve", "undo", PROFILE)
    assert r.code == 1 and "no change to take back" in r.err
    agentd("improve", "adopt", PROFILE, step)
    (home.profiles_dir / PROFILE / "learned.json").write_text(json.dumps({"lessons": "edited by hand"}))
    r = agentd("improve", "undo", PROFILE)
    assert r.code == 1 and "was changed since step" in r.err
    assert agentd("improve", "adopt", PROFILE, "ffff").code == 1


def test_check_names_a_tampered_lineage_line(agentd, home: Home) -> None:
    sealed(home)
    events(agentd, "--proposer", PROPOSER, "--runs", "2", "--wallet", PROFILE)
    path = lineage_of(home, PROFILE).path
    path.write_text(path.read_text().replace('"change":[12,12]', '"change":[11,12]', 1))
    r = agentd("lineage", PROFILE, "--check")
    assert r.code == 3
    assert (
        "invoices-lineage.jsonl: line 3: step" in r.err and "the line does not match its claim (choose differ)" in r.err
    )


def test_check_names_a_claim_that_is_not_in_the_lineage(agentd, home: Home) -> None:
    sealed(home)
    events(agentd, "--proposer", PROPOSER, "--runs", "2", "--wallet", PROFILE)
    path = lineage_of(home, PROFILE).path
    path.write_text("".join(line for line in path.read_text().splitlines(True) if '"decision":"kept"' not in line))
    r = agentd("lineage", PROFILE, "--check")
    assert r.code == 3 and "keeps a change of invoices that" in r.err


def test_a_loop_killed_between_publishing_and_recording_a_change_records_it_next_time(agentd, home: Home) -> None:
    sealed(home)
    events(agentd, "--proposer", PROPOSER, "--runs", "2", "--wallet", PROFILE)
    path = lineage_of(home, PROFILE).path
    kept = next(json.loads(line) for line in path.read_text().splitlines() if '"decision":"kept"' in line)
    path.write_text("".join(line for line in path.read_text().splitlines(True) if '"decision":"kept"' not in line))
    code, got, err = events(agentd, "--proposer", PROPOSER, "--runs", "2", "--wallet", PROFILE)
    assert code == 0, err
    recovered = [e for e in got if e["event"] == "recovered"]
    assert len(recovered) == 1 and kept["step"] in recovered[0]["text"] and kept["claim"] in recovered[0]["text"]
    (line,) = [line for _, line in lineage_of(home, PROFILE).kept() if line["step"] == kept["step"]]
    assert line["claim"] == kept["claim"] and line["pulse"] == kept["pulse"] and line["recovered"] is True
    r = agentd("lineage", PROFILE, "--check")
    assert r.code == 0, r.err


def test_check_names_a_claim_rewritten_in_the_store(agentd, home: Home) -> None:
    import sqlite3

    sealed(home)
    events(agentd, "--proposer", PROPOSER, "--runs", "2", "--wallet", PROFILE)
    db = sqlite3.connect(home.ledger_db)
    table = next(t for (t,) in db.execute("select name from sqlite_master where type='table'") if "entr" in t)
    column = next(c[1] for c in db.execute(f"pragma table_info({table})") if c[2].upper() == "BLOB" and c[1] != "leaf")
    pulse, raw = db.execute(f"select pulse, {column} from {table} order by pulse desc limit 1").fetchone()
    db.execute(f"update {table} set {column} = ? where pulse = ?", (bytes(raw).replace(b"A", b"B", 1), pulse))
    db.commit()
    db.close()
    r = agentd("lineage", PROFILE, "--check")
    assert r.code == 3 and f"the ledger does not verify: Pulse {pulse}" in r.err


def test_lineage_checks_from_an_exported_copy_on_another_machine(agentd, home: Home, tmp_path: Path) -> None:
    sealed(home)
    events(agentd, "--proposer", PROPOSER, "--runs", "2", "--wallet", PROFILE)
    copy = tmp_path / "ledger.jsonl"
    assert agentd("ledger", "export", str(copy)).code == 0
    auditor = tmp_path / "auditor"
    shutil.copytree(home.routes.root, auditor / "routes")
    env = {**os.environ, "AGENTD_HOME": str(auditor)}
    run = [sys.executable, "-m", "agentd", "--home", str(auditor)]
    assert subprocess.run([*run, "init"], capture_output=True, env=env, timeout=60).returncode == 0
    imported = subprocess.run([*run, "ledger", "import", str(copy)], capture_output=True, env=env, timeout=60)
    assert imported.returncode == 0, imported.stderr
    checked = subprocess.run([*run, "lineage", PROFILE, "--check"], capture_output=True, env=env, timeout=60)
    assert checked.returncode == 0, checked.stderr
    assert b"confirmed on tasks sealed at Pulse" in checked.stdout


def test_the_kill_switch_is_checked_before_each_proposal(home: Home) -> None:
    from agentd.app import killswitch

    sealed(home, wallet=None)
    proposer = Capturing(make_model(PROPOSER, home, base_dir=home.profiles_dir / PROFILE))
    seen: list[str] = []

    def on_event(event) -> None:
        seen.append(event.text)
        if event.kind == "baseline":
            killswitch.turn_on(home, "audit")

    stopped = run_improvement(home, PROFILE, RunRequest(PROPOSER, rounds=2, runs=1), on_event, proposer=proposer)
    assert stopped is not None and "the kill switch is on" in str(stopped)
    assert proposer.seen == [] and any(t.startswith("stopped: the kill switch is on") for t in seen)


def test_the_kill_switch_is_checked_before_each_run_of_a_trial(home: Home, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentd.app import killswitch, loop as app_loop

    sealed(home, wallet=None)
    started: list[str] = []  # the task of each run, as its first model call shows it
    real_factory = app_loop.model_factory

    def factory(home_: Home, base_dir: Path | None = None):
        make = real_factory(home_, base_dir)

        def model(spec: str):
            inner = make(spec)

            class TurnsItOn:
                name = inner.name

                async def complete(self, messages, tools, max_tokens) -> Completion:
                    if len(messages) == 2:
                        started.append(messages[1]["content"])
                        killswitch.turn_on(home, "seen enough")
                    return await inner.complete(messages, tools, max_tokens)

            return TurnsItOn()

        return model

    monkeypatch.setattr(app_loop, "model_factory", factory)
    request = RunRequest(PROPOSER, rounds=1, runs=2, concurrency=1)
    stopped = run_improvement(home, PROFILE, request, lambda e: None)
    assert stopped is not None and "the kill switch is on" in str(stopped) and "seen enough" in str(stopped)
    assert len(started) == 1  # the run under way finished; no other started


def test_a_reusable_seal_is_asked_before_a_confirmation_is_spent(agentd, home: Home) -> None:
    seal = sealed(home, wallet=None, reusable=True, confirmations=3).seal
    code, got, _ = events(agentd, "--proposer", PROPOSER, "--runs", "2")
    assert code == 0
    verdict = [e for e in got if e["event"] in ("kept", "turned down", "not confirmed") and "Never pay" in e["text"]]
    assert len(verdict) == 1
    state = seal.state()
    assert state.asked
    if verdict[0]["event"] == "turned down":  # the holdout's noisy answer fell at or below its threshold
        assert "no confirmation spent" in verdict[0]["text"] and state.spent == 0
    else:
        assert state.spent == 1
    assert state.holdout is not None and state.holdout.budget in (2, 3)


def test_long_trials_report_progress(home: Home) -> None:
    sealed(home, wallet=None)
    heard: list[str] = []
    run_improvement(home, PROFILE, RunRequest(PROPOSER, rounds=1, runs=2), lambda e: None, progress=heard.append)
    assert heard and all(" runs" in h and h.startswith("trial of variant ") for h in heard)
    assert any(h.endswith(": 48/48 runs") for h in heard)  # the agent as it is: 6 tasks x 8 baseline runs


def test_a_canary_anywhere_in_an_answer_stops_the_loop_before_any_change_is_tried(agentd, home: Home) -> None:
    seal = sealed(home).seal
    word = code_word(seal.canaries[1])
    spec = write_proposer(
        home,
        "late.toml",
        proposes({"lessons": LESSON}, {"lessons": "x"}, {"lessons": "y"}, {"lessons": f"Say {word}."}),
    )
    code, got, _ = events(agentd, "--proposer", spec, "--runs", "2", "--wallet", PROFILE)
    assert code == 1 and [e["event"] for e in got].count("kept") == 0
    assert "holds the code word of canary-1" in next(e for e in got if e["event"] == "stopped")["text"]
    assert seal.state().spent == 0


@pytest.mark.parametrize("variant", [1, 2, 5, 6])
def test_a_code_word_however_written_in_a_run_s_answer_stops_the_loop(agentd, home: Home, variant: int) -> None:
    seal = sealed(home, wallet=None).seal
    word = variants(code_word(seal.canaries[0]))[variant]
    script = home.profiles_dir / PROFILE / "models" / "agent.toml"
    script.write_text(
        script.read_text().replace(
            'text = "Paid {amount} USD to {to}."', f'text = "Paid {{amount}} USD to {{to}}. {word}"'
        )
    )
    code, got, _ = events(agentd, "--proposer", PROPOSER, "--runs", "1")
    assert code == 1
    stop = next(e for e in got if e["event"] == "stopped")
    assert stop["text"] == (
        "stopped: a run's answer holds the code word of canary-0: the sealed answers reached the agent; seal fresh tasks"
    )
    assert seal.state().spent == 0


def test_ordinary_words_near_a_code_word_do_not_stop_the_loop(agentd, home: Home) -> None:
    seal = sealed(home, wallet=None).seal
    bird = code_word(seal.canaries[0]).split("-")[0]
    spec = write_proposer(
        home, "birds.toml", proposes({"lessons": f"A {bird} is a bird; {bird}s do not pay invoices."})
    )
    code, got, _ = events(agentd, "--proposer", spec, "--runs", "1")
    assert code == 0 and not [e for e in got if e["event"] == "stopped"]


def test_a_baseline_task_left_without_a_judged_run_is_tried_again(agentd, home: Home) -> None:
    sealed(home, wallet=None)
    archive_runs = events(agentd, "--proposer", PROPOSER, "--runs", "2")[1][0]
    assert archive_runs["judged"] == 48  # 6 tasks x 8 baseline runs (4 x --runs)
    path = next(home.routes.root.glob(f"{PROFILE}-archive-*.json"))
    data = json.loads(path.read_text())
    base = data["variants"][0]
    dropped = sorted(base["tallies"])[0]
    del base["tallies"][dropped]  # as if every run of it had errored
    base["errored"] = 2
    path.write_text(json.dumps(data))
    code, got, _ = events(agentd, "--proposer", PROPOSER, "--runs", "2")
    assert code == 0 and got[0]["judged"] == 48 and got[0]["errored"] == 0
    assert not any(e["event"] == "not judged" for e in got)


def test_a_spent_reusable_seal_is_not_asked_again(agentd, home: Home) -> None:
    seal = sealed(home, wallet=None, reusable=True, confirmations=1).seal
    seal.spend_confirmation()
    before = json.loads(seal.path.read_text())["state"]["holdout"]
    code, got, _ = events(agentd, "--proposer", PROPOSER, "--runs", "2")
    assert code == 1 and "has spent its 1 confirmations: seal fresh tasks" in got[-3]["text"]
    assert json.loads(seal.path.read_text())["state"]["holdout"] == before


def test_a_change_interrupted_in_its_trial_may_be_proposed_again(home: Home) -> None:
    from agentd.app.loop import _loop

    sealed(home, wallet=None)
    loop = _loop(home, PROFILE, RunRequest(PROPOSER, runs=2), lambda e: None, None, None, None)
    trials = 0
    real_trial = loop.trials.batch

    async def stop_in_the_first_change(*args, **kwargs):
        nonlocal trials
        trials += 1
        if trials == 2:  # the first after the agent as it is: "Answer in French."
            loop.request_stop()
        return await real_trial(*args, **kwargs)

    loop.trials.batch = stop_in_the_first_change
    import asyncio

    asyncio.run(loop.run(1))
    assert loop.stopped is not None and "interrupted" in str(loop.stopped)
    assert loop.archive.tried == {loop.current.id}


def test_a_mistyped_profile_names_the_nearest_one_and_leaves_no_lock_behind(agentd, home: Home) -> None:
    assert agentd("init", "--example", "invoices").code == 0
    for command in (
        ["improve", "run", "invoicse", "--proposer", "script:x.toml"],
        ["improve", "adopt", "invoicse", "ab12"],
    ):
        r = agentd(*command)
        assert r.code != 0 and "did you mean 'invoices'?" in r.err and "profile new" not in r.err
        assert "Traceback" not in r.err
    assert not home.routes.loop_lock("invoicse").exists()
    far = agentd("run", "payroll", "Pay everyone.")
    assert far.code == 1 and "create it with: agentd profile new payroll" in far.err
