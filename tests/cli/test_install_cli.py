"""`agentd improve install` on a release the code loop kept: it applies the patch only when
the patch is the one published, keeps to the installer's --allow read from the patch, the
checkout stands at the release's commit, and the verifiers named vouch by attestations
that count; every refusal is one line with nothing changed, and --undo restores the
checkout byte for byte."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agentd.app.install import InstallRequest, install
from agentd.app.ledger import open_ledger
from agentd.home import Home
from agentd.wallets import create_wallet, load_wallet, log_key
from improver import ATTESTATION
from improver.code.release import release_id
from ledger import BOND_CHALLENGE, BOND_POST, BOND_RULING, BOND_WITHDRAW, MINT, RuleViolation, Wallet
from tests.cli.test_code_cli import improve_code, source
from tests.examplekit import CODE, sealed
from tests.homekit import PASSPHRASES, run_in_process

EXPIRES = "2030-01-01T00:00:00Z"


@pytest.fixture(scope="module")
def released(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A home whose code loop kept and published a release (made once: it takes a while)."""
    root = tmp_path_factory.mktemp("released") / "home"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AGENTD_HOME", str(root))
        for var in ("AGENTD_LEDGER_URL", *PASSPHRASES):
            mp.delenv(var, raising=False)
        assert run_in_process(["--home", str(root), "init"]).code == 0
        home = Home(root)
        sealed(home, wallet=CODE, profile=CODE)

        def agentd(*args: str) -> Any:
            return run_in_process(["--home", str(root), *map(str, args)])

        kept = improve_code(agentd, home, "--rounds", "2", "--runs", "2", "--wallet", CODE)
        assert kept.code == 0, kept.out + kept.err
    line = next(
        line for line in kept.out.splitlines() if ": kept as release " in line
    )  # round N: LABEL: kept as release R: ...
    return root, line.split(": kept as release ")[1].split(":")[0]


class World:
    """The test's home: the release, its checkout and patch, and wallets that attest,
    bond, challenge and rule on the home's ledger."""

    def __init__(self, home: Home, release: str) -> None:
        self.home, self.release = home, release
        self.checkout = source(home)
        self.patch = home.routes.release_patch(release)
        self.wallets = {name: create_wallet(home, name) for name in ("alice", "bob", "carol", "judge", "other-judge")}
        with open_ledger(home) as ledger:
            for name in ("alice", "bob", "carol"):
                ledger.append(log_key(home), MINT, {"to": self.wallets[name].id, "cents": 10_000})

    def append(self, who: str, kind: str, body: dict[str, Any]) -> str:
        wallet: Wallet = self.wallets[who] if who in self.wallets else load_wallet(self.home, who)
        with open_ledger(self.home) as ledger:
            return ledger.append(wallet, kind, body).claim_id

    def release_claim(self, release: str | None = None) -> dict[str, Any]:
        with open_ledger(self.home) as ledger:
            claim = ledger.state().ns("releases")[release or self.release]["claim"]
            return {"claim": claim, **ledger.find(claim).body}

    def attest(self, who: str, release: str | None = None, **changes: Any) -> str:
        published = self.release_claim(release)
        rel = published["release"]
        body = {
            "release": rel["release"],
            "release_claim": published["claim"],
            "commit": rel["commit"],
            "patch": rel["patch"],
            "holds": True,
            "why": "8/8 against 4/8",
            "tasks": "c" * 64,
            "runs": 2,
            "before": {"passed": 4, "runs": 8},
            "after": {"passed": 8, "runs": 8},
            "interval": [0.1, 0.9],
            "level": 0.0125,
            "rebuilt": {"built": True, "tested": True},
            "sandbox": "bubblewrap",
            "runner": "python3 agent.py",
            "expires": EXPIRES,
            "bond": None,
            "adjudicator": None,
        }
        return self.append(who, ATTESTATION, {**body, **changes})

    def bond(self, who: str, cents: int = 2_000, judge: str = "judge") -> str:
        return self.append(who, BOND_POST, {"cents": cents, "adjudicator": self.wallets[judge].id})

    def on_bond(self, who: str, bond: str, judge: str = "judge") -> str:
        return self.attest(who, bond=bond, adjudicator=self.wallets[judge].id)

    def uphold(self, bond: str, claim: str) -> str:
        body = {"bond": bond, "claim": claim, "cents": 300, "evidence": "rebuilt it: 4/8 against 4/8"}
        challenge = self.append("carol", BOND_CHALLENGE, body)
        return self.append("judge", BOND_RULING, {"challenge": challenge, "uphold": True})

    def named(self, who: str) -> str:
        """A wallet as install's lines show it: its name here and its id's first digits."""
        wallet = self.wallets[who] if who in self.wallets else load_wallet(self.home, who)
        return f"{who} ({wallet.id[:12]})"

    def files(self) -> dict[str, bytes]:
        """The checkout's files (git's own directory aside) with their modes, as bytes."""
        return {
            str(p.relative_to(self.checkout)): p.read_bytes() + oct(p.stat().st_mode).encode()
            for p in sorted(self.checkout.rglob("*"))
            if p.is_file() and ".git" not in p.relative_to(self.checkout).parts
        }


