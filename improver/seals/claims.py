"""Ledger rules for the improver's claims: seals, kept improvements, releases, the
attestations third parties publish about releases, and kept improvers.

They run when a claim is appended and again when an auditor replays the log, so a
claim that names a seal not issued before it, spends a confirmation the seal does not
allow, or is signed by a wallet other than the seal's publisher, never gets in and never
verifies. Anyone may append to a log; what a claim may spend is its author's own: a
seal's confirmations are the wallet's that published the seal, held-out problems' the
wallet's that first claimed them, and a release id is its first publisher's.
"""

from __future__ import annotations

import math
import re
from typing import Any

from improver.base.digests import digest
from improver.base.errors import ImproverError
from improver.decide import levels
from improver.seals.settings import Settings
from ledger import Entry, RuleSet, RuleViolation, State, back, bonds_in

HEX64 = re.compile(r"^[0-9a-f]{64}$")
SEAL = "agent.seal/v1"
IMPROVEMENT = "agent.improvement/v1"
RELEASE = "agent.release/v1"
ATTESTATION = "agent.release-attestation/v1"
IMPROVER = "agent.improver/v1"
RECEIPT = "agent.examiner-receipt/v1"
EXAMINATION = "agent.examination/v1"
RETIREMENT = "agent.seal-retirement/v1"
REVEAL = "agent.seal-reveal/v1"
HEX32 = re.compile(r"^[0-9a-f]{32}$")  # a wallet id
TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
SEAL_FIELDS = ("seal", "profile", "set_digest", "train_digest", "sealed_digest", "confirmations", "level", "test")


def register(rules: RuleSet) -> None:
    rules.register(SEAL, _seal)
    rules.register(IMPROVEMENT, _improvement)
    rules.register(RELEASE, _release)
    rules.register(ATTESTATION, _attestation)
    rules.register(IMPROVER, _improver)
    rules.register(RECEIPT, _receipt)
    rules.register(EXAMINATION, _examination)
    rules.register(RETIREMENT, _retirement)
    rules.register(REVEAL, _reveal)


def _seal(state: State, entry: Entry) -> None:
    body = entry.body
    missing = [f for f in SEAL_FIELDS if f not in body]
    _require(not missing, f"a seal claim needs {', '.join(missing)}")
    _require(_named(body["seal"]), "seal must be the seal's id, as text")
    _require(_named(body["profile"]), "profile must be named")
    for name in ("set_digest", "train_digest", "sealed_digest"):
        _require(isinstance(body[name], str) and HEX64.fullmatch(body[name]), f"{name} must be a SHA-256 in hex")
    k = body["confirmations"]
    _require(_count(k) and k >= 1, "confirmations must be a count of at least 1")
    level = body["level"]
    _require(
        isinstance(level, (int, float))
        and not isinstance(level, bool)
        and math.isclose(level, levels.confirmation_level(k)),
        f"level must be 0.05/{k}, the Bonferroni level for {k} confirmations",
    )
    _require(
        isinstance(body["test"], str) and body["test"] in levels.TESTS, f"test must be one of {', '.join(levels.TESTS)}"
    )
    seals: dict[str, Any] = state.ns("seals")
    _require(all(s["seal"] != body["seal"] for s in seals.values()), f"seal {body['seal']} is already published")
    contents = body.get("contents", [])  # absent from seals published before they were carried
    _require(
        isinstance(contents, list) and all(isinstance(c, str) and HEX64.fullmatch(c) for c in contents),
        "contents must be a list of the sealed tasks' content keys (SHA-256 in hex)",
    )
    sealed: dict[str, str] = state.ns("sealed_contents")
    again = next((c for c in contents if c in sealed), None)
    _require(again is None, f"a task with content key {again} was sealed already, by claim {sealed.get(again or '')}")
    shown = body.get("shown", [])  # absent from seals published before it was carried
    _require(
        isinstance(shown, list) and all(isinstance(c, str) and HEX64.fullmatch(c) for c in shown),
        "shown must be a list of the content keys (SHA-256 in hex) of the tasks to choose on",
    )
    # A task to choose on is shown to the proposer: it is never sealed, before or after.
    # Read without `ns`, which would add an empty namespace to the fold of a ledger whose
    # claims never carried `shown`, and so make its stored snapshots disagree.
    seen = state.namespaces.get("shown_contents", {})
    shown_before = next((c for c in contents if c in seen or c in shown), None)
    _require(
        shown_before is None,
        f"a task with content key {shown_before} was shown to a proposer, to choose on, by claim "
        f"{seen.get(shown_before or '', entry.claim_id)}: a task a proposer saw is never sealed",
    )
    sealed_shown = next((c for c in shown if c in sealed), None)
    _require(
        sealed_shown is None,
        f"a task with content key {sealed_shown} was sealed by claim {sealed.get(sealed_shown or '')}: "
        "a sealed task is never shown to a proposer",
    )
    examiner = body.get("examiner")
    _require(
        examiner is None
        or (
            isinstance(examiner, dict)
            and isinstance(examiner.get("wallet"), str)
            and HEX32.fullmatch(examiner["wallet"])
            and isinstance(examiner.get("key"), str)
            and HEX64.fullmatch(examiner["key"])
        ),
        "examiner must be {wallet, key}: the examiner's wallet id and its X25519 key in hex",
    )
    for content in contents:
        sealed[content] = entry.claim_id
    if shown:
        seen = state.ns("shown_contents")
        for content in shown:
            seen.setdefault(content, entry.claim_id)
    # Its author is the one wallet that may spend its confirmations (see `_improvement`).
    seals[entry.claim_id] = {
        "seal": body["seal"],
        "pulse": entry.pulse,
        "confirmations": k,
        "spent": 0,
        "author": entry.author,
        # Only when there is one, so the folds of ledgers from before examiners stay as they were.
        **({"examiner": examiner["wallet"], "examined": 0} if examiner else {}),
    }


