"""`agentd improve attest` on a home: a release found on the home's ledger, rebuilt and
scored in this home's sandbox with its models, and what was found published as
`agent.release-attestation/v1`, signed by the attester's wallet, on a bond when asked.
A bond posted for it goes on the ledger in the same append as the attestation, so a
refusal of either records neither.
`rerun` does the same for a challenge's rebuild recipe and publishes nothing.

What does not need the rebuild is refused before it starts: a wallet attesting a release
it published, a bond it does not have, a patch or sealed tasks that are not the ones the
ledger names, a checkout without the release's commit.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from agentd import __version__
from agentd.app import killswitch
from agentd.app.agent import model_factory
from agentd.app.bonds import affords, challenge_of
from agentd.app.ledger import open_ledger
from agentd.app.runners import sandbox_extras, sandbox_runner
from agentd.errors import AgentdError, WrongValue
from agentd.home import Home
from agentd.profiles import list_profiles, load_profile
from agentd.wallets import list_wallets, load_wallet, wallet_id_of
from improver import (
    ATTESTATION,
    ATTESTATION_PREDICATE,
    RELEASE_KIND,
    AttestSetup,
    EpisodeLimits,
    Finding,
    ImproverError,
    PublishedRelease,
    Rebuild,
    attest_release,
    load_sealed,
    published_release,
    release_claim_of,
    statement_about,
    statement_envelope,
)
from ledger import BOND_POST, Bond, Challenge, Entry, Ledger, LedgerError, RuleViolation, State, Wallet, bonds_in

RUNS = 4
EXPIRES_DAYS = 90
RUNNER = f"agentd {__version__}"
RELEASE_ID = re.compile(r"^[0-9a-f]{16}$")


@dataclass(frozen=True)
class AttestRequest:
    release: str  # a release id (16 hex digits) or its claim id, or a prefix of 4 digits or more
    source: Path
    patch: Path
    tasks: Path
    wallet: str
    adjudicator: str | None = None  # a wallet name or id
    bond_cents: int | None = None  # post a bond of this much with the attestation, in one append
    runs: int = RUNS
    publish_failure: bool = False
    expires_days: int = EXPIRES_DAYS
    out: Path | None = None  # where the attestation's in-toto envelope goes
    readable: tuple[Path, ...] = ()  # further read-only paths in the sandbox, as `improve code` takes them
    env: tuple[str, ...] = ()  # VAR=VALUE in the sandbox's environment


@dataclass(frozen=True)
class Attested:
    finding: Finding
    claim: str | None  # the attestation's, when one was published
    pulse: int | None
    bond: str | None
    adjudicator: str | None
    out: Path | None


def attest(home: Home, request: AttestRequest, progress: Callable[[str], None] = lambda line: None) -> Attested:
    """Rebuilds and scores the release; publishes what was found when it holds up, or
    (with `publish_failure`) when it does not."""
    _check(request)
    killswitch.refuse_if_on(home, "attest")
    signer = load_wallet(home, request.wallet)
    adjudicator = wallet_id_of(home, request.adjudicator) if request.adjudicator else None
    with open_ledger(home, read_only=True) as ledger:
        state = ledger.state()  # once: the release and the bond to attest on are read from the same fold
        entry, release = published(ledger, request.release, state)
        if entry.author == signer.id:
            raise AgentdError(
                f"wallet {request.wallet} published release {release.id}: a publisher cannot attest its own release"
            )
        bond = _bond(ledger, state, request, signer, adjudicator) if adjudicator else None
    setup = _setup(home, release, progress, *sandbox_extras(request.readable, request.env))
    finding = _rebuild(release, request.source, _read(request.patch), request.tasks, request.runs, setup)
    if not finding.holds and not request.publish_failure:
        return Attested(finding, None, None, None, None, None)
    with open_ledger(home) as ledger:
        made, posted = publish(
            ledger, signer, finding, expiry(request.expires_days), adjudicator, bond, request.bond_cents
        )
    if posted is not None:
        progress(f"posted bond {posted.claim_id} under adjudicator {adjudicator}: Pulse {posted.pulse}")
        bond = posted.claim_id
    if request.out:
        write_envelope(
            request.out, statement_envelope(statement_about(release.record, ATTESTATION_PREDICATE, made.body), signer)
        )
    return Attested(finding, made.claim_id, made.pulse, bond, adjudicator, request.out)


def publish(
    ledger: Ledger,
    signer: Wallet,
    finding: Finding,
    expires: str,
    adjudicator: str | None = None,
    bond: str | None = None,
    bond_cents: int | None = None,
) -> tuple[Entry, Entry | None]:
    """Appends the attestation of `finding` signed by `signer`, on `bond` under
    `adjudicator`, or with `bond_cents` on a bond of that much posted with it: the bond
    and the attestation in one transaction, both recorded or neither. The attestation's
    entry, and the bond's when one was posted."""
    if bond_cents is None or adjudicator is None:
        return ledger.append(signer, ATTESTATION, finding.body(RUNNER, expires, bond, adjudicator)), None
    judge = adjudicator  # narrowed to text for the body made once the bond is signed
    post = (signer, BOND_POST, {"cents": bond_cents, "adjudicator": judge})
    on_it = (signer, ATTESTATION, lambda signed: finding.body(RUNNER, expires, signed[0].claim_id, judge))
    try:
        posted, made = ledger.append_many([post, on_it])
    except RuleViolation as exc:
        raise AgentdError(f"neither the bond nor the attestation was recorded: {exc}") from None
    return made, posted


