"""The lineage: every decision the loop made, one JSON line each, and its check.

`routes/PROFILE-lineage.jsonl` holds a line for every change tried, turned down, not
judged or kept, and for a loop that stopped. A kept change published with a wallet is
also an `agent.improvement/v1` claim holding the change, the agent before and after,
the counts on both sets, the intervals and the level (and with a challenger, what its
variants showed), naming its seal and the kept change it follows; a kept change to code
is an `agent.release/v1` claim holding the same and its release (improver/release.py). `check` holds each kept line to its claim,
each release to its patch and record, and each claim to a seal issued before it whose
tasks here still hash to what it published. `check_improvers` does the same for the
improvers kept (improver.metaloop), each held to its `agent.improver/v1` claim.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from improver.errors import ImproverError
from improver.files import append_line, read_lines
from improver.release import KIND as RELEASE_KIND
from improver.release import check as check_release
from improver.release import release_id
from improver.routes import Routes
from improver.seal import Seal
from improver.stats import Comparison
from improver.variant import Variant
from ledger import Entry, Ledger, LedgerError

KIND = "agent.improvement/v1"
IMPROVER_KIND = "agent.improver/v1"
KINDS = (KIND, RELEASE_KIND)  # a kept line's claim: a kept lesson, or a release
# The fields of a kept line that its claim must hold, exactly.
CLAIMED = (
    "profile", "step", "seal", "seal_claim", "follows", "change", "before", "after",
    "choose", "sealed", "confirmation", "confirmations", "level", "test", "errored", "practice", "challenge",
)  # fmt: skip


def chosen_counts(data: dict[str, Any]) -> str:
    """A decision's counts on what it was chosen on, as a proposer is told them:
    ` (a/b against c/d)`, or nothing when it has none."""
    choose = data.get("choose")
    return f" ({choose['change'][0]}/{choose['change'][1]} against {choose['current'][0]}/{choose['current'][1]})" if choose else ""


def comparison_json(c: Comparison) -> dict[str, Any]:
    return {
        "test": c.test,
        "level": c.level,
        "tasks": c.tasks,
        "change": [c.change_passed, c.change_runs],
        "current": [c.current_passed, c.current_runs],
        "interval": [c.low, c.high],
    }


# What a kept line must hold, and of what type, for the listing and the check to read it.
KEPT_FIELDS: dict[str, type | tuple[type, ...]] = {
    "at": str, "step": str, "change": str, "choose": dict, "sealed": dict, "confirmation": int,
    "confirmations": int, "seal": str, "after": dict, "claim": (str, type(None)), "pulse": (int, type(None)),
    "seal_claim": (str, type(None)),
}  # fmt: skip


class Lineage:
    def __init__(self, path: Path) -> None:
        self.path = path

    def append(self, line: dict[str, Any]) -> None:
        """One decision, flushed and synced, so a killed loop loses none it reported."""
        append_line(self.path, line)

    def lines(self) -> list[tuple[int, dict[str, Any]]]:
        found = read_lines(self.path)
        for number, line in found:
            if "decision" not in line:
                raise ImproverError(f"{self.path}: line {number}: not a lineage line (no decision)")
        return found

    def kept(self) -> list[tuple[int, dict[str, Any]]]:
        kept = [(n, line) for n, line in self.lines() if line["decision"] == "kept"]
        for number, line in kept:
            wrong = [f for f, kind in KEPT_FIELDS.items() if not isinstance(line.get(f), kind) or isinstance(line.get(f), bool)]
            if wrong:
                raise ImproverError(f"{self.path}: line {number}: a kept line without a proper {', '.join(wrong)}; it was damaged")
        return kept

    def step(self, step: str) -> dict[str, Any]:
        """A kept step by its id or a unique prefix of it."""
        found = [line for _, line in self.kept() if line["step"].startswith(step)]
        if not found:
            raise ImproverError(f"no kept step {step!r} in {self.path} (list them with: agentd lineage PROFILE)")
        if len(found) > 1:
            raise ImproverError(f"step {step!r} is ambiguous: give more of it")
        return found[0]

    def last_claim(self) -> str | None:
        """The claim of the last kept change published, which the next one follows."""
        claims = [line["claim"] for _, line in self.kept() if line.get("claim")]
        return claims[-1] if claims else None

    def recover(self, profile: str, ledger: Ledger, seals: set[str]) -> list[dict[str, Any]]:
        """Appends a kept line for each of the profile's claims (kept lessons and releases)
        on its seals that the lineage lacks: a loop killed between publishing a change and recording it left
        the claim alone, and the next kept change must follow it. Returns the lines added."""
        have = {line.get("claim") for _, line in self.kept()}
        added = []
        claims = sorted((e for kind in KINDS for e in ledger.entries(kind=kind)), key=lambda e: e.pulse or 0)
        for entry in claims:
            body = entry.body
            if body.get("profile") != profile or body.get("seal") not in seals or entry.claim_id in have:
                continue
            line = {"at": entry.at, "profile": profile, "round": None, "decision": "kept", "recovered": True}
            line |= {f: body.get(f) for f in CLAIMED} | {"claim": entry.claim_id, "pulse": entry.pulse}
            line["variant"] = Variant.from_json(body.get("after")).id
            self.append(line)
            added.append(line)
        return added


def summary(line: dict[str, Any]) -> str:
    """A kept line as `agentd lineage` lists it."""
    choose, sealed = line["choose"], line["sealed"]
    claim = f"; claim {line['claim'][:16]}" if line.get("claim") else "; not published"
    return (
        f"{line['at']} step {line['step']}: {line['change']} — "
        f"{choose['change'][0]}/{choose['change'][1]} up from {choose['current'][0]}/{choose['current'][1]} on the tasks to choose on, "
        f"{sealed['change'][0]}/{sealed['change'][1]} up from {sealed['current'][0]}/{sealed['current'][1]} on sealed tasks "
        f"(confirmation {line['confirmation']} of {line['confirmations']}){_challenged(line.get('challenge'))}{claim}"
    )


def improver_summary(line: dict[str, Any]) -> str:
    """A kept improver's line (improver.metaloop) as `agentd lineage` lists it."""
    choose, held = line.get("choose") or {}, line.get("held") or {}
    claim = f"; claim {str(line['claim'])[:16]}" if line.get("claim") else "; not published"
    try:
        counts = (
            f"{choose['change'][0]}/{choose['change'][1]} against {choose['current'][0]}/{choose['current'][1]} on the "
            f"problems given, {held['change'][0]}/{held['change'][1]} against {held['current'][0]}/{held['current'][1]} "
            f"on those held out"
        )
    except (KeyError, IndexError, TypeError):
        counts = "its counts are damaged"
    return (
        f"{line.get('at')} improver {line.get('improver')}, step {line.get('step')}: {line.get('change')} — {counts} "
        f"(confirmation {line.get('confirmation')} of {line.get('confirmations')}){claim}"
    )