def _improvement(state: State, entry: Entry) -> None:
    body = entry.body
    seal_claim = body.get("seal_claim")
    # Types before lookups: a list or an object is no key, and must be refused, not crash.
    if not isinstance(seal_claim, str) or not HEX64.fullmatch(seal_claim):
        raise RuleViolation("seal_claim must name a seal's claim (64 hex digits)")
    seal = state.ns("seals").get(seal_claim)
    if seal is None:
        raise RuleViolation("an improvement must name, by claim, a seal published before it")
    # Anyone may append; only the seal's publisher may spend it. Otherwise a stranger who
    # names the operator's seal with its last confirmation leaves the operator none.
    _require(
        entry.author == seal["author"],
        f"seal claim {seal_claim[:16]} was published by wallet {seal['author']}, not {entry.author}: only the "
        "wallet that published a seal claims changes on it",
    )
    n = body.get("confirmation")
    _require(_count(n), "confirmation must be a number")
    _require(n <= seal["confirmations"], f"confirmation {n} is beyond the {seal['confirmations']} the seal allows")
    if "examiner" in seal:
        _examined_by(state, seal_claim, body, n)
    # Confirmations spent on changes that were not kept leave gaps; none is spent twice.
    _require(n > seal["spent"], f"confirmation {n} of that seal was already claimed")
    follows = body.get("follows")
    _require(follows is None or isinstance(follows, str), "follows must be an earlier improvement's claim id, or null")
    improvements: dict[str, Any] = state.ns("improvements")
    _require(follows is None or follows in improvements, "follows must name an earlier improvement claim, or be null")
    _require(body.get("profile") is None or _named(body["profile"]), "profile must be named")
    seal["spent"] = n
    improvements[entry.claim_id] = {"pulse": entry.pulse, "seal_claim": seal_claim, "profile": body.get("profile")}


HEX40 = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")  # a SHA-1 or SHA-256 commit
RELEASE_TEXT = ("summary", "operator")


