"""`agentd bond`, `agentd challenge` and `agentd rule` as a user runs them: funds locked,
a challenge upheld slashes the bond to the challenger, a dismissed one pays the deposit to
the attester; every refusal is one line and writes nothing; `ledger verify` replays it all.

The release and the attestations here are appended as their publishers' signed claims
(the ledger's rules check them as they would `improve attest`'s)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agentd.app.ledger import open_ledger
from agentd.wallets import load_wallet
from improver import ATTESTATION, RELEASE_KIND, digest
from improver.decide import levels
from ledger import RuleViolation
from tests.cli.test_wallet_cli import one_error_line

COMMIT, PATCH = "d" * 40, "e" * 64
RELEASE = digest({"commit": COMMIT, "patch": PATCH})[:16]


def _seal_and_release(ledger: Any, publisher: Any) -> str:
    seal = {
        "seal": "0123456789abcdef",
        "profile": "invoices",
        "set_digest": "a" * 64,
        "train_digest": "b" * 64,
        "sealed_digest": "c" * 64,
        "confirmations": 4,
        "level": levels.confirmation_level(4),
        "test": "newcombe",
    }
    seal_claim = ledger.append(publisher, "agent.seal/v1", seal).claim_id
    release = {
        "release": RELEASE,
        "commit": COMMIT,
        "patch": PATCH,
        "summary": "s",
        "operator": "o",
        "commands": {"build": "", "test": "", "candidate": "python3 agent.py"},
    }
    after = {"operator": "o", "lessons": "", "models": ["m"], "code": {"commit": COMMIT, "patch": PATCH}}
    body = {
        "seal_claim": seal_claim,
        "confirmation": 1,
        "follows": None,
        "profile": "invoices",
        "after": after,
        "release": release,
    }
    return ledger.append(publisher, RELEASE_KIND, body).claim_id


class Bonded:
    """A home where alice published a release, bob attests it, carol challenges, judge rules."""

    def __init__(self, agentd: Any, home: Any) -> None:
        self.agentd, self.home = agentd, home
        for name in ("alice", "bob", "carol", "judge", "dave"):
            assert agentd("wallet", "new", name).code == 0
        for name in ("bob", "carol", "dave"):
            assert agentd("wallet", "fund", name, "100").code == 0
        with open_ledger(home) as ledger:
            self.release_claim = _seal_and_release(ledger, load_wallet(home, "alice"))

    def id(self, name: str) -> str:
        return load_wallet(self.home, name).id

    def post(self, name: str = "bob", usd: str = "50", adjudicator: str = "judge") -> str:
        r = self.agentd("bond", "post", name, usd, "--adjudicator", adjudicator, "--json")
        assert r.code == 0, r.err
        return json.loads(r.out)["claim"]

    def attest(self, bond: str | None, name: str = "bob", adjudicator: str = "judge") -> str:
        body = {
            "release": RELEASE,
            "release_claim": self.release_claim,
            "commit": COMMIT,
            "patch": PATCH,
            "holds": True,
            "why": "16/16 against 8/16",
            "tasks": "c" * 64,
            "runs": 4,
            "before": {"passed": 8, "runs": 16},
            "after": {"passed": 16, "runs": 16},
            "interval": [0.2, 0.8],
            "level": 0.0125,
            "rebuilt": {},
            "sandbox": "bubblewrap",
            "runner": "python3 agent.py",
            "expires": "2099-01-01T00:00:00Z",
            "bond": bond,
            "adjudicator": self.id(adjudicator) if bond else None,
        }
        with open_ledger(self.home) as ledger:
            return ledger.append(load_wallet(self.home, name), ATTESTATION, body).claim_id

    def balance(self, name: str) -> int:
        return json.loads(self.agentd("wallet", "show", name, "--json").out)["balance_cents"]

    def size(self) -> int:
        with open_ledger(self.home, read_only=True) as ledger:
            return ledger.size


@pytest.fixture
def bonded(agentd, home) -> Bonded:
    return Bonded(agentd, home)


def test_a_bond_locks_funds_and_is_listed_shown_and_withdrawn(bonded: Bonded) -> None:
    agentd = bonded.agentd
    r = agentd("bond", "post", "bob", "50", "--adjudicator", "judge")
    assert r.code == 0, r.err
    assert "posted bond" in r.out and "50.00 USD of bob locked" in r.out
    assert bonded.balance("bob") == 5_000
    [listed] = json.loads(agentd("bond", "list", "--json").out)
    assert (
        listed["owner"] == bonded.id("bob")
        and listed["adjudicator"] == bonded.id("judge")
        and listed["status"] == "open"
    )
    shown = agentd("bond", "show", listed["bond"][:8])
    assert shown.code == 0 and "50.00 USD" in shown.out and "open" in shown.out
    r = agentd("bond", "withdraw", "bob", listed["bond"][:8])
    assert r.code == 0, r.err
    assert "50.00 USD back to bob" in r.out
    assert bonded.balance("bob") == 10_000
    assert json.loads(agentd("bond", "show", listed["bond"], "--json").out)["status"] == "withdrawn"


def test_bond_list_and_show_name_the_wallets_this_home_holds(bonded: Bonded) -> None:
    agentd = bonded.agentd
    stranger = "5" * 32  # an adjudicator this home holds no wallet of
    bob, judge, carol = bonded.id("bob"), bonded.id("judge"), bonded.id("carol")
    named, unnamed = bonded.post(), bonded.post(usd="10", adjudicator=stranger)
    claim = bonded.attest(named)
    r = agentd("challenge", "carol", claim, named, "--deposit", "5", "--evidence", "rebuilt: 0/4 against 0/4")
    assert r.code == 0, r.err

    listed = {b["bond"]: b for b in json.loads(agentd("bond", "list", "--json").out)}
    assert (listed[named]["owner"], listed[named]["owner_name"]) == (bob, "bob")
    assert (listed[named]["adjudicator"], listed[named]["adjudicator_name"]) == (judge, "judge")
    assert (listed[unnamed]["adjudicator"], listed[unnamed]["adjudicator_name"]) == (stranger, None)
    rows = {line.split()[0]: line for line in agentd("bond", "list").out.splitlines()[1:]}
    assert f"bob ({bob[:8]}…)" in rows[named[:16]] and f"judge ({judge[:8]}…)" in rows[named[:16]]
    assert f"bob ({bob[:8]}…)" in rows[unnamed[:16]] and f" {stranger} " in rows[unnamed[:16]]

    shown = json.loads(agentd("bond", "show", named, "--json").out)
    assert shown["owner_name"] == "bob" and shown["adjudicator_name"] == "judge"
    assert (shown["challenges"][0]["challenger"], shown["challenges"][0]["challenger_name"]) == (carol, "carol")
    text = agentd("bond", "show", named).out
    assert f"bob ({bob})" in text and f"judge ({judge})" in text and f"by carol ({carol}): 5.00 USD deposit" in text
    assert (
        f"{stranger} (" not in agentd("bond", "show", unnamed).out and stranger in agentd("bond", "show", unnamed).out
    )


def test_an_upheld_challenge_slashes_the_bond_to_the_challenger(bonded: Bonded) -> None:
    agentd = bonded.agentd
    bond = bonded.post()
    claim = bonded.attest(bond)
    r = agentd(
        "challenge",
        "carol",
        claim[:12],
        bond[:12],
        "--deposit",
        "5",
        "--evidence",
        "rebuilt: 0/4 against 0/4",
        "--recipe",
    )
    assert r.code == 0, r.err
    challenge = json.loads(agentd("bond", "show", bond, "--json").out)["challenges"][0]
    assert challenge["recipe"]["release"] == RELEASE and challenge["recipe"]["patch"] == PATCH
    assert bonded.balance("carol") == 9_500

    line = one_error_line(agentd("bond", "withdraw", "bob", bond))
    assert "has an open challenge" in line
    line = one_error_line(agentd("rule", "dave", challenge["challenge"], "--uphold"))
    assert "dave is not the adjudicator of bond" in line
    r = agentd("rule", "judge", challenge["challenge"][:10], "--uphold", "--note", "reran it: it does not hold")
    assert r.code == 0, r.err
    assert "shown false" in r.out and "slashed" in r.out
    assert bonded.balance("carol") == 9_500 + 500 + 5_000 and bonded.balance("bob") == 5_000
    size = bonded.size()
    line = one_error_line(agentd("rule", "judge", challenge["challenge"], "--dismiss"))
    assert "was upheld already" in line and bonded.size() == size
    shown = json.loads(agentd("bond", "show", bond, "--json").out)
    assert shown["status"] == "slashed" and shown["challenges"][0]["status"] == "upheld"
    assert agentd("ledger", "verify").code == 0


def test_a_dismissed_challenge_pays_the_deposit_to_the_attester(bonded: Bonded) -> None:
    bond = bonded.post()
    claim = bonded.attest(bond)
    r = bonded.agentd(
        "challenge", "carol", claim, bond, "--deposit", "5", "--evidence", "I think it is wrong", "--json"
    )
    challenge = json.loads(r.out)["claim"]
    r = bonded.agentd("rule", "judge", challenge, "--dismiss")
    assert r.code == 0 and "deposit goes to the bond's owner" in r.out
    assert bonded.balance("bob") == 5_000 + 500 and bonded.balance("carol") == 9_500


def test_bad_bonds_challenges_and_rulings_are_one_line_and_write_nothing(bonded: Bonded, tmp_path) -> None:
    agentd = bonded.agentd
    bond = bonded.post()
    claim = bonded.attest(bond)
    size = bonded.size()
    cases = [
        (
            ("bond", "post", "bob", "500", "--adjudicator", "judge"),
            1,
            "bob holds 50.00 USD and cannot post a bond of 500.00 USD",
        ),
        (("bond", "post", "bob", "5", "--adjudicator", "bob"), 1, "cannot adjudicate its own bond"),
        (("bond", "post", "bob", "-5", "--adjudicator", "judge"), 2, "out of range"),
        (("bond", "withdraw", "carol", bond), 1, "only its owner withdraws it"),
        (("bond", "show", "zzzz"), 2, "not a claim id"),
        (("bond", "show", bonded.release_claim), 2, "not a bond"),
        (
            ("challenge", "carol", bonded.release_claim, bond, "--deposit", "5", "--evidence", "x"),
            1,
            "not an attestation",
        ),
        (("challenge", "carol", claim, bond, "--deposit", "500", "--evidence", "x"), 1, "cannot deposit 500.00 USD"),
        (("challenge", "carol", claim, bond, "--deposit", "5"), 2, "--evidence is empty"),
        (
            ("challenge", "bob", claim, bond, "--deposit", "5", "--evidence", "x"),
            1,
            "cannot challenge a claim on its own bond",
        ),
        (("rule", "judge", bond, "--uphold"), 2, "not a challenge"),
        (("rule", "judge", claim), 2, "--uphold or --dismiss"),
        (("rule", "judge", claim, "--rerun"), 2, "--rerun needs --source"),
        (
            ("rule", "judge", claim, "--uphold", "--source", str(tmp_path)),
            2,
            "--source, --patch, --tasks and --revealed are for --rerun",
        ),
    ]
    for argv, code, expected in cases:
        line = one_error_line(agentd(*argv), code)
        assert expected in line, (argv, line)
    assert bonded.size() == size


def test_a_claim_on_another_bond_or_a_withdrawn_one_cannot_be_challenged(bonded: Bonded) -> None:
    agentd = bonded.agentd
    bond, other = bonded.post(usd="20"), bonded.post(name="dave", usd="20")
    claim = bonded.attest(bond)
    line = one_error_line(agentd("challenge", "carol", claim, other, "--deposit", "5", "--evidence", "x"))
    assert "is not issued on bond" in line
    assert agentd("bond", "withdraw", "bob", bond).code == 0
    line = one_error_line(agentd("challenge", "carol", claim, bond, "--deposit", "5", "--evidence", "x"))
    assert "was withdrawn" in line


def test_the_ledger_refuses_a_bonded_claim_without_a_bond_under_its_adjudicator(bonded: Bonded) -> None:
    bond = bonded.post()
    with pytest.raises(RuleViolation, match="under adjudicator"):
        bonded.attest(bond, adjudicator="dave")
    with pytest.raises(RuleViolation, match="no bond on the log"):
        bonded.attest("ab" * 32)
    with pytest.raises(RuleViolation, match="a publisher cannot attest its own release"):
        bonded.attest(None, name="alice")


def test_rerunning_a_challenge_that_carries_no_recipe_says_so(bonded: Bonded, tmp_path) -> None:
    bond = bonded.post()
    r = bonded.agentd("challenge", "carol", bonded.attest(bond), bond, "--deposit", "1", "--evidence", "x", "--json")
    given = tmp_path / "given"
    given.write_text("{}")
    r = bonded.agentd(
        "rule",
        "judge",
        json.loads(r.out)["claim"],
        "--rerun",
        "--source",
        str(tmp_path),
        "--patch",
        str(given),
        "--tasks",
        str(given),
    )
    assert "carries no rebuild recipe" in one_error_line(r)