def rerun(
    home: Home,
    recipe: dict[str, Any],
    source: Path,
    patch: Path,
    tasks: Path,
    progress: Callable[[str], None] = lambda line: None,
) -> Finding:
    """Reruns a challenge's rebuild recipe in this home's own sandbox: the release it
    names (on this home's ledger) rebuilt with the release's own commands (the recipe's
    only for a step the release leaves open) and scored `runs` times (at most
    MAX_RERUN_RUNS) on the sealed tasks, which must be the recipe's. Publishes nothing."""
    rebuild = _following(home, recipe)
    release = rebuild.release
    return _rebuild(
        release, source, _read(patch), tasks, rebuild.runs, _setup(home, release, progress), digest=recipe.get("tasks")
    )


def _following(home: Home, recipe: Any) -> Rebuild:
    """How `recipe` reruns the release it names on this home's ledger."""
    if not isinstance(recipe, dict) or not isinstance(recipe.get("release"), str):
        raise AgentdError("the challenge carries no rebuild recipe naming a release")
    with open_ledger(home, read_only=True) as ledger:
        _, release = published(ledger, recipe["release"])
    try:
        return release.following(recipe)
    except ImproverError as exc:
        raise AgentdError(str(exc)) from None


@dataclass(frozen=True)
class Rerun:
    """A challenge's recipe rerun: what the attestation it disputes claimed, and what the
    rerun found."""

    challenge: Challenge
    claimed: dict[str, Any]  # the attestation's body
    found: Finding
    differs: tuple[str, ...] = ()  # how the recipe differs from the release it reran

    def lines(self) -> list[str]:
        """What the attestation claimed, how the recipe differs from the release, then
        what the rebuild here found, a line each."""
        claimed, found = self.claimed, self.found
        return [
            f"the attestation claimed the release {'holds up' if claimed['holds'] else 'does not hold up'}: "
            f"{claimed['after']['passed']}/{claimed['after']['runs']} against {claimed['before']['passed']}/"
            f"{claimed['before']['runs']} on the sealed tasks ({claimed['why']})",
            *self.differs,
            f"rebuilt here, it {'holds up' if found.holds else 'does not hold up'}: {found.why}",
        ]


def rerun_challenge(
    home: Home,
    challenge_ref: str,
    source: Path,
    patch: Path,
    tasks: Path,
    progress: Callable[[str], None] = lambda line: None,
) -> Rerun:
    """Reruns the rebuild recipe challenge `challenge_ref` carries, for its adjudicator to
    weigh beside the attestation's claim before ruling. Publishes nothing."""
    with open_ledger(home, read_only=True) as ledger:
        challenge = challenge_of(ledger, challenge_ref)
        claimed = ledger.find(challenge.claim).body
    if challenge.recipe is None:
        raise AgentdError(
            f"challenge {challenge.id[:16]} carries no rebuild recipe (its challenger did not give --recipe): "
            "rule on its evidence, or rebuild it with `agentd improve attest`"
        )
    differs = _following(home, challenge.recipe).differs  # refused here, before any rebuild, when it is bad
    return Rerun(challenge, claimed, rerun(home, challenge.recipe, source, patch, tasks, progress), differs)