def _release(state: State, entry: Entry) -> None:
    """A kept code change: an improvement (its seal, its confirmation, what it follows)
    whose release names the commit, the patch's digest and the commands, and is the code
    its `after` names. It takes its place among the improvements, so either may follow it."""
    release = entry.body.get("release")
    if not isinstance(release, dict):
        raise RuleViolation("a release claim needs its release (commit, patch, commands)")
    commit, patch = release.get("commit"), release.get("patch")
    _require(isinstance(commit, str) and HEX40.fullmatch(commit), "release.commit must be a commit id in hex")
    _require(isinstance(patch, str) and HEX64.fullmatch(patch), "release.patch must be the patch's SHA-256 in hex")
    _require(
        release.get("release") == digest({"commit": commit, "patch": patch})[:16],
        "release.release must be the id of its commit and patch",
    )
    commands = release.get("commands")
    _require(
        isinstance(commands, dict)
        and set(commands) == {"build", "test", "candidate"}
        and all(isinstance(c, str) for c in commands.values()),
        "release.commands must give build, test and candidate as text",
    )
    _require(
        all(isinstance(release.get(f), str) for f in RELEASE_TEXT), "release.summary and release.operator must be text"
    )
    after = entry.body.get("after")
    code = after.get("code") if isinstance(after, dict) else None
    _require(code == {"commit": commit, "patch": patch}, "after.code must be the release's commit and patch")
    releases: dict[str, Any] = state.ns("releases")
    earlier = releases.get(release["release"])
    # A release is found by its id: another wallet publishing the same commit and patch on
    # a seal of its own would take it over, as its publisher, with its own commands.
    if earlier is not None and earlier["author"] != entry.author:
        raise RuleViolation(
            f"release {release['release']} was published by wallet {earlier['author']} (claim "
            f"{earlier['claim'][:16]}): no other wallet publishes it again"
        )
    _improvement(state, entry)
    releases[release["release"]] = {"claim": entry.claim_id, "author": entry.author, "pulse": entry.pulse}


ATTESTATION_COUNTS = ("before", "after")


def _attestation(state: State, entry: Entry) -> None:
    """What someone other than its publisher found on rebuilding and scoring a release.
    On a bond (`bond` and `adjudicator` both given) it is a claim the bond backs."""
    body = entry.body
    rid, claim = body.get("release"), body.get("release_claim")
    published = state.ns("releases").get(rid) if isinstance(rid, str) else None
    if published is None:
        raise RuleViolation(f"release {rid} has no agent.release/v1 claim on the log to attest")
    _require(claim == published["claim"], f"release_claim must be release {rid}'s claim ({published['claim']})")
    _require(entry.author != published["author"], "a publisher cannot attest its own release")
    ids = {"commit": body.get("commit"), "patch": body.get("patch")}
    _require(digest(ids)[:16] == rid, f"commit and patch must be release {rid}'s")
    _require(isinstance(body.get("holds"), bool), "holds must be true (the release held up) or false")
    _require(isinstance(body.get("why"), str), "why must say, as text, what the attester found")
    _require(
        isinstance(body.get("tasks"), str) and HEX64.fullmatch(body["tasks"]),
        "tasks must be the sealed tasks' SHA-256 in hex",
    )
    for name in ATTESTATION_COUNTS:
        tally = body.get(name)
        _require(
            isinstance(tally, dict)
            and _count(tally.get("passed"))
            and _count(tally.get("runs"))
            and 0 <= tally["passed"] <= tally["runs"],
            f"{name} must be {{passed, runs}} counts, passed at most runs",
        )
    expires = body.get("expires")
    if not (isinstance(expires, str) and TIME.fullmatch(expires)):
        raise RuleViolation("expires must be a UTC time (YYYY-MM-DDTHH:MM:SSZ)")
    _require(expires > entry.at, f"expires ({expires}) must come after the attestation is issued ({entry.at})")
    bond, adjudicator = body.get("bond"), body.get("adjudicator")
    _require(
        (bond is None) == (adjudicator is None), "a bonded attestation names both its bond and the bond's adjudicator"
    )
    if bond is not None:
        back(state, bond, entry.claim_id, entry.author, adjudicator)
    state.ns("attestations")[entry.claim_id] = {
        "release": rid,
        "author": entry.author,
        "pulse": entry.pulse,
        "holds": body["holds"],
        "expires": expires,
        "bond": bond,
        "adjudicator": adjudicator,
    }


def _examined_by(state: State, seal_claim: str, body: dict[str, Any], n: Any) -> None:
    """A change kept on a seal an examiner holds names the examination that confirmed it:
    the examiner's, on that seal, that confirmation, kept, of the very change."""
    claim = body.get("examination")
    found = state.ns("examinations").get(claim) if isinstance(claim, str) else None
    _require(found is not None, "a change kept on an examiner's seal must name its agent.examination/v1 claim")
    assert found is not None
    _require(found["seal_claim"] == seal_claim, f"examination {str(claim)[:16]} is of another seal")
    _require(
        found["confirmation"] == n, f"examination {str(claim)[:16]} spent confirmation {found['confirmation']}, not {n}"
    )
    _require(
        found["outcome"] == "kept", f"examination {str(claim)[:16]} did not confirm the change ({found['outcome']})"
    )
    after = body.get("after")
    _require(
        isinstance(after, dict) and digest(after)[:16] == found["change"],
        f"examination {str(claim)[:16]} examined another change",
    )


