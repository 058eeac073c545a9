"""The lineage: every decision the loop made, one JSON line each.

`routes/PROFILE-lineage.jsonl` holds a line for every change tried, turned down, not
judged or kept, and for a loop that stopped. A kept change published with a wallet is
also an `agent.improvement/v1` claim holding the change, the agent before and after,
the counts on both sets, the intervals and the level (and with a challenger, what its
variants showed), naming its seal and the kept change it follows; a kept change to code
is an `agent.release/v1` claim holding the same and its release (improver/code/release.py).
improver.trust.audit holds the lineage to the ledger (`agentd lineage --check`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from improver.base.errors import ImproverError
from improver.base.files import append_line, read_lines
from improver.base.variant import Variant
from improver.decide.stats import Comparison
from improver.seals.claims import IMPROVEMENT as KIND, RELEASE as RELEASE_KIND
from ledger import Ledger

KINDS = (KIND, RELEASE_KIND)  # a kept line's claim: a kept lesson, or a release
# The fields of a kept line that its claim must hold, exactly.
CLAIMED = (
    "profile",
    "step",
    "seal",
    "seal_claim",
    "follows",
    "change",
    "before",
    "after",
    "choose",
    "sealed",
    "confirmation",
    "confirmations",
    "level",
    "test",
    "errored",
    "practice",
    "challenge",
)


def chosen_counts(data: dict[str, Any]) -> str:
    """A decision's counts on what it was chosen on, as a proposer is told them:
    ` (a/b against c/d)`, or nothing when it has none."""
    choose = data.get("choose")
    return (
        f" ({choose['change'][0]}/{choose['change'][1]} against {choose['current'][0]}/{choose['current'][1]})"
        if choose
        else ""
    )


def comparison_json(c: Comparison) -> dict[str, Any]:
    return {
        "test": c.test,
        "level": c.level,
        "tasks": c.tasks,
        "change": [c.change_passed, c.change_runs],
        "current": [c.current_passed, c.current_runs],
        "interval": None if c.low is None else [c.low, c.high],
        **({} if c.p is None else {"p": c.p, "gain": c.gain}),
    }


def comparison_from(data: dict[str, Any]) -> Comparison:
    """A comparison read back from `comparison_json`'s form, with `better` beside it."""
    low, high = data["interval"] if data.get("interval") else (None, None)
    change, current = data["change"], data["current"]
    better = data.get("better")
    return Comparison(
        data["test"],
        data["level"],
        data["tasks"],
        change[0],
        change[1],
        current[0],
        current[1],
        low,
        high,
        bool(better),
        data.get("p"),
        data.get("gain"),
    )


# What a kept line must hold, and of what type, for the listing and the check to read it.
KEPT_FIELDS: dict[str, type | tuple[type, ...]] = {
    "at": str,
    "step": str,
    "change": str,
    "choose": dict,
    "sealed": dict,
    "confirmation": int,
    "confirmations": int,
    "seal": str,
    "after": dict,
    "claim": (str, type(None)),
    "pulse": (int, type(None)),
    "seal_claim": (str, type(None)),
}


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
            wrong = [
                f
                for f, kind in KEPT_FIELDS.items()
                if not isinstance(line.get(f), kind) or isinstance(line.get(f), bool)
            ]
            if wrong:
                raise ImproverError(
                    f"{self.path}: line {number}: a kept line without a proper {', '.join(wrong)}; it was damaged"
                )
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
            after: Any = body.get("after")  # what the claim holds, whatever it is: from_json refuses a non-variant
            line["variant"] = Variant.from_json(after).id
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
    """A kept improver's line (improver.meta.metaloop) as `agentd lineage` lists it."""
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