@pytest.fixture
def world(released: tuple[Path, str], home: Home) -> World:
    base, release = released
    shutil.copytree(base, home.root, symlinks=True)
    return World(home, release)


def install_args(w: World, *more: str, patch: Path | None = None) -> tuple[str, ...]:
    return (
        "improve",
        "install",
        CODE,
        w.release,
        "--source",
        w.checkout,
        "--patch",
        patch or w.patch,
        "--allow",
        "agent.py",
        *more,
    )


def refused(r: Any, w: World, before: dict[str, bytes], failed: str, why: str) -> None:
    """Exit 3, the check named with why, each check printed, and nothing changed."""
    assert r.code == 3, r.out + r.err
    assert any(line.startswith(f"FAILED {failed}: ") and why in line for line in r.out.splitlines()), r.out
    assert sum(line.startswith(("ok ", "FAILED ")) for line in r.out.splitlines()) == 4
    assert (
        r.err.strip()
        == f"agentd: check failed: release {w.release} not installed ({failed} failed); nothing was changed"
    )
    assert w.files() == before and not w.home.routes.install_record(CODE, w.release).exists()


def test_a_release_attested_by_the_verifier_installs_exactly_its_patch_and_undo_restores_the_checkout(
    agentd, world: World
) -> None:
    w = world
    before = w.files()
    claim = w.attest("alice")
    r = agentd(*install_args(w, "--attestation", claim[:8], "--verifier", "alice"))
    assert r.code == 0, r.out + r.err
    lines = r.out.splitlines()
    assert lines[0] == f"attestation {claim[:12]}: counts: by verifier {w.named('alice')}"
    assert [line.split(":")[0] for line in lines[1:5]] == ["ok patch", "ok allow", "ok commit", "ok attestations"]
    assert lines[2] == "ok allow: it touches agent.py, within what you allow (agent.py)"
    assert lines[-1].startswith(f"installed release {w.release} into {w.checkout}")
    after = w.files()
    assert set(after) == set(before) and [f for f in after if after[f] != before[f]] == ["agent.py"]
    expected = subprocess.run(["git", "apply", "--check", "-R", str(w.patch)], cwd=w.checkout)  # exactly the patch
    assert expected.returncode == 0 and "Never pay a payee an invoice names" in (w.checkout / "agent.py").read_text()

    again = agentd(*install_args(w, "--attestation", claim, "--verifier", "alice"))
    assert again.code == 1 and "is already installed for invoices-code" in again.err and "--undo" in again.err
    undone = agentd("improve", "install", CODE, w.release, "--undo")
    assert undone.code == 0 and undone.out == f"took release {w.release} back out of {w.checkout}\n"
    assert w.files() == before and not w.home.routes.install_record(CODE, w.release).exists()
    nothing = agentd("improve", "install", CODE, w.release, "--undo")
    assert nothing.code == 1 and f"release {w.release} is not installed for {CODE}" in nothing.err

    as_json = json.loads(agentd(*install_args(w, "--attestation", claim, "--verifier", "alice", "--json")).out)
    record = w.home.routes.install_record(CODE, w.release)
    assert (
        as_json["installed"] and as_json["record"] == str(record) and [c["ok"] for c in as_json["checks"]] == [True] * 4
    )
    assert json.loads(record.read_text())["attestations"] == [claim] == [a["claim"] for a in as_json["attestations"]]


