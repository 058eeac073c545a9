"""An examiner's seal retired and revealed, and its examinations checked: the bundle is
held against the seal's claim, any examination is rerun on it, and an examiner that
lied is challenged on its bond and slashed.

The examiner is a real uvicorn server on 127.0.0.1 (tests/agentd/test_examiner.py's),
with a home of its own; the agent's ledger is a real SQLite file."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentd.app.agent import variant_of
from agentd.app.bonds import challenge, rule
from agentd.app.demo import PROFILE
from agentd.app.examiner import Examiner
from agentd.app.examining import reveal_seal
from agentd.app.ledger import open_ledger
from agentd.app.lineage import check_lineage
from agentd.app.loop import RunRequest, run_improvement
from agentd.app.reexamine import reexamine, reexamine_challenged
from agentd.app.seals import Examiner as ExaminerAt, seal_tasks
from agentd.app.status import status
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import load_profile, profile_dir
from agentd.wallets import create_wallet, load_wallet, log_key
from improver import (
    EXAMINATION,
    SEAL_RETIREMENT,
    SEAL_REVEAL,
    ImproverError,
    Seal,
    SealRequest,
    Variant,
    bundle_bytes,
    load_tasks,
    read_revealed,
)
from ledger import BOND_POST, MINT, Entry, RuleViolation, bonds_in
from tests.agentd.test_examiner import examiner_home, serving
from tests.examplekit import harvested

PROPOSER = "script:models/proposer.toml"


def bonded(home: Home, examiner: Examiner) -> str:
    """The examiner funded on the agent's ledger and its bond posted there, under judge."""
    judge = create_wallet(home, "judge")
    with open_ledger(home) as ledger:
        for wallet in (examiner.wallet.id, create_wallet(home, "carol").id):
            ledger.append(log_key(home), MINT, {"to": wallet, "cents": 5000})
        post = Entry.create(
            examiner.wallet,
            BOND_POST,
            {"cents": 2000, "adjudicator": judge.id},
            log=ledger.origin,
            seq=ledger.next_sequence(examiner.wallet.id),
        )
        (entry,) = ledger.append_raw([post.raw])
    return entry.claim_id


def sealed_to(home: Home, url: str, **request: object) -> Seal:
    work = home.root / "work.json"
    return seal_tasks(
        home,
        PROFILE,
        work,
        SealRequest(**{"seed": "test", **request}),
        PROFILE,
        examiner=ExaminerAt(url, None),  # type: ignore[arg-type]
    ).seal


def test_a_spent_seal_is_revealed_and_its_examination_holds_up_on_a_rerun(home: Home, tmp_path: Path) -> None:
    examiner = examiner_home(tmp_path / "examiner")
    harvested(home)
    examiner.bond = bonded(home, examiner)
    with serving(examiner) as url:
        seal = sealed_to(home, url, confirmations=1)
        request = RunRequest(PROPOSER, rounds=1, runs=2, baseline_runs=2, wallet=PROFILE, apply=True)
        assert run_improvement(home, PROFILE, request, lambda e: None) is None
        assert httpx.get(f"{url}/v1/examiner/seals/{seal.id}/revealed").status_code == 404  # not before the reveal
        done = reveal_seal(home, PROFILE, PROFILE)
        served = httpx.get(f"{url}/v1/examiner/seals/{seal.id}/revealed").content
    assert not done.retired and done.examinations == 1 and done.tasks >= 1 and done.canaries >= 1
    assert served == done.path.read_bytes()  # anyone may fetch what the agent keeps
    with open_ledger(home, read_only=True) as ledger:
        [exam] = list(ledger.entries(kind=EXAMINATION))
        [reveal] = list(ledger.entries(kind=SEAL_REVEAL))
        assert reveal.author == examiner.wallet.id and reveal.body["examinations"] == [exam.claim_id]
        bond = bonds_in(ledger.state()).bond(examiner.bond)
        assert bond is not None and exam.claim_id in bond.claims  # the examination is issued on the bond
        assert ledger.verify().ok
    again = reexamine(home, exam.claim_id[:12], done.path, profile_dir(home, PROFILE))
    assert again.holds and again.found.said.outcome.value == "kept"
    assert again.lines()[-1] == "it holds up"
    tampered = tmp_path / "tampered.json"
    tampered.write_bytes(done.path.read_bytes().replace(b'"runs":2', b'"runs":3', 1))
    with pytest.raises(AgentdError, match="the digest the examiner signed"):
        reexamine(home, exam.claim_id, tampered, profile_dir(home, PROFILE))
    assert not check_lineage(home, PROFILE).problems