def _seal_by_id(state: State, seal: Any) -> tuple[str, dict[str, Any]] | None:
    return next(((c, s) for c, s in state.ns("seals").items() if s["seal"] == seal), None)


def _receipt(state: State, entry: Entry) -> None:
    """The examiner's word that it holds a seal's sealed tasks: by the examiner the seal
    names, once, for the sealed digest the seal's terms hold."""
    body = entry.body
    found = _seal_by_id(state, body.get("seal"))
    _require(found is not None, f"seal {body.get('seal')!r} is not published on this log")
    assert found is not None
    claim, seal = found
    _require("examiner" in seal, f"seal {seal['seal']} names no examiner")
    _require(
        entry.author == seal["examiner"], f"seal {seal['seal']} names examiner {seal['examiner']}, not {entry.author}"
    )
    _require(
        isinstance(body.get("sealed_digest"), str) and HEX64.fullmatch(body["sealed_digest"]),
        "sealed_digest must be a SHA-256 in hex",
    )
    receipts: dict[str, Any] = state.ns("examiner_receipts")
    _require(claim not in receipts, f"seal {seal['seal']}'s examiner gave its receipt already")
    bond = body.get("bond")
    if bond is not None:  # every examination of the seal is then a claim this bond backs
        back(state, bond, entry.claim_id, entry.author, _adjudicator(state, bond))
    receipts[claim] = {
        "pulse": entry.pulse,
        "sealed_digest": body["sealed_digest"],
        **({"bond": bond} if bond is not None else {}),
    }


def _adjudicator(state: State, bond: Any) -> Any:
    """The adjudicator bond `bond` names (None when there is no such bond: `back` says so)."""
    found = bonds_in(state).bond(bond) if isinstance(bond, str) else None
    return found.adjudicator if found else None


EXAMINATION_OUTCOMES = ("kept", "not better", "loses tasks", "not judged", "holdout turned down", "canary passed")


def _examination(state: State, entry: Entry) -> None:
    """What an examiner found asking its sealed tasks about a change: by the examiner its
    seal names, confirmations spent one after another up to the seal's k; never a task's
    name or text (counts only)."""
    body = entry.body
    seal_claim = body.get("seal_claim")
    seal = state.ns("seals").get(seal_claim) if isinstance(seal_claim, str) else None
    _require(seal is not None, "an examination must name, by claim, a seal published before it")
    assert seal is not None and isinstance(seal_claim, str)
    _require("examiner" in seal, f"seal {seal['seal']} names no examiner")
    _require(
        entry.author == seal["examiner"], f"seal {seal['seal']} names examiner {seal['examiner']}, not {entry.author}"
    )
    _require(
        "retired" not in seal, f"seal {seal['seal']} was retired at Pulse {seal.get('retired')}: it examines no more"
    )
    _require(body.get("outcome") in EXAMINATION_OUTCOMES, f"outcome must be one of {', '.join(EXAMINATION_OUTCOMES)}")
    for name in ("change", "current"):
        _require(isinstance(body.get(name), str) and len(body[name]) == 16, f"{name} must be a variant's id")
    n = body.get("confirmation")
    _require(n is None or _count(n), "confirmation must be a number, or null when none was spent")
    if n is not None:
        _require(n <= seal["confirmations"], f"confirmation {n} is beyond the {seal['confirmations']} the seal allows")
        _require(n == seal["examined"] + 1, f"confirmation {n} does not follow {seal['examined']}, the last examined")
        seal["examined"] = n
    _require(body["outcome"] != "kept" or n is not None, "a kept change spent a confirmation")
    receipt = state.namespaces.get("examiner_receipts", {}).get(seal_claim, {})
    if "bond" in receipt:
        back(state, receipt["bond"], entry.claim_id, entry.author, _adjudicator(state, receipt["bond"]))
    state.ns("examinations")[entry.claim_id] = {
        "seal_claim": seal_claim,
        "confirmation": n,
        "outcome": body["outcome"],
        "change": body["change"],
        "pulse": entry.pulse,
    }


