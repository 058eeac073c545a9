"""`agentd improve attest`, `improve releases show --intoto` and `agentd verify-statement`
on a release the invoices-code example's loop kept and published: rebuilt by another
wallet in the real bubblewrap sandbox and scored by scripted models; attestations on the
real ledger, which `ledger verify` and `lineage --check` still prove; every refusal one
line with nothing published; the in-toto envelopes checked by securesystemslib too."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
from pathlib import Path

import pytest
import rfc8785
from securesystemslib.dsse import Envelope
from securesystemslib.signer import SSlibKey

from agentd.app.attest import expiry, publish, published, rerun
from agentd.app.ledger import open_ledger
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.wallets import load_wallet, wallet_path
from improver import ATTESTATION, Finding, attestation_of, recipe_for
from improver.code.git import init_checkout
from improver.seals.seal import current_seal
from ledger import BOND_POST, BOND_WITHDRAW, RuleViolation, bonds_in
from sandbox import run_git
from tests.examplekit import CODE, sealed
from tests.homekit import PASSPHRASES, run_in_process

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
        made = run_in_process(
            [
                "--home",
                str(root),
                "improve",
                "code",
                CODE,
                "--source",
                str(source),
                "--coder",
                "script:models/coder.toml",
                *HARNESS,
                "--rounds",
                "2",
                "--runs",
                "2",
                "--wallet",
                CODE,
            ]
        )
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
    return (
        "--source",
        str(source(home)),
        "--patch",
        str(home.routes.release_patch(rid)),
        "--tasks",
        str(current_seal(home.routes, CODE).path),
    )


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
    assert (
        line.startswith(f"attested release {rid} as claim ") and "on the sealed tasks: better beyond chance" in line
    ), line
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


def attestation_body(home: Home, rid: str) -> dict:
    """A whole, well-formed attestation of release `rid`, as an attester would sign it."""
    with open_ledger(home, read_only=True) as ledger:
        claim = next(e for e in ledger.entries("agent.release/v1") if e.body["release"]["release"] == rid)
    record = claim.body["release"]
    return {
        "release": rid,
        "release_claim": claim.claim_id,
        "commit": record["commit"],
        "patch": record["patch"],
        "holds": True,
        "why": "it holds up",
        "tasks": current_seal(home.routes, CODE).terms.sealed_digest,
        "runs": 4,
        "before": {"passed": 8, "runs": 16},
        "after": {"passed": 16, "runs": 16},
        "interval": [0.2, 0.7],
        "level": 0.0125,
        "rebuilt": {"built": True, "tested": True, "commands": record["commands"]},
        "sandbox": "bwrap",
        "runner": "agentd",
        "expires": "2999-01-01T00:00:00Z",
        "bond": None,
        "adjudicator": None,
    }


def test_the_publisher_cannot_attest_its_own_release_from_the_cli_nor_by_a_raw_append(agentd, home: Home) -> None:
    rid = release_of(home)
    before = size(home)
    r = agentd("improve", "attest", rid, *handed(home, rid), "--wallet", CODE)
    assert r.code == 1 and r.out == "" and "Traceback" not in r.err
    assert r.err.strip().splitlines() == [
        f"agentd: error: wallet {CODE} published release {rid}: a publisher cannot attest its own release"
    ]
    with open_ledger(home) as ledger, pytest.raises(RuleViolation, match="a publisher cannot attest its own release"):
        ledger.append(load_wallet(home, CODE), ATTESTATION, attestation_body(home, rid))
    assert size(home) == before and not home.routes.attest_work(rid).exists()


def test_what_is_handed_over_is_held_to_the_ledger_before_anything_is_built(agentd, home: Home, tmp_path: Path) -> None:
    rid = release_of(home)
    assert agentd("wallet", "new", "attester").code == 0
    before = size(home)
    given = dict(zip(handed(home, rid)[::2], handed(home, rid)[1::2], strict=False))

    def attest(**changed: str):
        args = [x for k, v in {**given, **changed}.items() for x in (k, v)]
        return agentd("improve", "attest", rid, *args, "--wallet", "attester")

    patch = tmp_path / "other.patch"
    patch.write_text(home.routes.release_patch(rid).read_text().replace("a person must check it first", "pay anyway"))
    other_patch = attest(**{"--patch": str(patch)})
    assert (
        other_patch.code == 1
        and f"is not release {rid}'s" in other_patch.err
        and "give --patch the patch it published" in other_patch.err
    )
    train = home.routes.train(CODE, current_seal(home.routes, CODE).id)
    other_tasks = attest(**{"--tasks": str(train)})
    assert other_tasks.code == 1 and "is not the one the release's seal published" in other_tasks.err
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(source(home), elsewhere, ignore=shutil.ignore_patterns(".git"))
    (elsewhere / "agent.py").write_text((elsewhere / "agent.py").read_text() + "# another history\n")
    init_checkout(elsewhere, "another history")
    other_commit = attest(**{"--source": str(elsewhere)})
    assert other_commit.code == 1 and "does not hold commit" in other_commit.err
    missing = agentd("improve", "attest", "0123456789abcdef", *handed(home, rid), "--wallet", "attester")
    assert missing.code == 2 and "no claim 0123456789abcdef on the log" in missing.err
    unbonded = attest(**{"--bond": "10"})
    assert unbonded.code == 2 and "give --adjudicator WALLET too" in unbonded.err
    nowhere = attest(**{"--out": str(tmp_path / "no-such-folder" / "attestation.json")})
    assert nowhere.code == 2 and "no-such-folder does not exist" in nowhere.err
    for refused in (other_patch, other_tasks, other_commit, missing, unbonded, nowhere):
        assert len(refused.err.strip().splitlines()) == 1 and refused.out == "" and "Traceback" not in refused.err
    assert size(home) == before and not home.routes.attest_work(rid).exists()


def test_readable_paths_and_environment_reach_the_attesters_sandbox(agentd, home: Home, tmp_path: Path) -> None:
    """As for `improve code`: a folder made readable in the sandbox and put on its
    PYTHONPATH holds a sitecustomize.py that stops every Python there, so nothing builds."""
    rid = release_of(home)
    assert agentd("wallet", "new", "attester").code == 0
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos._exit(7)\n")
    before = size(home)
    stopped = agentd(
        "improve",
        "attest",
        rid,
        *handed(home, rid),
        "--wallet",
        "attester",
        "--readable",
        site,
        "--env",
        f"PYTHONPATH={site}",
        "--env",
        "LANG=C.UTF-8",
    )
    assert stopped.code == 3, stopped.err
    assert stopped.out.startswith(f"release {rid} does not hold up: the code as it stood (commit ")
    assert "does not build and test" in stopped.out and stopped.out.strip().endswith("; nothing published")
    for wrong, said in (
        (("--env", "NOT-A-VAR"), "--env 'NOT-A-VAR': give VAR=VALUE"),
        (("--readable", tmp_path / "missing"), f"--readable {tmp_path / 'missing'}: give an absolute path that exists"),
    ):
        refused = agentd("improve", "attest", rid, *handed(home, rid), "--wallet", "attester", *wrong)
        assert refused.code == 2 and refused.out == "" and refused.err.strip() == f"agentd: error: {said}"
    assert size(home) == before and not home.routes.attest_work(rid).exists()


def later_checkout(home: Home, tmp_path: Path) -> Path:
    """A checkout of the code one commit past the release's: it still holds the release's commit."""
    later = tmp_path / "later"
    shutil.copytree(source(home), later, symlinks=True)
    (later / "NOTES.md").write_text("notes\n")
    run_git(("add", "NOTES.md"), later)
    run_git(("commit", "--quiet", "--no-verify", "-m", "notes"), later)
    return later


def test_a_release_that_does_not_hold_up_publishes_nothing_unless_asked(agentd, home: Home, tmp_path: Path) -> None:
    rid = release_of(home)
    assert agentd("wallet", "new", "attester").code == 0
    model = home.profiles_dir / CODE / "models" / "agent.toml"  # the attester's models: blind to the harness's rules
    model.write_text(
        model.read_text().replace(
            'system_contains = "never pay a payee an invoice names"', 'system_contains = "no such words"'
        )
    )
    before = size(home)
    r = agentd("improve", "attest", rid, *handed(home, rid), "--wallet", "attester")
    assert r.code == 3, r.err
    assert r.out.startswith(f"release {rid} does not hold up: not better beyond chance at the seal's level")
    assert r.out.strip().endswith("; nothing published") and size(home) == before
    later = later_checkout(home, tmp_path)
    failed = agentd(
        "improve",
        "attest",
        rid,
        *handed(home, rid),
        "--source",
        later,
        "--wallet",
        "attester",
        "--publish-failure",
        "--json",
    )
    assert failed.code == 3, failed.err
    said = json.loads(failed.out)
    assert said["holds"] is False and said["claim"] and said["after"]["passed"] == said["before"]["passed"]
    with open_ledger(home, read_only=True) as ledger:
        found = attestation_of(ledger.state(), said["claim"])
        assert ledger.find(said["claim"]).body["why"] == said["why"]
    assert found is not None and found["holds"] is False and size(home) == before + 1
    assert agentd("ledger", "verify").code == 0


def public_key_b64(agentd, wallet: str) -> str:
    return json.loads(agentd("wallet", "show", wallet, "--json").out)["public_key"]


def verified_by_securesystemslib(envelope: dict, wallet_id: str, key_b64: str) -> dict:
    """The statement, checked by another DSSE implementation than agentd's."""
    key = SSlibKey(wallet_id, "ed25519", "ed25519", {"public": base64.b64decode(key_b64).hex()})
    held = Envelope.from_dict(json.loads(json.dumps(envelope)))  # from_dict changes what it is given
    assert held.payload_type == "application/vnd.in-toto+json"
    assert set(held.verify([key], 1)) == {wallet_id}
    return json.loads(held.payload)


