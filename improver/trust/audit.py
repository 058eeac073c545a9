"""The lineage audited against the ledger: what `agentd lineage --check` proves.

`check` holds each kept line of a profile's lineage to its claim, each release to its
patch and record (improver/code/release.py), and each claim to a seal issued before it
whose tasks here still hash to what it published; a claim of the profile that no line
holds is a problem too. `check_improvers` does the same for the improvers kept
(improver.meta.metaloop), each held to its `agent.improver/v1` claim. It sits above the
code loop because a release is checked against its patch; the lineage itself
(improver.loop.lineage) is written by the loop below.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from improver.base.errors import ImproverError
from improver.base.routes import Routes
from improver.code.release import check as check_release, release_id
from improver.loop.lineage import CLAIMED, KINDS, Lineage
from improver.seals.claims import (
    IMPROVEMENT as KIND,
    IMPROVER as IMPROVER_KIND,
    IMPROVER_FIELDS,
    RELEASE as RELEASE_KIND,
    seal_record,
)
from improver.seals.seal import Seal
from ledger import Entry, Ledger, LedgerError

UNVERIFIED = "the ledger does not verify"


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    verified: bool = True  # False when the ledger itself did not verify, and nothing was held to it


def check(
    lineage: Lineage, profile: str, ledger: Ledger, seals: dict[str, Seal], routes: Routes | None = None
) -> Report:
    """Holds every kept change to its claim, and every claim to its seal, on a ledger that
    verifies (signatures, rules, tree): a claim rewritten in the store is caught there.
    A release is held to its patch and record in `routes` too (the lineage's folder
    unless given)."""
    routes = routes or Routes(lineage.path.parent)
    report = Report()
    try:
        kept = lineage.kept()
    except ImproverError as exc:
        report.problems.append(str(exc))
        return report
    audit = ledger.verify()
    if not audit.ok:
        assert audit.problem is not None
        report.problems.append(f"{UNVERIFIED}: Pulse {audit.problem.pulse}: {audit.problem.reason}")
        report.verified = False
        return report
    claimed: set[str] = set()
    used: dict[str, Entry] = {}
    for number, line in kept:
        where = f"{lineage.path}: line {number}: step {line.get('step')}"
        if not line.get("claim"):
            report.lines.append(f"step {line.get('step')}: kept without a wallet, so not on the ledger")
            continue
        claimed.add(line["claim"])
        problem = _check_kept(line, ledger, seals, used, routes)
        if problem:
            report.problems.append(f"{where}: {problem}")
        else:
            seal_entry = used[line["seal_claim"]]
            code = line["after"].get("code")
            what = (
                f"release {release_id(code['commit'], code['patch'])}, its patch as published,"
                if code
                else f"step {line['step']}:"
            )
            report.lines.append(
                f"{what} on the ledger as claim {line['claim'][:16]} (Pulse {line['pulse']}), "
                f"confirmed on tasks sealed at Pulse {seal_entry.pulse}"
            )
    # Only the seal's publisher may claim on it (improver.seals.claims), so a claim on one
    # of these seals that the lineage does not hold is this home's; anyone's claims on
    # seals of their own, whatever profile they name, are theirs to answer for.
    ours = {claim for seal in seals.values() if (claim := seal.state().claim)}
    for kind in KINDS:
        for entry in ledger.entries(kind=kind):
            if entry.body.get("seal_claim") in ours and entry.claim_id not in claimed:
                report.problems.append(
                    f"claim {entry.claim_id[:16]} (Pulse {entry.pulse}) keeps a change of {profile} that {lineage.path} does not hold"
                )
    for claim, entry in used.items():
        seal = seals.get(entry.body["seal"])
        if seal is None:
            continue
        spent, allowed, held = seal.state().spent, seal.terms.confirmations, ""
        if seal.terms.examiner is not None:  # its examiner spends them: the ledger counts its examinations
            spent = (seal_record(ledger.state(), claim) or {}).get("examined", 0)
            held = f", its sealed tasks held by examiner {seal.terms.examiner['wallet'][:16]}"
        if spent > allowed:
            report.problems.append(f"seal {seal.id} spent {spent} confirmations but allows {allowed}")
        report.lines.append(
            f"the seal {seal.id} is on the ledger as claim {claim[:16]} (Pulse {entry.pulse}), {spent} of its "
            f"{allowed} confirmations spent{held}"
        )
    return report


def _check_kept(
    line: dict[str, Any], ledger: Ledger, seals: dict[str, Seal], used: dict[str, Entry], routes: Routes
) -> str | None:
    try:
        entry = ledger.find(line["claim"])
    except LedgerError:
        return f"its claim {line['claim'][:16]} is not on the ledger"
    expected = RELEASE_KIND if "code" in line["after"] else KIND
    if entry.kind != expected:
        return f"its claim {line['claim'][:16]} is a {entry.kind}, not a {expected}"
    if entry.pulse != line.get("pulse"):
        return f"its claim is at Pulse {entry.pulse}, not {line.get('pulse')} as the line says"
    differ = [f for f in CLAIMED if entry.body.get(f) != line.get(f)]
    if differ:
        return f"the line does not match its claim ({', '.join(differ)} differ)"
    try:
        seal_entry = ledger.find(line["seal_claim"])
    except LedgerError:
        return f"the seal it names, claim {str(line['seal_claim'])[:16]}, is not on the ledger"
    if seal_entry.kind != "agent.seal/v1" or seal_entry.body.get("seal") != line["seal"]:
        return f"claim {line['seal_claim'][:16]} is not the publication of seal {line['seal']}"
    assert seal_entry.pulse is not None and entry.pulse is not None  # entries read back from the log carry their Pulse
    if seal_entry.pulse >= entry.pulse:
        return f"its seal was published at Pulse {seal_entry.pulse}, not before the change (Pulse {entry.pulse})"
    used[line["seal_claim"]] = seal_entry
    if expected == RELEASE_KIND:
        problem = check_release(line["after"], entry.body.get("release"), routes)
        if problem:
            return problem
    return _check_seal_files(seals.get(line["seal"]), seal_entry)


def _check_seal_files(seal: Seal | None, published: Entry) -> str | None:
    if seal is None:
        return f"the tasks of seal {published.body['seal']} are not here to check"
    for name in ("set_digest", "train_digest", "sealed_digest"):
        if getattr(seal.terms, name) != published.body.get(name):
            return f"seal {seal.id}'s {name} here is not the one it published"
    try:
        seal.train()
    except ImproverError as exc:
        return str(exc)
    return None


# The fields of a kept improver's line that its claim must hold, exactly: all its rule requires, and what it follows.
IMPROVER_CLAIMED = ("follows", *IMPROVER_FIELDS)


def check_improvers(lineage: Lineage, profile: str, ledger: Ledger, authors: Collection[str] = ()) -> Report:
    """Holds every improver kept (the profile's improver lineage) to its claim, and every
    claim of the profile that is this home's to a line: one on held-out problems the
    lineage graded on, or by one of `authors` (the home's wallets, so a lineage file lost
    still leaves its claims named). The ledger is verified by `check` first."""
    report = Report()
    try:
        kept = [(n, line) for n, line in lineage.lines() if line["decision"] == "kept"]
    except ImproverError as exc:
        report.problems.append(str(exc))
        return report
    claimed: set[str] = set()
    for number, line in kept:
        claim = line.get("claim")
        if not isinstance(claim, str):
            report.lines.append(
                f"improver {line.get('improver')}, kept as step {line.get('step')}: kept without a wallet, so not on the ledger"
            )
            continue
        claimed.add(claim)
        problem = _check_improver(line, ledger)
        where = f"{lineage.path}: line {number}: step {line.get('step')}"
        if problem:
            report.problems.append(f"{where}: {problem}")
        else:
            report.lines.append(
                f"improver {line['improver']}, kept as step {line['step']}: on the ledger as claim {claim[:16]} (Pulse {line['pulse']}), "
                f"confirmation {line['confirmation']} of {line['confirmations']} of its held-out problems"
            )
    # Held-out problems belong to the wallet that first claimed them (improver.seals.claims),
    # so a stranger's improver claim naming this profile is on problems of its own.
    ours = {line.get("held_out_digest") for _, line in lineage.lines()} - {None}
    for entry in ledger.entries(kind=IMPROVER_KIND):
        mine = entry.body.get("held_out_digest") in ours or entry.author in authors
        if entry.body.get("profile") == profile and mine and entry.claim_id not in claimed:
            report.problems.append(
                f"claim {entry.claim_id[:16]} (Pulse {entry.pulse}) keeps an improver of {profile} that {lineage.path} does not hold"
            )
    return report


def _check_improver(line: dict[str, Any], ledger: Ledger) -> str | None:
    try:
        entry = ledger.find(line["claim"])
    except LedgerError:
        return f"its claim {line['claim'][:16]} is not on the ledger"
    if entry.kind != IMPROVER_KIND:
        return f"its claim {line['claim'][:16]} is a {entry.kind}, not a {IMPROVER_KIND}"
    if entry.pulse != line.get("pulse"):
        return f"its claim is at Pulse {entry.pulse}, not {line.get('pulse')} as the line says"
    differ = [f for f in IMPROVER_CLAIMED if entry.body.get(f) != line.get(f)]
    if differ:
        return f"the line does not match its claim ({', '.join(differ)} differ)"
    return None
