"""A seal's confirmations are its publisher's: a wallet the home does not know that names
the operator's seal is refused, appended here or posted to a running `agentd serve` from
a home of its own, and nothing of it is recorded; the operator's loop then keeps and
publishes its change and `lineage --check` proves it. A wallet of the home other than
the seal's publisher is told so before the loop runs anything."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agentd.app.demo import PROFILE
from agentd.app.ledger import open_ledger
from agentd.home import Home
from agentd.wallets import wallet_id_of
from improver import digest
from improver.seals.claims import IMPROVEMENT
from ledger import RuleViolation, Wallet
from tests.cli.test_loop_cli import PROPOSER, decisions
from tests.examplekit import sealed
from tests.homekit import run_in_process
from tests.serve.daemonkit import Daemon

REFUSED = "only the wallet that published a seal claims changes on it"


def claim_on(seal_claim: str, confirmation: int) -> dict[str, Any]:
    return {"seal_claim": seal_claim, "confirmation": confirmation, "follows": None, "profile": PROFILE}


def entries(home: Home) -> list[tuple[str, str]]:
    with open_ledger(home, read_only=True) as ledger:
        return [(e.kind, e.author) for e in ledger.entries()]


def test_a_stranger_claiming_the_operators_seal_is_refused_and_the_operators_loop_keeps_its_change(
    agentd, home: Home, tmp_path: Path
) -> None:
    made = sealed(home)
    assert made.claim is not None
    before = entries(home)
    with open_ledger(home) as ledger, pytest.raises(RuleViolation, match=REFUSED):
        ledger.append(Wallet.generate(), IMPROVEMENT, claim_on(made.claim, 4))
    assert entries(home) == before

    # A stranger with a home and a wallet of its own posts it to the operator's daemon.
    elsewhere = str(tmp_path / "stranger")
    assert run_in_process(["--home", elsewhere, "init"]).code == 0
    assert run_in_process(["--home", elsewhere, "wallet", "new", "mallory"]).code == 0
    daemon = Daemon(home).start()
    try:
        body = json.dumps(claim_on(made.claim, 4))
        posted = run_in_process(
            ["--home", elsewhere, "ledger", "post", "--remote", daemon.url, "--wallet", "mallory", IMPROVEMENT, body]
        )
    finally:
        daemon.stop()
    assert posted.code != 0 and REFUSED in posted.err and "Traceback" not in posted.err, posted.err
    assert len(posted.err.strip().splitlines()) == 1
    assert entries(home) == before

    r = agentd("improve", "run", PROFILE, "--proposer", PROPOSER, "--runs", "2", "--wallet", PROFILE, "--json")
    assert r.code == 0, r.err
    kept = next(json.loads(line) for line in r.out.splitlines() if json.loads(line)["event"] == "kept")
    assert kept["confirmation"] == 1 and kept["seal_claim"] == made.claim
    assert entries(home)[-1] == (IMPROVEMENT, wallet_id_of(home, PROFILE))
    checked = agentd("lineage", PROFILE, "--check")
    assert checked.code == 0, checked.out + checked.err


def test_a_wallet_of_the_home_that_did_not_publish_the_seal_is_told_before_anything_runs(agentd, home: Home) -> None:
    made = sealed(home)
    assert agentd("wallet", "new", "other").code == 0
    before, lines = entries(home), decisions(home)
    r = agentd("improve", "run", PROFILE, "--proposer", PROPOSER, "--runs", "2", "--wallet", "other")
    assert r.code == 2 and "Traceback" not in r.err and len(r.err.strip().splitlines()) == 1, r.err
    assert f"seal {made.seal.id} was published by wallet {PROFILE} ({wallet_id_of(home, PROFILE)}), not other" in r.err
    assert f"give --wallet {PROFILE}, or seal tasks with this one" in r.err and r.out == ""
    assert entries(home) == before and decisions(home) == lines


def test_a_strangers_own_seal_and_claims_under_the_operators_profile_name_leave_its_check_whole(
    agentd, home: Home
) -> None:
    made = sealed(home)
    r = agentd("improve", "run", PROFILE, "--proposer", PROPOSER, "--runs", "2", "--wallet", PROFILE)
    assert r.code == 0, r.err
    stranger = Wallet.generate()
    hexes = {name: digest({"stranger": name}) for name in ("set_digest", "train_digest", "sealed_digest")}
    seal = {"seal": "0" * 16, "profile": PROFILE, **hexes, "confirmations": 4, "level": 0.0125, "test": "newcombe"}
    with open_ledger(home) as ledger:
        published = ledger.append(stranger, "agent.seal/v1", seal)
        ledger.append(stranger, IMPROVEMENT, claim_on(published.claim_id, 1))
    checked = agentd("lineage", PROFILE, "--check")
    assert checked.code == 0, checked.out + checked.err
    assert f"the seal {made.seal.id} is on the ledger" in checked.out