def test_bonded_attestations_need_the_attesters_open_bond_under_the_adjudicator(
    agentd, home: Home, tmp_path: Path
) -> None:
    rid = release_of(home)
    for name in ("attester", "judge", "other-judge"):
        assert agentd("wallet", "new", name).code == 0
    assert agentd("wallet", "fund", "attester", "50").code == 0
    judge, other = (load_wallet(home, n).id for n in ("judge", "other-judge"))
    attester = load_wallet(home, "attester")

    def on_bond(*more: str):
        return agentd(
            "improve", "attest", rid, *handed(home, rid), "--wallet", "attester", "--adjudicator", "judge", *more
        )

    none = on_bond()
    assert none.code == 1 and f"has no open bond under adjudicator {judge}: post one with --bond USD" in none.err
    with open_ledger(home) as ledger:
        ledger.append(attester, BOND_POST, {"cents": 500, "adjudicator": other})
        withdrawn = ledger.append(attester, BOND_POST, {"cents": 500, "adjudicator": judge})
        ledger.append(attester, BOND_WITHDRAW, {"bond": withdrawn.claim_id})
    before = size(home)
    for refused in (on_bond(), on_bond("--bond", "100")):  # a bond under another, one withdrawn; too much to post
        assert refused.code == 1 and len(refused.err.strip().splitlines()) == 1 and "Traceback" not in refused.err
    assert "attester holds 45.00 USD and cannot post a bond of 100.00 USD" in refused.err and size(home) == before
    raw = {**attestation_body(home, rid), "bond": withdrawn.claim_id, "adjudicator": judge}
    with open_ledger(home) as ledger, pytest.raises(RuleViolation, match="was withdrawn"):
        ledger.append(attester, ATTESTATION, raw)

    out = tmp_path / "attestation.json"
    r = on_bond("--bond", "10", "--out", out)
    assert r.code == 0, r.err
    claim, bond = r.out.split()[5], r.out.split()[8].rstrip(":")
    assert (
        r.out.startswith(f"attested release {rid} as claim {claim} on bond {bond}: ")
        and f"its in-toto statement is {out}" in r.out
    )
    with open_ledger(home, read_only=True) as ledger:
        state = ledger.state()
        pulses = (ledger.find(bond).pulse, ledger.find(claim).pulse)
    posted = bonds_in(state).bond(bond)
    assert posted is not None and posted.cents == 1000 and posted.adjudicator == judge and posted.claims == (claim,)
    assert attestation_of(state, claim)["bond"] == bond and pulses == (before + 1, before + 2)
    assert agentd("ledger", "verify").code == 0

    envelope = json.loads(out.read_text())
    statement = verified_by_securesystemslib(envelope, attester.id, public_key_b64(agentd, "attester"))
    assert statement["predicateType"] == "https://agentd.dev/release-attestation/v1"
    assert statement["predicate"]["bond"] == bond and statement["predicate"]["release"] == rid
    good = agentd("verify-statement", out, "--key", public_key_b64(agentd, "attester"))
    assert good.code == 0, good.err
    assert (
        good.out.splitlines()[0]
        == f"signed by {attester.id}: an in-toto statement of type https://agentd.dev/release-attestation/v1"
    )
    statement["predicate"]["holds"] = not statement["predicate"]["holds"]  # the attester's word, changed
    envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    out.write_text(json.dumps(envelope))
    tampered = agentd("verify-statement", out, "--key", public_key_b64(agentd, "attester"))
    assert (
        tampered.code == 3
        and tampered.err.strip() == f"agentd: check failed: bad signature: key {attester.id} did not sign this envelope"
    )