def published(ledger: Ledger, ref: str, state: State | None = None) -> tuple[Entry, PublishedRelease]:
    """The agent.release/v1 claim `ref` names (a release id, or a claim id or its prefix)
    and the release as it and the seal claim it names say; a release id is looked up in
    `state` when given, else in the ledger's fold as it is now."""
    ref = ref.strip().lower()
    found = None
    if RELEASE_ID.fullmatch(ref):
        found = release_claim_of(ledger.state() if state is None else state, ref)
    try:
        entry = ledger.find(found["claim"] if found else ref)
    except LedgerError as exc:  # a malformed or unknown id: a wrong value, as for a bond's
        raise WrongValue(f"release {ref}: {exc}") from None
    if entry.kind != RELEASE_KIND:
        raise AgentdError(f"claim {entry.claim_id[:16]} is a {entry.kind} entry, not a release ({RELEASE_KIND})")
    try:
        return entry, published_release(ledger, entry)
    except ImproverError as exc:
        raise AgentdError(str(exc)) from None


def publisher_wallet(home: Home, author: str, name: str | None) -> Wallet:
    """The wallet `name`, or without one this home's wallet of id `author`."""
    if name:
        return load_wallet(home, name)
    mine = next((w for w in list_wallets(home) if w.id == author), None)
    if mine is None:
        raise AgentdError(f"no wallet of this home is {author}, which published it: give --wallet to sign with")
    return load_wallet(home, mine.name)


def _check(request: AttestRequest) -> None:
    if request.runs < 1 or request.expires_days < 1:
        raise WrongValue("--runs and --expires-in must be at least 1")
    if request.bond_cents is not None and not request.adjudicator:
        raise WrongValue("--bond posts a bond under an adjudicator: give --adjudicator WALLET too")
    if request.out and not request.out.parent.is_dir():
        raise WrongValue(f"--out {request.out}: its folder {request.out.parent} does not exist")
    sandbox_extras(request.readable, request.env)


def _bond(ledger: Ledger, state: State, request: AttestRequest, signer: Wallet, adjudicator: str) -> str | None:
    """The open bond to attest on as `state` has it, or None when --bond posts one (checked
    to be affordable)."""
    if request.bond_cents is not None:
        # Said before the rebuild; the bond's rule holds it again when it is posted.
        affords(ledger, signer.id, request.wallet, request.bond_cents, "post a bond of")
        return None
    standing: list[Bond] = [b for b in bonds_in(state).of_owner(signer.id) if b.adjudicator == adjudicator and b.stands]
    if not standing:
        raise AgentdError(
            f"wallet {request.wallet} has no open bond under adjudicator {adjudicator}: post one with --bond USD"
        )
    return standing[-1].id


def _rebuild(
    release: PublishedRelease,
    source: Path,
    patch: bytes,
    tasks_file: Path,
    runs: int,
    setup: AttestSetup,
    digest: Any = None,
) -> Finding:
    try:
        tasks = load_sealed(tasks_file)
        if digest is not None and tasks.digest != digest:
            raise ImproverError(
                f"{tasks_file}: its digest ({tasks.digest[:16]}) is not the recipe's tasks ({str(digest)[:16]})"
            )
        return asyncio.run(attest_release(release, source.resolve(), patch, tasks, setup, runs))
    except ImproverError as exc:
        raise AgentdError(str(exc)) from None


def _setup(
    home: Home,
    release: PublishedRelease,
    progress: Callable[[str], None],
    readable: tuple[Path, ...] = (),
    env: dict[str, str] | None = None,
) -> AttestSetup:
    """This home's sandbox with what the attester adds to it (`readable`, `env`), and the
    release's profile's models and limits when the home holds that profile (its `script:`
    paths are read from its folder)."""
    name = str(release.record.get("profile", ""))
    profile = load_profile(home, name) if name in list_profiles(home) else None
    return AttestSetup(
        runner=sandbox_runner(home),
        models=model_factory(home, profile.dir if profile else None),
        root=home.routes.attest_work(release.id),
        limits=profile.limits if profile else EpisodeLimits(),
        readable=readable,
        env=env or {},
        progress=progress,
        halted=lambda: killswitch.halted(home),
    )


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as exc:
        raise AgentdError(f"cannot read {path}: {exc.strerror}") from None


def expiry(days: int = EXPIRES_DAYS) -> str:
    """When an attestation issued now expires, `days` from now."""
    return _utc(datetime.now(UTC) + timedelta(days=days))


def write_envelope(path: Path, envelope: dict[str, Any]) -> None:
    path.write_text(json.dumps(envelope, indent=2) + "\n")


def _utc(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