def test_a_lying_examiner_is_shown_up_by_a_rerun_and_slashed(agentd: Any, home: Home, tmp_path: Path) -> None:
    examiner = examiner_home(tmp_path / "examiner")
    harvested(home)
    examiner.bond = bond_id = bonded(home, examiner)
    with serving(examiner) as url:
        seal = sealed_to(home, url, confirmations=2)
        with open_ledger(home) as ledger:
            claim = seal.state().claim
            assert claim is not None
            nothing = variant_of(load_profile(home, PROFILE)).to_json()
            asked = {"change": {**nothing, "lessons": "Be careful."}, "current": nothing, "runs": 2}
            asked |= {"baseline_runs": 2, "gain": 0.5, "seal_claim": claim}
            # The examiner signs that a change which changes nothing was kept, 8/8 against 0/8.
            sealed = {"test": "stratified", "level": 0.025, "tasks": 4, "change": [8, 8], "current": [0, 8]}
            lie = {
                "seal_claim": claim,
                "change": Variant.from_json(asked["change"]).id,
                "current": Variant.from_json(nothing).id,
                "runs": 2,
                "outcome": "kept",
                "sealed": {**sealed, "interval": None, "p": 0.0001, "gain": 1.0, "better": True},
                "confirmation": 1,
                "confirmations": 2,
                "level": 0.025,
                "lost": 0,
                "contested": 0,
                "thin": 0,
                "holdout_gain": None,
                "errored": 0,
            }
            raw = examiner._record(seal.id, lie, asked, ledger.origin, ledger.next_sequence(examiner.wallet.id))
            (exam,) = ledger.append_raw([raw])
        early = agentd("improve", "reveal", PROFILE, "--wallet", PROFILE)
        assert early.code == 1 and early.err.strip().endswith(
            "1 of its 2 confirmations left: spend them, or give --retire to retire it now (it then confirms no more "
            "changes) and reveal it"
        )
        revealing = agentd("improve", "reveal", PROFILE, "--wallet", PROFILE, "--retire", "--json")
        assert revealing.code == 0, revealing.err
        done = json.loads(revealing.out)
        assert done["retired"] and done["examinations"] == 1
        # Retired: the examiner examines nothing more, and the ledger takes no examination.
        answer = httpx.post(f"{url}/v1/examiner/seals/{seal.id}/examinations", json={**asked, "log": "x", "seq": 1})
        assert answer.status_code == 409 and "retired" in answer.json()["error"]
        # ... and the agent's status (as GET /v1/status shows it) counts it spent: nothing more is confirmed on it.
        (mine,) = [p["seal"] for p in status(home)["profiles"] if p["name"] == PROFILE]
        assert mine["confirmations_left"] == 0 and mine["spent"]
    with open_ledger(home) as ledger:
        assert [e.author for e in ledger.entries(kind=SEAL_RETIREMENT)] == [ledger.find(claim).author]
        again = Entry.create(
            examiner.wallet, EXAMINATION, lie, log=ledger.origin, seq=ledger.next_sequence(examiner.wallet.id)
        )
        with pytest.raises(RuleViolation, match="retired at Pulse"):
            ledger.append_raw([again.raw])
    models = profile_dir(home, PROFILE)
    found = agentd("improve", "reexamine", exam.claim_id[:16], "--revealed", done["revealed"], "--models", models)
    assert found.code == 3  # a check that found something wrong
    assert found.out.splitlines()[-1] == "it does not hold up: the examiner said kept, a rerun finds not better"
    said = challenge(home, "carol", exam.claim_id, bond_id, 500, "rerun on the revealed seal: not better")
    rerun = reexamine_challenged(home, said.entry.claim_id, Path(done["revealed"]), models)
    assert not rerun.holds and rerun.to_json()["found"]["outcome"] == "not better"
    ruled = rule(home, "judge", said.entry.claim_id, True, "the rerun finds it not better")
    assert ruled.bond.status == "slashed"
    with open_ledger(home, read_only=True) as ledger:
        assert bonds_in(ledger.state()).shown_false(exam.claim_id) == ruled.entry.claim_id
        assert ledger.verify().ok


