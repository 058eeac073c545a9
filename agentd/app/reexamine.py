"""An examination run again on its revealed seal: what anyone does to check an examiner,
and what the adjudicator of the examiner's bond does before ruling on a challenge.

The bundle (agentd improve reveal keeps it; the examiner serves it to anyone) is first
held against the seal's claim and the reveal's signed digest, then the examination's two
arms run again here, on this home's models, and its decision is made again at the level
of the confirmation it spent. Nothing is spent or published.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentd.app.bonds import challenge_of
from agentd.app.examiner import sealed_trials
from agentd.app.ledger import open_ledger
from agentd.app.rebuilt import Rebuilt, rebuild
from agentd.app.runners import sandbox_runner
from agentd.errors import AgentdError, WrongValue
from agentd.home import Home
from improver import (
    EXAMINATION,
    SEAL_REVEAL,
    Confirmation,
    EpisodeLimits,
    Examined,
    ImproverError,
    LocalExamination,
    Revealed,
    SealedBaseline,
    Stop,
    Variant,
    examined_from,
    read_revealed,
)
from ledger import Entry, LedgerError

LEFT_AS = "nothing was spent or published"
CONCURRENCY = 8


@dataclass(frozen=True)
class Reexamined:
    """An examination as its examiner signed it, and as a rerun here finds it."""

    examination: Entry
    claimed: Examined
    found: Examined

    @property
    def holds(self) -> bool:
        return self.found.said.outcome is self.claimed.said.outcome

    def lines(self) -> list[str]:
        n = self.examination.body["confirmation"]
        head = f"examination {self.examination.claim_id[:16]} (confirmation {n} of {self.examination.body['confirmations']})"
        verdict = (
            "it holds up"
            if self.holds
            else f"it does not hold up: the examiner said {self.claimed.said.outcome.value}, "
            f"a rerun finds {self.found.said.outcome.value}"
        )
        return [
            f"{head} said: {_said(self.claimed)}",
            f"rerun here on the revealed tasks: {_said(self.found)}",
            verdict,
        ]

    def to_json(self) -> dict[str, Any]:
        return {
            "examination": self.examination.claim_id,
            "claimed": _json(self.claimed),
            "found": _json(self.found),
            "holds": self.holds,
        }


def _json(examined: Examined) -> dict[str, Any]:
    said = examined.said
    comparison = said.comparison
    counts = (
        {
            "change": [comparison.change_passed, comparison.change_runs],
            "agent": [comparison.current_passed, comparison.current_runs],
        }
        if comparison
        else None
    )
    return {"outcome": said.outcome.value, "sealed": counts, "lost": len(said.lost), "errored": examined.errored}


def _said(examined: Examined) -> str:
    said = examined.said
    counts = f": {said.comparison.describe()}" if said.comparison else ""
    lost = f", losing {len(said.lost)} sealed task(s)" if said.lost else ""
    return f"{said.outcome.value}{counts}{lost}"


def reexamine(
    home: Home,
    examination_ref: str,
    revealed: Path,
    models_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    source: Path | None = None,
) -> Reexamined:
    """Examination `examination_ref` (a claim id or a prefix) run again on the revealed
    bundle at `revealed`, with this home's models (and `script:` models from `models_dir`);
    a code change's arms rebuilt from the checkout `source` in this home's sandbox."""
    with open_ledger(home, read_only=True) as ledger:
        exam = _entry(ledger.find, examination_ref)
        if exam.kind != EXAMINATION:
            raise AgentdError(f"claim {exam.claim_id[:16]} is a {exam.kind} entry, not an examination ({EXAMINATION})")
        seal_claim = ledger.find(exam.body["seal_claim"])
        reveal = next(
            (e for e in ledger.entries(kind=SEAL_REVEAL) if e.body["seal_claim"] == seal_claim.claim_id), None
        )
    if reveal is None:
        raise AgentdError(
            f"seal {seal_claim.body['seal']} is not revealed on this ledger: its examiner reveals it once its "
            "confirmations are spent or its publisher retires it (agentd improve reveal)"
        )
    try:
        bundle = read_revealed(revealed.read_bytes(), seal_claim.body, reveal.body["bundle"])
    except (ImproverError, OSError) as exc:
        raise AgentdError(f"{revealed}: {exc}") from None
    asked = bundle.asked.get(exam.claim_id)
    if not asked:
        raise AgentdError(f"{revealed} holds no request for examination {exam.claim_id[:16]}: it cannot be rerun")
    n = exam.body["confirmation"]
    if n is None:
        raise AgentdError(
            f"examination {exam.claim_id[:16]} spent no confirmation ({exam.body['outcome']}): it made no decision to rerun"
        )
    try:
        change, current = Variant.from_json(asked["change"]), Variant.from_json(asked["current"])
        runs, baseline_runs = int(asked["runs"]), int(asked["baseline_runs"])
    except (ImproverError, KeyError, TypeError, ValueError) as exc:
        raise AgentdError(f"{revealed}: examination {exam.claim_id[:16]}'s request is malformed ({exc})") from None
    if change.id != exam.body["change"]:
        raise AgentdError(f"{revealed}: examination {exam.claim_id[:16]} was asked about another change than it names")
    if change.commit and source is None:
        raise WrongValue(
            f"examination {exam.claim_id[:16]} is of a code change: give --source, a checkout holding its commit"
        )
    spent = Confirmation(n, exam.body["confirmations"], exam.body["level"])
    rerun = Rerun(home, bundle, models_dir, progress, source)
    found = asyncio.run(rerun.again(asked, change, current, runs, baseline_runs, spent))
    return Reexamined(exam, examined_from(exam.body, exam.claim_id), found)


@dataclass(frozen=True)
class Rerun:
    """Where an examination is run again: this home, the revealed seal, its models, and
    for a code change the checkout its arms are rebuilt from."""

    home: Home
    bundle: Revealed
    models_dir: Path | None
    progress: Callable[[str], None] | None
    source: Path | None

    async def again(
        self,
        asked: dict[str, Any],
        change: Variant,
        current: Variant,
        runs: int,
        baseline_runs: int,
        spent: Confirmation,
    ) -> Examined:
        with tempfile.TemporaryDirectory(prefix="agentd-reexamine-") as folder:
            seal = self.bundle.open(Path(folder))
            rebuilt = await self._rebuilt(Path(folder) / "code", asked, change, current)
            candidate = rebuilt.candidate if rebuilt else None
            trials = sealed_trials(
                self.home, self.models_dir, seal, EpisodeLimits(), CONCURRENCY, self.progress, LEFT_AS, candidate
            )
            examination = LocalExamination(seal, trials, SealedBaseline(seal, trials, baseline_runs))
            try:
                return await examination.again(change, current, runs, spent)
            except Stop as exc:
                raise AgentdError(f"the rerun stopped: {exc}") from None
            finally:
                if rebuilt is not None:
                    rebuilt.close()

    async def _rebuilt(self, root: Path, asked: dict[str, Any], change: Variant, current: Variant) -> Rebuilt | None:
        if not change.commit or self.source is None:
            return None
        return await rebuild(sandbox_runner(self.home), self.source, root, asked, [current, change])


def reexamine_challenged(
    home: Home,
    challenge_ref: str,
    revealed: Path,
    models_dir: Path | None = None,
    progress: Callable[[str], None] | None = None,
    source: Path | None = None,
) -> Reexamined:
    """The examination challenge `challenge_ref` disputes, run again: for its bond's
    adjudicator to weigh before ruling."""
    with open_ledger(home, read_only=True) as ledger:
        challenge = challenge_of(ledger, challenge_ref)
    return reexamine(home, challenge.claim, revealed, models_dir, progress, source)


def _entry(find: Callable[[str], Entry], ref: str) -> Entry:
    try:
        return find(ref)
    except LedgerError as exc:
        raise WrongValue(f"examination {ref}: {exc}") from None