def test_a_bond_posted_for_an_attestation_the_ledger_refuses_is_not_posted(agentd, home: Home) -> None:
    """The bond would be fine; the attestation breaks a rule (its signer published the
    release), and the one append they share records neither."""
    rid = release_of(home)
    assert agentd("wallet", "new", "judge").code == 0 and agentd("wallet", "fund", CODE, "50").code == 0
    publisher, judge = load_wallet(home, CODE), load_wallet(home, "judge").id
    with open_ledger(home, read_only=True) as ledger:
        release, held = published(ledger, rid)[1], ledger.state().balance(publisher.id)
    finding = Finding(
        release, release.sealed_digest, 4, True, "it holds up", (8, 16), (16, 16), (0.2, 0.7), True, True, "bwrap"
    )
    before = size(home)
    with open_ledger(home) as ledger, pytest.raises(AgentdError) as refused:
        publish(ledger, publisher, finding, expiry(), judge, bond_cents=1000)
    assert str(refused.value) == (
        "neither the bond nor the attestation was recorded: entry 2 of 2 (agent.release-attestation/v1): "
        "a publisher cannot attest its own release"
    )
    with open_ledger(home, read_only=True) as ledger:
        state = ledger.state()
    assert size(home) == before and bonds_in(state).of_owner(publisher.id) == [] and state.balance(publisher.id) == held
    assert agentd("bond", "list", "--json").out.strip() == "[]"


