"""A release is read one way, whoever reads it (improver.code.release's `Release`): the
attester by its claim, the installer by its id. A damaged release claim is refused by both
with the one reason, and a challenge's recipe is the release's own, read back as it."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from improver.base.errors import ImproverError
from improver.base.variant import Variant
from improver.code.release import RECIPE_FIELDS, Commands, Rebuild, of_entry, published, recipe_for, record, release_id
from improver.decide import levels
from improver.seals.claims import RELEASE, SEAL
from improver.trust.install import Trust, review
from ledger import Entry, Ledger, RuleSet, State, Wallet

PUBLISHER = Wallet.generate("publisher")
COMMIT = "1" * 40
PATCH = b"diff --git a/agent.py b/agent.py\n--- a/agent.py\n+++ b/agent.py\n@@ -1 +1 @@\n-a\n+b\n"
SEAL_TERMS = {"sealed_digest": "c" * 64, "confirmations": 4, "level": levels.confirmation_level(4), "test": "newcombe"}
NOW = "2030-01-01T00:00:00Z"


def _any_release(state: State, entry: Entry) -> None:
    state.ns("releases")[entry.body["release"]["release"]] = {
        "claim": entry.claim_id,
        "author": entry.author,
        "pulse": entry.pulse,
    }


def laxer_rules() -> RuleSet:
    """A ledger's rules that take any release claim in: a log not kept by agentd's own."""
    rules = RuleSet()
    rules.register(SEAL, lambda state, entry: None)
    rules.register(RELEASE, _any_release)
    return rules


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    with Ledger.open(f"sqlite:///{tmp_path / 'ledger.db'}", laxer_rules(), Wallet.generate("log")) as opened:
        yield opened


def publish(ledger: Ledger, damage: Callable[[dict[str, Any]], None] = lambda release: None) -> Entry:
    """A release of PATCH on COMMIT with its seal, its record first changed by `damage`."""
    seal = ledger.append(PUBLISHER, SEAL, SEAL_TERMS)
    change = Variant("o", "", ("m",), COMMIT, hashlib.sha256(PATCH).hexdigest())
    body = record("invoices", change, Variant("o", "", ("m",)), PATCH, "one line", Commands("", "", "python3 a.py"))
    damage(body)
    return ledger.append(PUBLISHER, RELEASE, {"release": body, "seal_claim": seal.claim_id})


def test_a_sound_release_reads_the_same_by_its_claim_and_by_its_id(ledger: Ledger) -> None:
    entry = publish(ledger)
    rid = release_id(COMMIT, hashlib.sha256(PATCH).hexdigest())
    by_claim, by_id = of_entry(ledger, entry), published(ledger, rid)
    assert by_claim == by_id
    assert (by_id.id, by_id.claim, by_id.publisher, by_id.commit) == (rid, entry.claim_id, PUBLISHER.id, COMMIT)
    assert (by_id.files, by_id.confirmations, by_id.test) == (("agent.py",), 4, "newcombe")


def _other_commit(release: dict[str, Any]) -> None:
    release["commit"] = "2" * 40


def _no_commands(release: dict[str, Any]) -> None:
    del release["commands"]


@pytest.mark.parametrize(
    "damage, reason",
    [
        (_other_commit, "release {rid} is not the id of its commit and patch"),
        (_no_commands, "claim {claim} is not a release with its seal (KeyError('commands') is missing or malformed)"),
    ],
)
def test_a_damaged_release_claim_is_refused_by_attester_and_installer_with_one_reason(
    ledger: Ledger, tmp_path: Path, damage: Callable[[dict[str, Any]], None], reason: str
) -> None:
    entry = publish(ledger, damage)
    rid = entry.body["release"]["release"]
    with pytest.raises(ImproverError) as attester:
        of_entry(ledger, entry)  # what an attester rebuilds from
    with pytest.raises(ImproverError) as installer:
        review(ledger, rid, PATCH, tmp_path, (), Trust((PUBLISHER.id,)), NOW)
    assert str(attester.value) == str(installer.value) == reason.format(rid=rid, claim=entry.claim_id)


def test_a_challenges_recipe_is_read_back_as_the_release_it_came_from(ledger: Ledger) -> None:
    entry = publish(ledger)
    release, recipe = of_entry(ledger, entry), recipe_for(entry.body, "d" * 64, 3)
    assert tuple(recipe) == RECIPE_FIELDS and (recipe["tasks"], recipe["runs"]) == ("d" * 64, 3)
    assert release.following(recipe) == Rebuild(release, 3, ())
    rebuilt = release.following({**recipe, "commands": {"build": "make", "test": "", "candidate": "./a"}})
    assert rebuilt.release.commands == Commands("make", "", "python3 a.py")  # only what the release leaves open
    assert rebuilt.differs == (
        "the recipe adds a build command the release leaves open: 'make'",
        "the recipe's candidate command './a' is not the release's 'python3 a.py': the release's is run",
    )
    with pytest.raises(ImproverError, match=f"the recipe is not release {release.id}'s"):
        release.following({**recipe, "commit": "2" * 40})