def _challenged(challenge: Any) -> str:
    """What a kept step's challenge showed, as `agentd lineage` lists it."""
    if not isinstance(challenge, dict):
        return ""
    if not challenge.get("variants"):
        return f"; unchallenged: {challenge.get('unchallenged')}"
    change, current = challenge["change"], challenge["current"]
    return f"; {change[0]}/{change[1]} against {current[0]}/{current[1]} on {challenge['variants']} variants the challenger wrote"


UNVERIFIED = "the ledger does not verify"


@dataclass
class Report:
    lines: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    verified: bool = True  # False when the ledger itself did not verify, and nothing was held to it


def check(lineage: Lineage, profile: str, ledger: Ledger, seals: dict[str, Seal], routes: Routes | None = None) -> Report:
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
            what = f"release {release_id(code['commit'], code['patch'])}, its patch as published," if code else f"step {line['step']}:"
            report.lines.append(
                f"{what} on the ledger as claim {line['claim'][:16]} (Pulse {line['pulse']}), "
                f"confirmed on tasks sealed at Pulse {seal_entry.pulse}"
            )
    for kind in KINDS:
        for entry in ledger.entries(kind=kind):
            if entry.body.get("profile") == profile and entry.claim_id not in claimed:
                report.problems.append(f"claim {entry.claim_id[:16]} (Pulse {entry.pulse}) keeps a change of {profile} that {lineage.path} does not hold")
    for claim, entry in used.items():
        seal = seals.get(entry.body["seal"])
        if seal is None:
            continue
        spent, allowed = seal.state().spent, seal.terms.confirmations
        if spent > allowed:
            report.problems.append(f"seal {seal.id} spent {spent} confirmations but allows {allowed}")
        report.lines.append(
            f"the seal {seal.id} is on the ledger as claim {claim[:16]} (Pulse {entry.pulse}), {spent} of its {allowed} confirmations spent"
        )
    return report


def _check_kept(line: dict[str, Any], ledger: Ledger, seals: dict[str, Seal], used: dict[str, Entry], routes: Routes) -> str | None:
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


# The fields of a kept improver's line that its claim must hold, exactly.
IMPROVER_CLAIMED = (
    "profile", "step", "follows", "change", "before", "after", "improver", "problems", "held_out", "held_out_digest",
    "choose", "held", "confirmation", "confirmations", "level", "test",
)  # fmt: skip


def check_improvers(lineage: Lineage, profile: str, ledger: Ledger) -> Report:
    """Holds every improver kept (the profile's improver lineage) to its claim, and every
    such claim of the profile to a line; the ledger is verified by `check` first."""
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
            report.lines.append(f"improver {line.get('improver')}, kept as step {line.get('step')}: kept without a wallet, so not on the ledger")
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
    for entry in ledger.entries(kind=IMPROVER_KIND):
        if entry.body.get("profile") == profile and entry.claim_id not in claimed:
            report.problems.append(f"claim {entry.claim_id[:16]} (Pulse {entry.pulse}) keeps an improver of {profile} that {lineage.path} does not hold")
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