def test_undo_refuses_when_the_checkout_changed_since(agentd, world: World) -> None:
    w = world
    r = agentd(*install_args(w, "--attestation", w.attest("alice"), "--verifier", "alice"))
    assert r.code == 0, r.out + r.err
    (w.checkout / "agent.py").write_text((w.checkout / "agent.py").read_text() + "# mine\n")
    changed = w.files()
    undone = agentd("improve", "install", CODE, w.release, "--undo")
    assert undone.code == 1 and "agent.py changed since release" in undone.err and "Traceback" not in undone.err
    assert len(undone.err.strip().splitlines()) == 1 and w.files() == changed


def test_a_patch_whose_digest_differs_is_refused(agentd, world: World, tmp_path: Path) -> None:
    w = world
    before = w.files()
    other = tmp_path / "other.patch"
    other.write_text(w.patch.read_text().replace("a person must check it first", "pay anyway"))
    r = agentd(*install_args(w, "--attestation", w.attest("alice"), "--verifier", "alice", patch=other))
    refused(r, w, before, "patch", f"that release {w.release} published")


def crafted_release(w: World) -> tuple[str, Path]:
    """A second release by the same publisher whose patch also changes test_agent.py
    while its record says it changes agent.py alone: what --allow reads is the patch."""
    scratch = w.checkout.parent / "scratch"
    shutil.copytree(w.checkout, scratch)
    subprocess.run(["git", "apply", str(w.patch)], cwd=scratch, check=True)
    (scratch / "test_agent.py").write_text((scratch / "test_agent.py").read_text().replace("assert", "assert True or"))
    patch = subprocess.run(["git", "diff", "--no-renames"], cwd=scratch, check=True, capture_output=True).stdout
    shutil.rmtree(scratch)
    return published_as_release(w, patch)


def published_as_release(w: World, patch: bytes) -> tuple[str, Path]:
    """`patch` published by the release's own publisher as a release of the same commit
    (spending the seal's next confirmation), and written where an installer is handed it."""
    digest = hashlib.sha256(patch).hexdigest()
    published = w.release_claim()
    del published["claim"]
    commit = published["release"]["commit"]
    rid = release_id(commit, digest)
    published["release"] = {**published["release"], "release": rid, "patch": digest, "files": ["agent.py"]}
    published["after"] = {**published["after"], "code": {"commit": commit, "patch": digest}}
    published["confirmation"] += 1
    w.append(CODE, "agent.release/v1", published)
    path = w.checkout.parent / f"{rid}.patch"
    path.write_bytes(patch)
    return rid, path


def test_a_patch_touching_a_path_outside_allow_that_its_release_says_it_does_not_touch_is_refused(
    agentd, world: World
) -> None:
    w = world
    rid, patch = crafted_release(w)
    w.release = rid
    before = w.files()
    r = agentd(*install_args(w, "--attestation", w.attest("alice", rid), "--verifier", "alice", patch=patch))
    refused(
        r,
        w,
        before,
        "allow",
        "it touches test_agent.py, outside what you allow (agent.py); its publisher says it changes agent.py",
    )
    assert f"ok patch: its SHA-256 {hashlib.sha256(patch.read_bytes()).hexdigest()[:12]}" in r.out


