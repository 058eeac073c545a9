"""`agentd improve install` on a home: a release applied to a checkout only when the
installer's four checks hold (improver/trust/install.py), and `--undo`.

Wallets given by name are this home's; the release, its attestations and the bonds
behind them are read from the home's ledger. It holds the profile's loop lock, so an
install never races `improve code --apply` on the same profile.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentd.app.adopt import holding_loop_lock
from agentd.app.ledger import open_ledger
from agentd.errors import AgentdError, WrongValue
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.wallets import list_wallets, wallet_id_of
from improver import (
    DEFAULT_ALLOW,
    LEAST_BOND,
    InstallReview,
    Trust,
    install_release,
    installed_release,
    review_install,
    undo_install,
    utc_now,
)
from ledger import Ledger, LedgerError

RELEASE_ID = re.compile(r"[0-9a-f]{16}")


@dataclass(frozen=True)
class InstallRequest:
    source: Path
    patch: Path
    attestations: tuple[str, ...]  # claim ids or prefixes of at least 4 hex digits
    verifiers: tuple[str, ...]  # wallet names in this home, or wallet ids
    allow: tuple[str, ...] = DEFAULT_ALLOW
    bonded: bool = False
    adjudicators: tuple[str, ...] = ()  # wallet names or ids
    least_bond: int | None = None  # cents; LEAST_BOND when bonded and not given


@dataclass(frozen=True)
class Installing:
    """What `install` found: the checks, and the record when it installed."""

    review: InstallReview
    record: dict[str, Any] | None
    record_path: Path

    @property
    def installed(self) -> bool:
        return self.record is not None


def install(home: Home, profile: str, release: str, request: InstallRequest, now: str | None = None) -> Installing:
    """Runs the four checks and applies the release's patch only when all hold. `now`
    (a UTC time stamp) stands in for the clock when attestations' expiry is judged."""
    _check(release, request)
    load_profile(home, profile)
    patch = request.patch.read_bytes()
    path = home.routes.install_record(profile, release)
    with holding_loop_lock(home, profile), open_ledger(home) as ledger:
        if installed_release(home.routes, profile, release) is not None:
            raise AgentdError(
                f"release {release} is already installed for {profile} ({path}); "
                f"take it back out first with: agentd improve install {profile} {release} --undo"
            )
        trust = Trust(
            verifiers=tuple(wallet_id_of(home, v) for v in request.verifiers),
            allow=request.allow,
            bonded=request.bonded,
            adjudicators=tuple(wallet_id_of(home, a) for a in request.adjudicators),
            least_bond=LEAST_BOND if request.least_bond is None else request.least_bond,
            names={w.id: w.name for w in list_wallets(home, skip=lambda exc: None)},
        )
        claims = tuple(_claim_id(ledger, c) for c in request.attestations)
        stamp = now or utc_now()
        found = review_install(ledger, release, patch, request.source.absolute(), claims, trust, stamp)
        if not found.ok:
            return Installing(found, None, path)
        return Installing(found, install_release(home.routes, profile, found, request.source, patch, stamp), path)


def undo(home: Home, profile: str, release: str, source: Path | None = None) -> dict[str, Any]:
    """Takes installed `release` back out of the checkout it went into; `source`, when
    given, must be that checkout."""
    if not RELEASE_ID.fullmatch(release):
        raise WrongValue(f"{release!r} is not a release id: give its 16 hex digits (agentd improve releases)")
    load_profile(home, profile)
    with holding_loop_lock(home, profile):
        record = installed_release(home.routes, profile, release)
        if record is not None and source is not None and source.resolve() != Path(record["checkout"]):
            raise WrongValue(f"release {release} was installed into {record['checkout']}, not {source}")
        return undo_install(home.routes, profile, release)


def _check(release: str, request: InstallRequest) -> None:
    if not RELEASE_ID.fullmatch(release):
        raise WrongValue(f"{release!r} is not a release id: give its 16 hex digits (agentd improve releases)")
    if not request.verifiers:
        raise WrongValue("name at least one --verifier: the wallet whose attestation you trust")
    if not request.allow or any(a.startswith("/") or ".." in Path(a).parts for a in request.allow):
        raise WrongValue("--allow takes paths inside the checkout, relative to its top")
    if request.bonded and not request.adjudicators:
        raise WrongValue("--bonded needs at least one --adjudicator: whose rulings you trust")
    if not request.bonded and (request.adjudicators or request.least_bond is not None):
        raise WrongValue("--adjudicator and --least-bond go with --bonded")


def _claim_id(ledger: Ledger, claim: str) -> str:
    try:
        return ledger.find(claim).claim_id
    except LedgerError as exc:
        raise WrongValue(f"--attestation {claim}: {exc}") from None
