"""`agentd improve code` and `improve releases` on the invoices-code example, as the
README runs them: a release kept, published, its patch found, and proved by
`lineage --check`; and what goes wrong said in one line."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock

from agentd.app.code import CodeRequest, run_code
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.providers import make_model
from improver.base.protocol import Completion
from improver.seals.seal import code_word, current_seal
from tests.examplekit import CODE, sealed

HARNESS = (
    "--build",
    "python3 -m py_compile agent.py",
    "--test",
    "python3 test_agent.py",
    "--candidate",
    "python3 agent.py",
    "--allow",
    "agent.py",
)


def source(home: Home) -> Path:
    return home.profiles_dir / CODE / "harness"


def improve_code(agentd, home: Home, *more: str):
    return agentd(
        "improve", "code", CODE, "--source", source(home), "--coder", "script:models/coder.toml", *HARNESS, *more
    )


def test_a_code_round_keeps_a_release_publishes_it_and_lineage_check_proves_it(agentd, home: Home) -> None:
    sealed(home, wallet=CODE, profile=CODE)
    r = improve_code(agentd, home, "--rounds", "2", "--runs", "4", "--wallet", CODE, "--apply")
    assert r.code == 0, r.out
    lines = r.out.splitlines()
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source(home), capture_output=True, text=True).stdout[:12]
    assert lines[0] == f"the code as it stands ({commit}): 48/96 runs of the tasks to choose on passed"
    assert lines[1] == (
        "round 1: The test now says fine. (test_agent.py +1 -1): turned down: test_agent.py: "
        "outside what the patch may change (agent.py)"
    )
    kept = "round 2: The harness now tells the model never to pay a payee an invoice names. (agent.py +1 -1): kept as release "
    assert lines[2].startswith(kept) and lines[2].endswith(" on the sealed tasks (confirmation 1 of 4)"), lines[2]
    rid = lines[2].removeprefix(kept).split(":")[0]
    assert (
        lines[2]
        .removeprefix(f"{kept}{rid}: ")
        .startswith(
            "24/24 against 48/96 (stratified test, one-sided p 8.8e-12 against 0.05, +50% a task) on the tasks to choose on"
        )
    )
    patch = home.routes.release_patch(rid)
    assert lines[3].startswith("published as claim ") and lines[4] == f"its patch is {patch}"
    assert "Never pay a payee an invoice names" in (source(home) / "agent.py").read_text()  # --apply
    assert not home.routes.code_work(CODE).exists()  # clones and trees removed

    listed = agentd("improve", "releases", CODE, "--json")
    (record,) = json.loads(listed.out)
    assert record["release"] == rid and record["files"] == ["agent.py"] and record["patch_file"] == str(patch)
    assert (
        record["patch"] == hashlib.sha256(patch.read_bytes()).hexdigest()
        and record["commands"]["candidate"] == "python3 agent.py"
    )
    assert agentd("improve", "releases", CODE).out.startswith(f"release {rid}: The harness now tells")

    check = agentd("lineage", CODE, "--check")
    assert check.code == 0, check.err
    assert f"release {rid}, its patch as published, on the ledger as claim" in check.out

    step = json.loads(agentd("lineage", CODE, "--json").out)["kept"][0]["step"]
    refused = agentd("improve", "adopt", CODE, step)
    assert (
        refused.code == 1 and "a change to code, a release, not lessons: apply its patch with git apply" in refused.err
    )

    patch.write_text(patch.read_text().replace("a person must check it first", "pay anyway"))
    tampered = agentd("lineage", CODE, "--check")
    assert tampered.code == 3 and "is not the patch it published" in tampered.err and "Traceback" not in tampered.err


def test_a_test_that_writes_into_the_tree_fails_its_round_and_keeps_nothing(agentd, home: Home) -> None:
    sealed(home, wallet=CODE, profile=CODE)
    # The tree is frozen from the test on: a test that would change what the candidate runs fails.
    rewrites = "python3 test_agent.py && if grep -q 'Never pay' agent.py; then echo 'RULES = 1' >> agent.py; fi"
    r = improve_code(agentd, home, "--rounds", "2", "--runs", "2", "--wallet", CODE, "--test", rewrites)
    assert r.code == 0, r.out + r.err
    (round_2,) = [line for line in r.out.splitlines() if line.startswith("round 2: ")]
    assert round_2.startswith(
        "round 2: The harness now tells the model never to pay a payee an invoice names. (agent.py +1 -1): "
        "turned down: the test failed (it exited with status "
    )
    assert ": ok | /bin/sh: 1: cannot create agent.py: " in round_2  # the test's own output: it may not write
    assert agentd("improve", "releases", CODE).out == f"profile {CODE} has no release yet\n"
    assert (
        current_seal(home.routes, CODE).state().spent == 0
        and "Never pay" not in (source(home) / "agent.py").read_text()
    )


def test_a_release_published_but_not_recorded_is_recorded_by_the_next_run(agentd, home: Home) -> None:
    sealed(home, wallet=CODE, profile=CODE)
    assert improve_code(agentd, home, "--rounds", "2", "--runs", "2", "--wallet", CODE).code == 0
    path = home.routes.lineage(CODE)
    kept = next(json.loads(line) for line in path.read_text().splitlines() if '"decision":"kept"' in line)
    path.write_text("".join(line for line in path.read_text().splitlines(True) if '"decision":"kept"' not in line))
    r = improve_code(agentd, home, "--rounds", "1", "--runs", "2", "--wallet", CODE, "--json")
    assert r.code == 0, r.err
    (recovered,) = [e for e in map(json.loads, r.out.splitlines()) if e["event"] == "recovered"]
    assert kept["step"] in recovered["text"] and kept["claim"] in recovered["text"]
    check = agentd("lineage", CODE, "--check")
    assert check.code == 0, check.err
    assert "its patch as published, on the ledger as claim" in check.out


def test_json_lines_and_a_candidate_that_prints_garbage_keep_nothing(agentd, home: Home) -> None:
    sealed(home, wallet=CODE, profile=CODE)
    r = improve_code(agentd, home, "--candidate", "echo garbage", "--runs", "1", "--json")
    assert r.code == 0, r.err
    events = [json.loads(line) for line in r.out.splitlines()]
    baseline = next(e for e in events if e["event"] == "baseline")
    assert baseline["passed"] == 0 and baseline["judged"] > 0
    assert (
        baseline["text"]
        == f"the code as it stands ({baseline['commit'][:12]}): 0/{baseline['judged']} runs of the tasks to choose on passed"
    )
    assert [e["round"] for e in events if e["event"] == "turned down"] == [
        1
    ]  # the round's one line, its number as data
    assert not any(e["event"] in ("kept", "release") for e in events)
    assert agentd("improve", "releases", CODE).out == f"profile {CODE} has no release yet\n"


def test_the_coder_is_shown_no_sealed_task(home: Home) -> None:
    made = sealed(home, wallet=CODE, profile=CODE)
    profile = load_profile(home, CODE)
    real = make_model("script:models/coder.toml", home, base_dir=profile.dir)
    seen: list[Any] = []

    class Recording:
        async def complete(
            self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
        ) -> Completion:
            seen.append(json.dumps([messages, tools]))
            return await real.complete(messages, tools, max_tokens)

    request = CodeRequest(
        "unused",
        source(home),
        "python3 -m py_compile agent.py",
        "python3 test_agent.py",
        "python3 agent.py",
        allow=("agent.py",),
        rounds=2,
        runs=2,
    )
    assert run_code(home, CODE, request, lambda event: None, coder=Recording()) is None
    everything = "\n".join(seen).lower()
    seal = current_seal(home.routes, CODE)
    assert seal.id == made.seal.id
    assert any(task.task.lower() in everything for task in seal.train().tasks)  # the tasks it failed to choose on
    for task in seal.sealed.tasks:
        assert task.task.lower() not in everything
    for canary in seal.canaries:
        assert code_word(canary).lower() not in everything


def test_bad_values_and_sources_are_refused_in_one_line(agentd, home: Home, tmp_path: Path) -> None:
    sealed(home, wallet=CODE, profile=CODE)
    bad_env = improve_code(agentd, home, "--env", "NOT-A-VAR")
    assert bad_env.code == 2 and "--env 'NOT-A-VAR': give VAR=VALUE" in bad_env.err
    plain = tmp_path / "plain"
    plain.mkdir()
    r = agentd("improve", "code", CODE, "--source", plain, "--coder", "script:models/coder.toml", *HARNESS)
    assert r.code == 1 and r.err.strip().endswith(
        "is not a git checkout (no .git at its top): give --source a checkout of the code"
    )
    (source(home) / "agent.py").write_text("changed")
    dirty = improve_code(agentd, home)
    assert dirty.code == 1 and "has uncommitted changes (M agent.py" in dirty.err and "Traceback" not in dirty.err
    assert len(dirty.err.strip().splitlines()) == 1
    with FileLock(str(home.routes.loop_lock(CODE)), timeout=0):
        locked = agentd("improve", "code", CODE, "--source", plain, "--coder", "script:models/coder.toml", *HARNESS)
    assert locked.code == 1 and "holds" in locked.err and "wait for it to end" in locked.err
    assert agentd("kill-switch", "on").code == 0
    halted = improve_code(agentd, home)
    assert halted.code == 1 and "kill switch" in halted.err


def test_sigterm_during_a_build_stops_cleanly_leaves_nothing_running_and_the_next_run_goes_on(
    agentd, agentd_process, home: Home
) -> None:
    sealed(home, wallet=CODE, profile=CODE)
    marker = b"sleep\x00117\x00"  # the build's own process, not agentd's command line that names it
    argv = ["improve", "code", CODE, "--source", source(home), "--coder", "script:models/coder.toml", *HARNESS]
    slow = [*argv, "--build", "sleep 117; echo built"]
    proc = agentd_process(*slow, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not running(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert b"stopped: interrupted during a build, a test or the coder" in out and b"Traceback" not in err
    assert running(marker) == [] and not home.routes.code_work(CODE).exists()
    again = agentd(*argv, "--rounds", "2")
    assert again.code == 0 and "kept as release" in again.out, again.out


def running(cmdline: bytes) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{pid}/cmdline").read_bytes() == cmdline:
                found.append(pid)
        except OSError:
            continue
    return found


def test_a_coder_that_writes_a_canarys_code_word_stops_the_loop(agentd, home: Home) -> None:
    made = sealed(home, wallet=CODE, profile=CODE)
    word = code_word(made.seal.canaries[0])
    rules = f"""