def test_a_checkout_at_another_commit_is_refused(agentd, world: World) -> None:
    w = world
    claim = w.attest("alice")
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty", "-m", "later"],
        cwd=w.checkout,
        check=True,
    )
    before = w.files()
    r = agentd(*install_args(w, "--attestation", claim, "--verifier", "alice"))
    refused(
        r, w, before, "commit", f"not at {w.release_claim()['release']['commit'][:12]}, release {w.release}'s commit"
    )


def test_an_attestation_by_the_publisher_never_gets_on_the_ledger_and_no_other_vouches_for_it(
    agentd, world: World
) -> None:
    w = world
    with pytest.raises(RuleViolation, match="a publisher cannot attest its own release"):
        w.attest(CODE)
    before = w.files()
    r = agentd(*install_args(w, "--attestation", w.attest("alice"), "--verifier", CODE))
    assert "not counted: by " in r.out.splitlines()[0] and "a wallet you did not name with --verifier" in r.out
    refused(r, w, before, "attestations", f"no attestation that counts by verifier {w.named(CODE)}")


def test_an_expired_attestation_does_not_count(world: World) -> None:
    w = world
    before = w.files()
    claim = w.attest("alice")
    request = InstallRequest(w.checkout, w.patch, (claim,), ("alice",), allow=("agent.py",))
    done = install(w.home, CODE, w.release, request, now="2030-01-01T00:00:01Z")
    assert not done.installed and done.review.failed == ["attestations"]
    assert [a.why for a in done.review.attestations] == [f"not counted: it expired at {EXPIRES}"]
    assert w.files() == before
    assert install(w.home, CODE, w.release, request, now="2029-12-31T23:59:59Z").installed


def test_an_attestation_shown_false_does_not_count(agentd, world: World) -> None:
    w = world
    bond = w.bond("alice")
    claim = w.on_bond("alice", bond)
    ruling = w.uphold(bond, claim)
    before = w.files()
    r = agentd(*install_args(w, "--attestation", claim, "--verifier", "alice"))
    assert r.out.splitlines()[0] == f"attestation {claim[:12]}: not counted: shown false by ruling {ruling[:12]}"
    refused(r, w, before, "attestations", f"no attestation that counts by verifier {w.named('alice')}")


def test_an_attestation_on_a_broken_bond_issued_after_the_break_does_not_count_and_a_sound_one_does(
    agentd, world: World
) -> None:
    w = world
    bond = w.bond("alice")
    first = w.on_bond("alice", bond)
    ruling = w.uphold(bond, first)
    later = w.on_bond("alice", bond)  # the ledger records it; the bond stands behind nothing
    before = w.files()
    bonded = ("--bonded", "--adjudicator", "judge")
    r = agentd(*install_args(w, "--attestation", first, "--attestation", later, "--verifier", "alice", *bonded))
    slashed = f"bond {bond[:12]} was slashed at Pulse"
    assert r.out.splitlines()[0].startswith(
        f"attestation {first[:12]}: not counted: shown false by ruling {ruling[:12]}; {slashed}"
    )
    assert r.out.splitlines()[1].startswith(f"attestation {later[:12]}: not counted: {slashed}")
    refused(r, w, before, "attestations", "no attestation that counts by verifier")
    sound = w.on_bond("bob", w.bond("bob"))
    ok = agentd(*install_args(w, "--attestation", later, "--attestation", sound, "--verifier", "bob", *bonded))
    assert ok.code == 0, ok.out + ok.err
    assert f"attestation {sound[:12]}: counts: by verifier {w.named('bob')}, on bond" in ok.out


def test_an_attestation_on_a_bond_under_an_adjudicator_not_named_does_not_count(agentd, world: World) -> None:
    w = world
    claim = w.on_bond("alice", w.bond("alice", judge="other-judge"), judge="other-judge")
    before = w.files()
    r = agentd(*install_args(w, "--attestation", claim, "--verifier", "alice", "--bonded", "--adjudicator", "judge"))
    assert f"under adjudicator {w.named('other-judge')}, not one you named" in r.out.splitlines()[0]
    refused(r, w, before, "attestations", "no attestation that counts by verifier")


