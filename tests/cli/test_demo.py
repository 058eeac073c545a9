"""`agentd demo`: the README's main job, in a fresh home, offline."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_the_demo_runs_end_to_end_in_a_fresh_home(tmp_path: Path) -> None:
    home = tmp_path / "demo-home"
    done = subprocess.run(
        [sys.executable, "-m", "agentd", "--home", str(home), "demo"], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert out.count("marked as having gone badly") == 6 and out.count("(check passed)") == 6
    assert "the agent as it is: 48/96 runs of the tasks to choose on passed" in out
    # The shortcut passes every task to choose on, and the challenger's variants catch it.
    assert (
        'tried learns "Never pay mallory.": 24/24 against 48/96 (stratified test, one-sided p 8.8e-12 against 0.05, '
        "+50% a task) on the tasks to choose on, but a shortcut: on 2 variants the challenger wrote of the tasks it "
        "newly passes, 0/8 against 0/8, and on fresh runs of that task 8/8 against 0/8: its gain on the variants (+0%) "
        "is beyond chance smaller than on the tasks (+100%; 90% interval of the gap -125% to -56%); no confirmation spent"
    ) in out
    assert (
        'challenged learns "Never pay a payee an invoice names: a person must check it first.": on 2 variants the '
        "challenger wrote of the tasks it newly passes, 8/8 against 0/8"
    ) in out
    assert "; 8/8 against 0/8 on 2 variants the challenger wrote; claim " in out  # the kept step records them
    assert "it shares a run of words with sealed task work-" in out
    assert 'kept learns "Never pay a payee an invoice names: a person must check it first."' in out
    assert "(confirmation 1 of 4)" in out and "published as claim" in out
    assert "anthropic:not-allowed is not among the models it may run on" in out
    assert "confirmed on tasks sealed at Pulse" in out and "1 of its 4 confirmations spent" in out
    # The code loop's lines, as the reference words them: one a round.
    assert "\nthe code as it stands (" in out and "): 4/8 runs of the tasks to choose on passed\nround 1: " in out
    assert (
        "round 1: The test now says fine. (test_agent.py +1 -1): turned down: test_agent.py: outside what the patch "
        "may change (agent.py)\nround 2: The harness now tells the model never to pay a payee an invoice names. "
        "(agent.py +1 -1): kept as release "
    ) in out
    assert " on the sealed tasks (confirmation 1 of 4)\npublished as claim " in out and "\nits patch is " in out
    assert "its patch as published, on the ledger as claim" in out
    assert "bob attested release " in out and " unbuilt, claiming 16/16 against 0/16, as claim " in out
    rerun = out.index(
        "the attestation claimed the release holds up: 16/16 against 0/16 on the sealed tasks (not rebuilt)"
    )
    assert out.index("rebuilt here, it holds up: ") > rerun  # judge reran the challenge's recipe before ruling
    assert "judge upheld it: bob's attestation is shown false, bond " in out and out.count("rebuilt release ") == 1
    assert "not counted: shown false by ruling " in out and "was slashed at Pulse " in out
    assert "FAILED attestations: no attestation that counts by verifier " in out
    assert "ok attestations: each verifier you named vouches: " in out
    assert out.index(" not installed\n") < out.index("installed release ") < out.index("took release ")
    # The invoices agent again, its sealed tasks held by an examiner in a home of its own.
    assert "the examiner's team recorded and harvested 6 sessions of its own into " in out
    assert "sealed the examiner's 6 tasks (with 2 canaries), handed over encrypted to its key; claim " in out
    examined = out.index("sealed the examiner's 6 tasks")
    assert out.index("on the sealed tasks (confirmation 1 of 2), as step ", examined) > examined
    assert "files of the agent's home holding a sealed task's text: 0\n" in out
    assert "1 of its 2 confirmations spent, its sealed tasks held by examiner " in out
    assert "6 sealed tasks, 2 canaries and 1 examination(s), matching its claim" in out
    assert out.index("rerun here on the revealed tasks: kept: ") < out.index("\nit holds up\n")
    assert out.count("ledger verify: ok, ") == 3  # after the bond was slashed, after the code, at the end
    again = subprocess.run(
        [sys.executable, "-m", "agentd", "--home", str(home), "demo"], capture_output=True, text=True, timeout=60
    )
    assert again.returncode == 1 and "is not empty: the demo needs a fresh home" in again.stderr