def _examiners_seal(state: State, entry: Entry) -> tuple[str, dict[str, Any]]:
    """The seal claim an entry names by `seal_claim`, which must name an examiner."""
    seal_claim = entry.body.get("seal_claim")
    seal = state.ns("seals").get(seal_claim) if isinstance(seal_claim, str) else None
    _require(seal is not None, f"{entry.kind} must name, by claim, a seal published before it")
    assert seal is not None and isinstance(seal_claim, str)
    _require("examiner" in seal, f"seal {seal['seal']} names no examiner")
    return seal_claim, seal


def _retirement(state: State, entry: Entry) -> None:
    """The seal's publisher retires a seal an examiner holds: it examines nothing more, and
    the examiner may reveal its tasks before its confirmations are spent."""
    _keys(entry, {"seal_claim"}, '{"seal_claim": <the seal\'s claim id>}')
    _, seal = _examiners_seal(state, entry)
    _require(
        entry.author == seal["author"],
        f"seal {seal['seal']} was published by wallet {seal['author']}: only it retires the seal",
    )
    _require("retired" not in seal, f"seal {seal['seal']} was retired already, at Pulse {seal.get('retired')}")
    seal["retired"] = entry.pulse


REVEAL_SHAPE = (
    '{"seal_claim", "sealed_digest", "bundle": <SHA-256 of what was revealed>, "examinations": [<claim ids>]}'
)


def _reveal(state: State, entry: Entry) -> None:
    """The examiner's word that it revealed a seal's sealed tasks, and every examination it
    made on them with what it was asked, as a bundle of that digest: by the examiner the
    seal names, once, only when the seal is spent or retired, listing exactly the
    examinations of that seal the log holds (so none can be left out of what is checked)."""
    body = entry.body
    _keys(entry, {"seal_claim", "sealed_digest", "bundle", "examinations"}, REVEAL_SHAPE)
    seal_claim, seal = _examiners_seal(state, entry)
    _require(
        entry.author == seal["examiner"], f"seal {seal['seal']} names examiner {seal['examiner']}, not {entry.author}"
    )
    _require("revealed" not in seal, f"seal {seal['seal']} was revealed already, at Pulse {seal.get('revealed')}")
    _require(
        "retired" in seal or seal["examined"] >= seal["confirmations"],
        f"seal {seal['seal']} has confirmations left and was not retired by its publisher: its tasks stay sealed",
    )
    receipt = state.namespaces.get("examiner_receipts", {}).get(seal_claim)
    _require(receipt is not None, f"seal {seal['seal']}'s examiner never gave its receipt: it has nothing to reveal")
    assert receipt is not None
    _require(
        body["sealed_digest"] == receipt["sealed_digest"],
        f"sealed_digest must be {receipt['sealed_digest']}, the one the examiner's receipt named",
    )
    _require(isinstance(body["bundle"], str) and HEX64.fullmatch(body["bundle"]), "bundle must be a SHA-256 in hex")
    listed = body["examinations"]
    _require(isinstance(listed, list) and all(isinstance(c, str) for c in listed), "examinations must list claim ids")
    held = {c for c, e in state.namespaces.get("examinations", {}).items() if e["seal_claim"] == seal_claim}
    _require(
        set(listed) == held and len(listed) == len(held),
        f"examinations must list exactly the {len(held)} examinations of seal {seal['seal']} on the log",
    )
    seal["retired"] = seal.get("retired", entry.pulse)
    seal["revealed"] = entry.pulse


def _keys(entry: Entry, required: set[str], shape: str) -> None:
    if set(entry.body) != required:
        raise RuleViolation(f"{entry.kind} body is {shape}")


def examinations_on(state: State, seal_claim: str) -> list[str]:
    """The claims of the examinations of seal claim `seal_claim` the log holds, in order."""
    found = state.namespaces.get("examinations", {})
    return [claim for claim, e in found.items() if e["seal_claim"] == seal_claim]


def seal_record(state: State, seal_claim: str) -> dict[str, Any] | None:
    """What the log's rules hold of seal claim `seal_claim` (its seal id, confirmations,
    and for an examiner's seal: examined, and the Pulses it was retired and revealed at)."""
    found = state.namespaces.get("seals", {}).get(seal_claim)
    return dict(found) if found else None


def examination_of(state: State, claim: str) -> dict[str, Any] | None:
    """{seal_claim, confirmation, outcome, change, pulse} of examination `claim`, or None."""
    found = state.namespaces.get("examinations", {}).get(claim)
    return dict(found) if found else None