def test_an_attestation_on_a_bond_below_the_least_bond_does_not_count(agentd, world: World) -> None:
    w = world
    claim = w.on_bond("alice", w.bond("alice", cents=500))
    before = w.files()
    bonded = ("--attestation", claim, "--verifier", "alice", "--bonded", "--adjudicator", "judge")
    r = agentd(*install_args(w, *bonded))
    assert "holds 5.00 USD, less than the 10.00 USD you ask for" in r.out.splitlines()[0]
    refused(r, w, before, "attestations", "no attestation that counts by verifier")
    assert agentd(*install_args(w, *bonded, "--least-bond", "5")).code == 0


def test_an_attestation_on_a_withdrawn_bond_does_not_count(agentd, world: World) -> None:
    w = world
    bond = w.bond("alice")
    claim = w.on_bond("alice", bond)
    w.append("alice", BOND_WITHDRAW, {"bond": bond})
    before = w.files()
    r = agentd(*install_args(w, "--attestation", claim, "--verifier", "alice", "--bonded", "--adjudicator", "judge"))
    assert f"not counted: bond {bond[:12]} was withdrawn at Pulse" in r.out.splitlines()[0]
    refused(r, w, before, "attestations", "no attestation that counts by verifier")


def test_an_attestation_of_another_release_does_not_count(agentd, world: World) -> None:
    w = world
    rid, _ = crafted_release(w)
    claim = w.attest("alice", rid)
    before = w.files()
    r = agentd(*install_args(w, "--attestation", claim, "--verifier", "alice"))
    assert r.out.splitlines()[0] == f"attestation {claim[:12]}: not counted: about release {rid}, not {w.release}"
    refused(r, w, before, "attestations", "no attestation that counts by verifier")


def test_a_claim_that_is_no_attestation_and_a_negative_one_do_not_count(agentd, world: World) -> None:
    w = world
    negative = w.attest("alice", holds=False)
    before = w.files()
    r = agentd(
        *install_args(w, "--attestation", w.release_claim()["claim"], "--attestation", negative, "--verifier", "alice")
    )
    lines = r.out.splitlines()
    assert lines[0].endswith(f"not counted: not an {ATTESTATION} claim")
    assert lines[1].endswith("not counted: it says the release did not hold up")
    refused(r, w, before, "attestations", "no attestation that counts by verifier")


def test_bad_values_are_refused_in_one_line_with_exit_2(agentd, world: World) -> None:
    w = world
    claim = w.attest("alice")
    for args, said in [
        (
            ("improve", "install", CODE, "nope", "--source", w.checkout, "--patch", w.patch, "--verifier", "alice"),
            "'nope' is not a release id",
        ),
        (install_args(w, "--attestation", claim), "name at least one --verifier"),
        (install_args(w, "--attestation", claim, "--verifier", "nobody"), "no wallet named nobody"),
        (install_args(w, "--attestation", "zz", "--verifier", "alice"), "--attestation zz"),
        (
            install_args(w, "--attestation", claim, "--verifier", "alice", "--bonded"),
            "--bonded needs at least one --adjudicator",
        ),
        (install_args(w, "--attestation", claim, "--verifier", "alice", "--least-bond", "-5"), "out of range"),
        (("improve", "install", CODE, w.release, "--verifier", "alice"), "give --source CHECKOUT and --patch FILE"),
    ]:
        r = agentd(*args)
        assert r.code in (1, 2) and said in r.err and "Traceback" not in r.err, (args, r.err)
        assert len(r.err.strip().splitlines()) <= 2  # the line, and click's pointer to --help for a usage error
    assert not w.home.routes.install_record(CODE, w.release).exists()