def test_a_reveal_that_does_not_match_the_seal_is_named(home: Home, tmp_path: Path) -> None:
    examiner = examiner_home(tmp_path / "examiner")
    harvested(home)
    with serving(examiner) as url:
        seal = sealed_to(home, url, confirmations=1)
        done = reveal_seal(home, PROFILE, PROFILE, retire=True)
    with open_ledger(home, read_only=True) as ledger:
        claim = ledger.find(seal.state().claim or "").body
        [reveal] = list(ledger.entries(kind=SEAL_REVEAL))
    bundle = json.loads(done.path.read_bytes())
    # A task edited in place is named; a set made over without one holds up alone, but
    # not against the seal's claim, nor against the digest the examiner signed.
    bundle["seal"]["tasks"]["tasks"][0]["task"] += " (edited)"
    with pytest.raises(ImproverError, match=r"task [\w-]+: field 'digest' does not match the task"):
        read_revealed(bundle_bytes(bundle["seal"], []), claim, None)
    (tmp_path / "sealed.json").write_text(json.dumps(json.loads(done.path.read_bytes())["seal"]["tasks"]))
    held = load_tasks(tmp_path / "sealed.json")
    fewer = replace(held, tasks=held.tasks[1:])
    edited = bundle_bytes({**bundle["seal"], "tasks": fewer.to_json()}, [])
    with pytest.raises(ImproverError, match=r"not .*, the digest the examiner signed"):
        read_revealed(edited, claim, reveal.body["bundle"])
    with pytest.raises(ImproverError, match=r"the digest seal .* claim published before anything was asked"):
        read_revealed(edited, claim)


def test_only_the_seals_examiner_reveals_and_only_when_spent_or_retired(home: Home, tmp_path: Path) -> None:
    examiner = examiner_home(tmp_path / "examiner")
    harvested(home)
    with serving(examiner) as url:
        seal = sealed_to(home, url, confirmations=1)
    with open_ledger(home) as ledger:
        claim = seal.state().claim
        body = {"seal_claim": claim, "sealed_digest": seal.terms.sealed_digest, "bundle": "0" * 64, "examinations": []}
        early = Entry.create(
            examiner.wallet, SEAL_REVEAL, body, log=ledger.origin, seq=ledger.next_sequence(examiner.wallet.id)
        )
        with pytest.raises(RuleViolation, match="has confirmations left and was not retired"):
            ledger.append_raw([early.raw])
        stranger = create_wallet(home, "stranger")
        with pytest.raises(RuleViolation, match="only it retires the seal"):
            ledger.append(stranger, SEAL_RETIREMENT, {"seal_claim": claim})
        ledger.append(load_wallet(home, PROFILE), SEAL_RETIREMENT, {"seal_claim": claim})
        forged = Entry.create(stranger, SEAL_REVEAL, body, log=ledger.origin, seq=ledger.next_sequence(stranger.id))
        with pytest.raises(RuleViolation, match="names examiner"):
            ledger.append_raw([forged.raw])
