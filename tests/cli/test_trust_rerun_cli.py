"""`agentd rule --rerun` runs what the release published, not what its challenger wrote:
a recipe naming the release with another candidate command is rerun with the release's
own (the difference printed), and one asking a million runs is refused in one line
before anything is rebuilt, with nothing recorded."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from agentd.app.ledger import open_ledger
from agentd.home import Home
from agentd.wallets import load_wallet
from improver import recipe_for
from improver.code.release import MAX_RERUN_RUNS
from improver.seals.seal import current_seal
from ledger import BOND_CHALLENGE
from tests.cli.test_attest_cli import handed, release_of, released, size  # noqa: F401  (released: a fixture)
from tests.homekit import PASSPHRASES, run_in_process

FAILS = "python3 -c 'raise SystemExit(1)'"  # a candidate that fails every task


@pytest.fixture(scope="module")
def attested(released: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:  # noqa: F811
    """The released home with an attestation of the release on attester's bond under
    judge, and carol funded to challenge it (made once for the module)."""
    root = tmp_path_factory.mktemp("attested") / "home"
    shutil.copytree(released, root, symlinks=True)
    home = Home(root)
    with pytest.MonkeyPatch.context() as env:
        for var in ("AGENTD_LEDGER_URL", *PASSPHRASES):
            env.delenv(var, raising=False)

        def agentd(*args: str) -> Any:
            return run_in_process(["--home", str(root), *map(str, args)])

        for name in ("attester", "judge", "carol"):
            assert agentd("wallet", "new", name).code == 0
        for name in ("attester", "carol"):
            assert agentd("wallet", "fund", name, "50").code == 0
        rid = release_of(home)
        made = agentd(
            "improve",
            "attest",
            rid,
            *handed(home, rid),
            "--wallet",
            "attester",
            "--adjudicator",
            "judge",
            "--bond",
            "20",
        )
        assert made.code == 0, made.err
    return root, made.out.split()[5]


@pytest.fixture
def home(attested: tuple[Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    root = tmp_path / "home"
    shutil.copytree(attested[0], root, symlinks=True)
    monkeypatch.setenv("AGENTD_HOME", str(root))
    for var in ("AGENTD_LEDGER_URL", *PASSPHRASES):
        monkeypatch.delenv(var, raising=False)
    return Home(root)


def challenged(home: Home, claim: str, runs: int = 2, candidate: str | None = None) -> tuple[str, dict[str, str]]:
    """carol's challenge of `claim` with a recipe of her own writing: the release's, as
    `challenge --recipe` makes it, asking `runs` with `candidate` instead of the
    release's when given; its claim and the release's commands."""
    rid = release_of(home)
    with open_ledger(home) as ledger:
        body = next(e.body for e in ledger.entries("agent.release/v1") if e.body["release"]["release"] == rid)
        bond = ledger.find(claim).body["bond"]
        recipe = recipe_for(body, current_seal(home.routes, "invoices-code").terms.sealed_digest, runs)
        if candidate is not None:
            recipe["commands"] = {**recipe["commands"], "candidate": candidate}
        evidence = {"bond": bond, "claim": claim, "cents": 500, "evidence": "rebuilt: it fails", "recipe": recipe}
        return ledger.append(load_wallet(home, "carol"), BOND_CHALLENGE, evidence).claim_id, body["release"]["commands"]


def test_a_recipe_with_the_releases_name_but_other_commands_is_rerun_with_the_releases_own(
    agentd, home: Home, attested: tuple[Path, str]
) -> None:
    rid = release_of(home)
    challenge, published = challenged(home, attested[1], candidate=FAILS)
    before = size(home)
    r = agentd("rule", "judge", challenge, "--rerun", *handed(home, rid))
    assert r.code == 0, r.err
    claimed, differs, found = r.out.strip().splitlines()
    assert claimed.startswith("the attestation claimed the release holds up: ")
    assert differs == (
        f"the recipe's candidate command {FAILS!r} is not the release's {published['candidate']!r}: the release's is run"
    )
    assert found.startswith("rebuilt here, it holds up: ")  # what the release's own candidate does
    assert size(home) == before


def test_a_recipe_asking_a_million_runs_is_refused_in_one_line_before_anything_is_rebuilt(
    agentd, home: Home, attested: tuple[Path, str]
) -> None:
    rid = release_of(home)
    challenge, _ = challenged(home, attested[1], runs=1_000_000)
    before = size(home)
    r = agentd("rule", "judge", challenge, "--rerun", *handed(home, rid))
    assert r.code == 1 and r.out == "" and "Traceback" not in r.err
    assert r.err.strip().splitlines() == [
        f"agentd: error: the recipe's runs must be a count from 1 to {MAX_RERUN_RUNS}, the most a rerun makes of "
        "each sealed task, not 1000000"
    ]
    assert size(home) == before and not home.routes.attest_work(rid).exists()
    assert f"at most {MAX_RERUN_RUNS} runs of each sealed task" in " ".join(agentd("rule", "--help").out.split())