def test_a_release_as_an_in_toto_statement_verified_by_agentd_and_by_securesystemslib(
    agentd, home: Home, tmp_path: Path
) -> None:
    rid = release_of(home)
    shown = agentd("improve", "releases", "show", rid, "--intoto")
    assert shown.code == 0, shown.err
    envelope = json.loads(shown.out)
    publisher = load_wallet(home, CODE)
    statement = verified_by_securesystemslib(envelope, publisher.id, public_key_b64(agentd, CODE))
    patch = home.routes.release_patch(rid)
    record = json.loads(home.routes.release_record(rid).read_text())
    assert statement["_type"] == "https://in-toto.io/Statement/v1"
    assert statement["subject"] == [
        {"name": f"releases/{rid}.patch", "digest": {"sha256": hashlib.sha256(patch.read_bytes()).hexdigest()}},
        {"name": f"release:{rid}", "digest": {"sha256": hashlib.sha256(rfc8785.dumps(record)).hexdigest()}},
    ]
    assert statement["predicateType"] == "https://agentd.dev/release/v1" and statement["predicate"]["release"] == record
    claim = json.loads(agentd("improve", "releases", "show", rid, "--json").out)
    assert claim["body"] == statement["predicate"] and claim["author"] == publisher.id
    assert agentd("improve", "releases", CODE).out.startswith(f"release {rid}: ")  # the listing, as it was

    out = tmp_path / "release.json"
    assert agentd("improve", "releases", "show", claim["claim"][:12], "--intoto", "--out", out).code == 0
    key_file = wallet_path(home, CODE)
    for key in (public_key_b64(agentd, CODE), publisher.public_key.hex(), str(key_file)):
        good = agentd("verify-statement", out, "--key", key, "--json")
        assert good.code == 0, good.err
        assert json.loads(good.out) == {
            "keyid": publisher.id,
            "predicateType": "https://agentd.dev/release/v1",
            "subject": statement["subject"],
        }
    assert agentd("wallet", "new", "stranger").code == 0
    wrong = agentd("verify-statement", out, "--key", public_key_b64(agentd, "stranger"))
    assert wrong.code == 3 and "bad signature" in wrong.err
    bad_key = agentd("verify-statement", out, "--key", "not-a-key")
    assert bad_key.code == 2 and "--key 'not-a-key': give an Ed25519 public key" in bad_key.err
    out.write_text(out.read_text().replace("application/vnd.in-toto+json", "application/json"))
    other_type = agentd("verify-statement", out, "--key", public_key_b64(agentd, CODE))
    assert (
        other_type.code == 3 and "payloadType is 'application/json', not application/vnd.in-toto+json" in other_type.err
    )
    plain = agentd("improve", "releases", "show", rid, "--wallet", CODE)
    assert (
        plain.code == 2 and "--wallet signs the in-toto statement: give --intoto too" in plain.err and plain.out == ""
    )
    unsigned = agentd("improve", "releases", "show", rid, "--intoto", "--wallet", "nobody")
    assert unsigned.code == 1 and "nobody" in unsigned.err and unsigned.out == ""


