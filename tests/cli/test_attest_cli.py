"""`agentd improve attest`, `improve releases show --intoto` and `agentd verify-statement`
on a release the invoices-code example's loop kept and published: rebuilt by another
wallet in the real bubblewrap sandbox and scored by scripted models; attestations on the
real ledger, which `ledger verify` and `lineage --check` still prove; every refusal one
line with nothing published; the in-toto envelopes checked by securesystemslib too."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path

import pytest

from agentd.app.attest import rerun
from agentd.app.ledger import open_ledger
from agentd.home import Home
from agentd.wallets import load_wallet
from improver import ATTESTATION, attestation_of, recipe_for
from improver.git import init_checkout
from improver.seal import current_seal
from ledger import BOND_POST, BOND_WITHDRAW, RuleViolation
from tests.examplekit import CODE, sealed
from tests.homekit import PASSPHRASES, run_in_process

HARNESS = ("--build", "python3 -m py_compile agent.py", "--test", "python3 test_agent.py", "--candidate", "python3 agent.py",
           "--allow", "agent.py")  # fmt: skip


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home whose loop kept and published one release of the invoices-code harness (once
    for the module: each test attests on its own copy)."""
    root = tmp_path_factory.mktemp("released") / "home"
    with pytest.MonkeyPatch.context() as env:
        for var in ("AGENTD_LEDGER_URL", *PASSPHRASES):
            env.delenv(var, raising=False)
        sealed(Home(root), wallet=CODE, profile=CODE)
        source = root / "profiles" / CODE / "harness"
        made = run_in_process(["--home", str(root), "improve", "code", CODE, "--source", str(source), "--coder",
                               "script:models/coder.toml", *HARNESS, "--rounds", "2", "--runs", "2", "--wallet", CODE])  # fmt: skip
        assert made.code == 0 and "kept as release" in made.out, made.out + made.err
    return root


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, released: Path) -> Home:
    root = tmp_path / "home"
    shutil.copytree(released, root, symlinks=True)
    monkeypatch.setenv("AGENTD_HOME", str(root))
    for var in ("AGENTD_LEDGER_URL", *PASSPHRASES):
        monkeypatch.delenv(var, raising=False)
    return Home(root)


def release_of(home: Home) -> str:
    (path,) = home.routes.releases().glob("*.json")
    return path.stem


def source(home: Home) -> Path:
    return home.profiles_dir / CODE / "harness"


def handed(home: Home, rid: str) -> tuple[str, ...]:
    """What the publisher hands an attester: the checkout, the patch, the sealed tasks (its seal file)."""
    return ("--source", str(source(home)), "--patch", str(home.routes.release_patch(rid)),
            "--tasks", str(current_seal(home.routes, CODE).path))  # fmt: skip


def size(home: Home) -> int:
    with open_ledger(home, read_only=True) as ledger:
        return ledger.size


def test_an_attester_rebuilds_a_release_that_holds_up_and_attests_it(agentd, home: Home, tmp_path: Path) -> None:
    rid = release_of(home)
    assert agentd("wallet", "new", "attester").code == 0
    out = tmp_path / "attestation.json"
    r = agentd("improve", "attest", rid, *handed(home, rid), "--wallet", "attester", "--out", out)
    assert r.code == 0, r.err
    line = r.out.strip()
    assert line.startswith(f"attested release {rid} as claim ") and "on the sealed tasks: better beyond chance" in line, line
    claim = line.split()[5].rstrip(":")
    with open_ledger(home, read_only=True) as ledger:
        found = attestation_of(ledger.state(), claim)
        body = ledger.find(claim).body
    assert found is not None and found["release"] == rid and found["holds"] is True and found["bond"] is None
    assert body["rebuilt"]["built"] and body["rebuilt"]["tested"] and body["sandbox"] == "bwrap"
    assert body["after"]["passed"] > body["before"]["passed"] and body["runs"] == 4
    assert agentd("ledger", "verify").code == 0
    check = agentd("lineage", CODE, "--check")
    assert check.code == 0, check.err
    assert not home.routes.attest_work(rid).exists()
    assert json.loads(out.read_text())["payloadType"] == "application/vnd.in-toto+json"