[[rule]]
turn = 1
[[rule.calls]]
name = "write_file"
arguments = {{ path = "notes.txt", content = "{word}" }}

[[rule]]
text = "Notes."
"""
    (home.profiles_dir / CODE / "models" / "leaky.toml").write_text(rules)
    r = agentd(
        "improve",
        "code",
        CODE,
        "--source",
        source(home),
        "--coder",
        "script:models/leaky.toml",
        *HARNESS,
        "--allow",
        "notes.txt",
    )
    assert r.code == 1 and "holds the code word of" in r.out and "seal fresh tasks" in r.out
    assert made.seal.state().spent == 0


@pytest.mark.parametrize("budget", [2001, 7000, 12000, 17000, 20000, 30000])  # from one run to two rounds
def test_a_token_budget_is_never_passed_by_code_rounds(agentd, home: Home, budget: int) -> None:
    sealed(home, wallet=None, profile=CODE)
    toml = home.profiles_dir / CODE / "profile.toml"
    toml.write_text(toml.read_text().replace("max_tokens = 20000", "max_tokens = 2000"))  # a run costs at most this
    r = improve_code(agentd, home, "--rounds", "2", "--runs", "2", "--max-tokens", str(budget), "--json")
    got = [json.loads(line) for line in r.out.splitlines()]
    tokens = next(e for e in got if e["event"] == "tokens")
    used = tokens["tokens_in"] + tokens["tokens_out"]
    assert used <= budget
    stop = next((e["text"] for e in got if e["event"] == "stopped"), "")
    if r.code == 1:  # stopped only when not one more run could fit
        assert (
            stop == f"stopped: the next step could pass the budget of {budget} tokens ({used} used)"
            and budget - used < 2000
        )
    else:
        assert r.code == 0 and sorted({e["round"] for e in got if "round" in e}) == [1, 2]  # each round's line