def seal_publisher(state: State, seal_claim: str) -> str | None:
    """The wallet that published seal claim `seal_claim`, the one wallet that may claim
    changes on it; None when the log holds no such seal claim."""
    found = state.namespaces.get("seals", {}).get(seal_claim)
    return str(found["author"]) if found else None


def release_claim_of(state: State, release: str) -> dict[str, Any] | None:
    """{claim, author, pulse} of `release`'s agent.release/v1 claim, or None."""
    found = state.namespaces.get("releases", {}).get(release)
    return dict(found) if found else None


def attestation_of(state: State, claim: str) -> dict[str, Any] | None:
    """{release, author, pulse, holds, expires, bond, adjudicator} of attestation `claim`, or None."""
    found = state.namespaces.get("attestations", {}).get(claim)
    return dict(found) if found else None


IMPROVER_FIELDS = (
    "profile",
    "step",
    "change",
    "before",
    "after",
    "improver",
    "problems",
    "held_out",
    "held_out_digest",
    "choose",
    "held",
    "confirmation",
    "confirmations",
    "level",
    "test",
)


def _improver(state: State, entry: Entry) -> None:
    """A kept improver: the improver before and after, named by its id, the problems it
    was graded on, and the confirmation of its held-out problems it spent, at the level
    their confirmations allow; each confirmation of one set of held-out problems once."""
    body = entry.body
    missing = [f for f in IMPROVER_FIELDS if f not in body]
    _require(not missing, f"an improver claim needs {', '.join(missing)}")
    _require(_named(body["profile"]) and _named(body["change"]), "profile and change must be named")
    try:
        before, after = Settings.from_json(body["before"], "before"), Settings.from_json(body["after"], "after")
    except (ImproverError, TypeError) as exc:
        raise RuleViolation(f"before and after must be improvers (instructions and settings): {exc}") from None
    _require(body["improver"] == after.id and after != before, "improver must be the id of after, a change from before")
    for name in ("problems", "held_out"):
        _require(
            isinstance(body[name], list)
            and body[name]
            and all(isinstance(d, str) and HEX64.fullmatch(d) for d in body[name]),
            f"{name} must list the problems' digests",
        )
    _require(not set(body["problems"]) & set(body["held_out"]), "a held-out problem cannot be a problem to choose on")
    _require(
        body["held_out_digest"] == digest(sorted(body["held_out"])), "held_out_digest must be the digest of held_out"
    )
    k, n = body["confirmations"], body["confirmation"]
    _require(_count(k) and k >= 1 and _count(n) and 1 <= n <= k, "confirmation must be a count from 1 to confirmations")
    level = body["level"]
    _require(
        isinstance(level, (int, float))
        and not isinstance(level, bool)
        and math.isclose(level, levels.confirmation_level(k)),
        f"level must be 0.05/{k}, the Bonferroni level for {k} confirmations",
    )
    _require(
        body["step"] == digest({"improver": after.id, "held_out": body["held_out_digest"], "confirmation": n})[:16],
        "step must be the id of the improver, its held-out problems and the confirmation",
    )
    _require(body["test"] in levels.TESTS, f"test must be one of {', '.join(levels.TESTS)}")
    for part in ("choose", "held"):
        _require(isinstance(body[part], dict), f"{part} must hold the comparison")
    spent: dict[str, list[Any]] = state.ns("improver_confirmations")  # [spent, allowed, first claimant]
    key = f"{body['profile']}/{body['held_out_digest']}"
    before_n, allowed, claimant = spent.get(key, [0, k, entry.author])
    # As a seal's confirmations are its publisher's, held-out problems' are their first claimant's.
    _require(
        entry.author == claimant,
        f"those held-out problems were first claimed by wallet {claimant}, not {entry.author}: only it claims "
        "their confirmations",
    )
    _require(k == allowed, f"those held-out problems allow {allowed} confirmations, as first claimed, not {k}")
    _require(n > before_n, f"confirmation {n} of those held-out problems was already claimed")
    improvers: dict[str, Any] = state.ns("improvers")
    follows = body.get("follows")
    _require(
        follows is None or (isinstance(follows, str) and follows in improvers),
        "follows must name an earlier improver claim, or be null",
    )
    spent[key] = [n, k, claimant]
    improvers[entry.claim_id] = {"pulse": entry.pulse, "profile": body["profile"]}


def _named(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _require(condition: Any, why: str) -> None:
    if not condition:
        raise RuleViolation(why)