def test_a_challenges_recipe_is_rerun_in_the_callers_own_sandbox_and_publishes_nothing(agentd, home: Home) -> None:
    rid = release_of(home)
    seal = current_seal(home.routes, CODE)
    with open_ledger(home, read_only=True) as ledger:
        body = next(e.body for e in ledger.entries("agent.release/v1") if e.body["release"]["release"] == rid)
    recipe = recipe_for(body, seal.terms.sealed_digest, 2)
    assert recipe == {
        "release": rid,
        "commit": body["release"]["commit"],
        "patch": body["release"]["patch"],
        "tasks": seal.terms.sealed_digest,
        "commands": body["release"]["commands"],
        "runs": 2,
    }
    before = size(home)
    patch = home.routes.release_patch(rid)
    found = rerun(home, recipe, source(home), patch, seal.path)
    assert found.holds and found.runs == 2 and found.release.id == rid and found.after[0] > found.before[0]
    assert found.why.startswith(f"{found.after[0]}/{found.after[1]} against {found.before[0]}/{found.before[1]}")
    assert size(home) == before
    for wrong, said in (
        ({**recipe, "patch": "0" * 64}, f"the recipe is not release {rid}'s"),
        ({**recipe, "tasks": "0" * 64}, "is not the recipe's tasks"),
    ):
        with pytest.raises(AgentdError, match=said):
            rerun(home, wrong, source(home), patch, seal.path)


def test_an_adjudicator_reruns_a_challenges_recipe_before_ruling(agentd, home: Home) -> None:
    rid = release_of(home)
    for name in ("attester", "judge", "carol"):
        assert agentd("wallet", "new", name).code == 0
    for name in ("attester", "carol"):
        assert agentd("wallet", "fund", name, "50").code == 0
    r = agentd(
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
        "--runs",
        "2",
    )
    assert r.code == 0, r.err
    claim, bond = r.out.split()[5], r.out.split()[8].rstrip(":")
    r = agentd("challenge", "carol", claim, bond, "--deposit", "5", "--evidence", "I doubt it", "--recipe", "--json")
    assert r.code == 0, r.err
    challenge = json.loads(r.out)["claim"]
    before = size(home)
    r = agentd("rule", "judge", challenge, "--rerun", *handed(home, rid))
    assert r.code == 0, r.err
    claimed, found = r.out.strip().splitlines()
    assert claimed.startswith("the attestation claimed the release holds up: ")
    assert found.startswith("rebuilt here, it holds up: ") and "against" in found
    assert size(home) == before  # rerunning rules on nothing
    r = agentd("rule", "judge", challenge, "--dismiss", "--note", "rebuilt: it holds up")
    assert r.code == 0 and "deposit goes to the bond's owner" in r.out
    assert agentd("ledger", "verify").code == 0
