"""The improvement loop: the agent improves itself on its seal, round after round.

Each round draws a variant to build on from the archive, has the proposer write
changes, holds them to the gates, tries each in stages on the tasks to choose on,
screens it against the agent as it is, with a challenger has it write variants of the
tasks the change newly passes and turns the change down as a shortcut when it is not
better on them too (improver.loop.challenger), confirms it on the sealed tasks at the seal's
corrected level, and keeps it only when it holds up there too, losing no task the agent
passes. Every decision is a line in the lineage; a kept change published with a wallet
is an `agent.improvement/v1` claim.

Runs that errored (provider faults after retries) are never counted as failures: a
change whose evidence they leave too thin is not judged, and no confirmation is spent
on it. The kill switch is checked before each proposal and each trial; a stop request
(SIGTERM, Ctrl-C) ends the loop between steps, or cancels the trial under way, leaving
the archive and the seal as the last finished step left them.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from itertools import takewhile
from typing import Any

import numpy as np

from improver.base.clock import utc_now
from improver.base.digests import digest
from improver.base.errors import ImproverError
from improver.base.protocol import EpisodeLimits, Model, ProviderError, TokenUsage
from improver.base.variant import Variant
from improver.decide import decision
from improver.decide.archive import Archive, Archived
from improver.decide.decision import CHALLENGE, CHOOSE, SEALED, Decision, Evidence, Outcome, Rule
from improver.decide.stats import Comparison, Tally
from improver.episodes.harness import Candidate, ModelFactory, run_cost
from improver.episodes.trials import Halted, TaskTally, TrialResult, run_trials
from improver.loop.challenger import Challenger, Shown, newly_passed, write_variants
from improver.loop.gates import SealedText, turned_down
from improver.loop.lineage import KIND, Lineage, chosen_counts, comparison_json
from improver.loop.practice import with_practice
from improver.loop.proposer import TOOL_NAME, Failed, Proposal, Tried, describe, messages_for, propose
from improver.loop.writing import SealReached
from improver.seals.seal import Seal, SealSpent, is_canary
from improver.seals.settings import Settings
from improver.tasks.task import Task, TaskSet

ROOT_LABEL = "the agent as it was"
HISTORY_SHOWN = 30  # the most recent changes the proposer is told of

Publish = Callable[[str, dict[str, Any]], tuple[str, int]]  # kind, body -> (claim id, Pulse)


@dataclass(frozen=True)
class Event:
    """One thing the loop did, as an operator line and as data (`--json`)."""

    kind: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)


class Stop(Exception):
    """The loop must stop now; the message says why and what to do."""


class Interrupted(Stop):
    """Asked to stop (SIGTERM, Ctrl-C): not a verdict on anything."""


class BudgetTooSmall(Stop):
    """--max-tokens is below what one run may cost: refused before anything is spent."""


@dataclass
class Loop:
    profile: str
    current: Variant  # the agent as it is
    allowed_models: list[str]
    seal: Seal
    agent: Candidate
    models: ModelFactory
    proposer: Model
    settings: Settings
    archive: Archive
    lineage: Lineage
    runs: int = 4
    baseline_runs: int | None = None  # the agent's runs of each task; default decision.BASELINE_FACTOR x runs
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)
    concurrency: int = 8
    publish: Publish | None = None
    apply: Callable[[Variant, str], None] | None = None
    halted: Callable[[], str | None] = lambda: None
    max_tokens: int | None = None
    rng: np.random.Generator = field(default_factory=np.random.default_rng)
    on_event: Callable[[Event], None] = lambda event: None
    progress: Callable[[str], None] | None = None  # "trial: 40/320 runs", at most once a second
    practice: TaskSet | None = None  # practice tasks chosen on beside the seal's (improver.loop.practice)
    challenge: Challenger | None = None  # a challenger's variants between screening and the sealed tasks

    def __post_init__(self) -> None:
        if self.baseline_runs is None:
            self.baseline_runs = decision.BASELINE_FACTOR * self.runs
        if self.baseline_runs < self.runs:
            raise Stop(f"--baseline-runs ({self.baseline_runs}) must be at least --runs ({self.runs})")
        self.train = with_practice(self.seal, self.practice)
        most = max(
            (run_cost(t, self.limits) for t in [*self.train.tasks, *self.seal.sealed.tasks]),
            default=self.limits.max_tokens,
        )
        if self.max_tokens is not None and self.max_tokens < most:
            # A conversation's simulated user has an allowance of its own, as large as the run's.
            users = ", twice that for a task with a simulated user" if most > self.limits.max_tokens else ""
            raise BudgetTooSmall(
                f"--max-tokens {self.max_tokens} is less than one run may cost (the profile's limit of "
                f"{self.limits.max_tokens} tokens a run{users}): give at least {most}"
            )
        self.sealed_text = SealedText.of(self.seal.real_tasks)
        self.used = TokenUsage()
        self.stopping = asyncio.Event()
        self.round = 0
        self.follows: str | None = self.lineage.last_claim()
        self._sealed_current: tuple[str, TrialResult] | None = None
        self.challenged: dict[str, Any] | None = None  # what the variants showed of the change being judged
        self.stopped: Stop | None = None  # why the last run stopped early, if it did
        if self.publish and not self.seal.state().claim:
            raise Stop(
                f"seal {self.seal.id} is not on the ledger, so a kept change could not name it; run without --wallet"
            )

    def request_stop(self) -> None:
        """Called from a signal handler: the loop stops at the next step it can."""
        self.stopping.set()

    # -- the run ---------------------------------------------------------------------

    async def run(self, rounds: int) -> None:
        try:
            await self._baseline()
            for self.round in range(1, rounds + 1):
                await self._round()
        except Stop as stop:
            self.stopped = stop
            self._emit("stopped", f"stopped: {stop}", reason=str(stop))
            self._record({"decision": "stopped", "reason": str(stop)})
        finally:
            self.archive.save()
            self._emit(
                "tokens",
                f"{self.used.total} tokens used",
                tokens_in=self.used.tokens_in,
                tokens_out=self.used.tokens_out,
            )
            self._emit("recorded", f"recorded in {self.lineage.path}", lineage=str(self.lineage.path))

    async def _baseline(self) -> None:
        """The agent as it is, on the tasks to choose on, measured with `baseline_runs` runs
        of each task: from the archive when it holds them, else tried afresh (a change just
        kept is measured afresh too, since its own runs were picked for looking good)."""
        base = self._archived(self.current)
        if (
            base is not None
            and base.runs == self.baseline_runs
            and not _thin(base.tallies, base.tallies, self.train.tasks)
        ):
            self._as_it_is(base, measured=False)
            return
        result = await self._trial(self.current, self.train.tasks, self.baseline_runs)
        if base is None:
            base = self.archive.add(
                self.current, None, result.tallies(), self.baseline_runs, ROOT_LABEL, result.wrong(), result.errored
            )
        else:
            base.tallies, base.wrong, base.errored = result.tallies(), result.wrong(), result.errored
            base.runs = self.baseline_runs
        self.archive.save()
        self._as_it_is(base, measured=True)

    def _as_it_is(self, base: Archived, measured: bool, name: str = "the agent as it is", **more: Any) -> None:
        """Says how the agent as it is did on the tasks to choose on, when measured afresh;
        the code loop says it either way, as the code as it stands (improver.code.codeloop)."""
        if measured:
            self._emit(
                "baseline",
                f"{name}: {base.counts().replace('runs passed', 'runs of the tasks to choose on passed')}",
                variant=self.current.id,
                passed=base.passed,
                judged=base.judged,
                errored=base.errored,
                **more,
            )

    def _archived(self, variant: Variant) -> Archived | None:
        return self.archive.find(variant)

    async def _round(self) -> None:
        await self._baseline()
        self._go(expected=self.limits.max_tokens)  # no round unless a run of what it proposes could follow
        parent = self.archive.pick(self.rng)
        self._emit(
            "round",
            f"round {self.round}: building on variant {parent.number} ({parent.label}), {parent.counts()}",
            parent=parent.number,
        )
        messages = messages_for(
            self.settings, parent.variant, self.allowed_models, self._failed(parent), self._history()
        )
        try:
            answer = await propose(self.proposer, self.settings, parent.variant, messages, self.left())
        except ProviderError as exc:
            self._emit("proposer", f"round {self.round}: the proposer errored ({exc}); no change this round")
            return
        self.used = self.used + answer.usage
        self._check_canary(answer.said)  # every call of the answer, before any is tried
        if not answer.proposals:
            self._emit("proposer", f"round {self.round}: the proposer proposed no change (no {TOOL_NAME} call)")
        for proposal in answer.proposals:
            await self._consider(proposal, parent)

    def _failed(self, parent: Archived) -> list[Failed]:
        return [
            Failed(task.task, parent.wrong.get(task.name, []))
            for task in self.train.tasks
            if task.name in parent.tallies and not parent.tallies[task.name].passes
        ]

    def _history(self) -> list[Tried]:
        return [Tried(h["change"], h["went"]) for h in self.archive.history[-HISTORY_SHOWN:]]

    # -- one change ------------------------------------------------------------------

    async def _consider(self, proposal: Proposal, parent: Archived) -> None:
        if proposal.variant is None:
            label = proposal.label or "a proposal"
            said = decision.gate(proposal.problem)
            self._decide(said, "turned down", label, said.reason, None, parent, reason=said.reason)
            return
        change = proposal.variant
        label = proposal.label or describe(change, parent.variant)
        why = turned_down(
            change,
            allowed_models=self.allowed_models,
            tried=self.archive.tried,
            sealed=self.sealed_text,
            max_lessons=self.settings.max_lessons,
        )
        if why:
            said = decision.gate(why)
            self._decide(said, "turned down", label, said.reason, change, parent, reason=said.reason)
            return
        first = await self._trial(change, self.train.tasks, 1)
        worse = decision.clearly_worse(first.tallies(), parent.tallies)
        if worse:
            assert worse.comparison is not None
            self._decide(
                worse,
                "tried",
                label,
                f"clearly worse than variant {parent.number} after one run of each task "
                f"({worse.comparison.describe()}): goes no further",
                change,
                parent,
                choose=comparison_json(worse.comparison),
            )
            return
        rest = [await self._trial(change, self.train.tasks, self.runs - 1)] if self.runs > 1 else []
        result = _combine([first, *rest])
        archived = self.archive.add(
            change, parent.number, result.tallies(), self.runs, label, result.wrong(), result.errored
        )
        await self._judge(change, label, parent, archived, result)

    async def _judge(
        self, change: Variant, label: str, parent: Archived, archived: Archived, result: TrialResult
    ) -> None:
        current = self._archived(self.current)
        assert current is not None  # the baseline put it there
        errored = archived.errored + current.errored
        rule = Rule.for_part(CHOOSE, self.seal.terms.test, self.seal.terms.confirmations, self.runs)
        said, extra = await self._decided(rule, change, self.train.tasks, archived.tallies, current.tallies)
        errored += extra
        if said.outcome is Outcome.NOT_JUDGED:
            self._not_judged(said, label, change, parent, errored)
            return
        screen = said.comparison
        assert screen is not None
        if said.outcome is not Outcome.GOES_ON:
            verdict = (
                f"it loses {', '.join(said.lost)}, which the agent passes"
                if said.outcome is Outcome.LOSES_TASKS
                else "not better beyond chance"
            )
            self._decide(
                said,
                "tried",
                label,
                f"{screen.describe()}{_contests(said)}{_left_out(errored)}: {verdict}",
                change,
                parent,
                choose=comparison_json(screen),
                lost=list(said.lost),
                contested=list(said.contested),
                errored=errored,
            )
            return
        self.challenged = (
            await self._challenge(change, label, parent, archived, current, screen) if self.challenge else None
        )
        if self.challenged is not None and self.challenged.get("shortcut"):
            return
        await self._confirm(change, label, parent, said, _rate(archived.tallies) - _rate(current.tallies), errored)

    async def _challenge(
        self, change: Variant, label: str, parent: Archived, archived: Archived, current: Archived, screen: Comparison
    ) -> dict[str, Any]:
        """The challenger's variants of the tasks the change newly passes, the agent as it
        is and as changed run on those that hold up, and the rule's word on them. Returns
        what they showed (for the kept step), `shortcut` set when the change was turned
        down; a challenge that could say nothing (no task to vary, no variant held up, the
        challenger errored, every run errored) lets the change go on, and says why."""
        assert self.challenge is not None
        varied = newly_passed(self.train.tasks, archived.tallies, current.tallies, self.challenge.tasks)
        if not varied:
            return self._unchallenged(label, "it newly passes no task to vary", [])
        self._go()
        shown = Shown(
            self.profile, self.train.operator, label, self.train.tasks, self.seal.real_tasks, self.seal.canary_in
        )

        def how(task: Task) -> str:
            was, now = current.tallies[task.name], archived.tallies[task.name]
            return f"the agent passed it in {was.passed} of {was.runs} runs; with the change, in {now.passed} of {now.runs}"

        try:
            variants = await write_variants(self.challenge, shown, varied, how, self.left)
        except SealReached as exc:
            raise Stop(str(exc)) from None
        self.used = self.used + variants.usage
        wrote = {"written": variants.written, "left_out": dict(variants.left_out), "calls": variants.calls}
        if variants.failed:
            why = f"the challenger errored through every retry ({variants.errors[0]}), so it is not judged on variants"
            return self._unchallenged(label, why, variants.of, **wrote)
        if not variants.tasks:
            why = f"no variant the challenger wrote of the {len(varied)} tasks it newly passes held up"
            return self._unchallenged(label, why, variants.of, **wrote)
        now = await self._trial(self.current, variants.tasks, self.runs)
        mine = await self._trial(change, variants.tasks, self.runs)
        said, extra = await self._decided(
            Rule.challenge(self.runs), change, variants.tasks, mine.tallies(), now.tallies()
        )
        errored = now.errored + mine.errored + extra
        if said.outcome is Outcome.NOT_JUDGED:
            why = f"{errored} runs on its variants errored, leaving some without a judged run, so it is not judged on them"
            return self._unchallenged(label, why, variants.of, **wrote)
        c = said.comparison
        assert c is not None
        record = {
            "challenger": self.challenge.model.name,
            "of": variants.of,
            "variants": len(variants.tasks),
            **comparison_json(c),
            "errored": errored,
            **wrote,
        }
        on = f"on {len(variants.tasks)} variants the challenger wrote of the tasks it newly passes, {c.describe()}{_contests(said)}"
        if said.outcome is Outcome.GOES_ON:
            self._emit(
                "challenged", f"challenged {label}: {on}{_left_out(errored)}: it goes on to the sealed tasks", **record
            )
            return record
        lost = f"; it loses variants {', '.join(said.lost)}, which the agent passes" if said.lost else ""
        self._decide(
            said,
            "tried",
            label,
            f"{screen.describe()} on the tasks to choose on, but a shortcut: {on}{lost}"
            f"{_left_out(errored)}; no confirmation spent",
            change,
            parent,
            choose=comparison_json(screen),
            challenge=record,
            lost=list(said.lost),
            contested=list(said.contested),
        )
        return {**record, "shortcut": True}

    def _unchallenged(self, label: str, why: str, of: list[str], **wrote: Any) -> dict[str, Any]:
        assert self.challenge is not None
        record = {"challenger": self.challenge.model.name, "of": of, "variants": 0, "unchallenged": why, **wrote}
        self._emit("unchallenged", f"unchallenged {label}: {why}; it goes on to the sealed tasks", **record)
        return record

    async def _decided(
        self, rule: Rule, change: Variant, tasks: Sequence[Task], mine: dict[str, Tally], current: dict[str, Tally]
    ) -> tuple[Decision, int]:
        return await decided(rule, tasks, mine, current, lambda batch, runs: self._trial(change, batch, runs))

    def _seal_has_room(self) -> None:
        """Before the sealed tasks are asked anything: a spent seal is noticed here, not after."""
        state = self.seal.state()
        if state.spent >= self.seal.terms.confirmations:
            raise Stop(
                f"seal {self.seal.id} has spent its {self.seal.terms.confirmations} confirmations: seal fresh tasks"
            )
        if state.holdout is not None and state.holdout.spent:
            raise Stop(f"seal {self.seal.id}'s reusable holdout may disagree no more: seal fresh tasks")

    async def _confirm(
        self, change: Variant, label: str, parent: Archived, screened: Decision, gain_choose: float, errored_choose: int
    ) -> None:
        screen = screened.comparison
        assert screen is not None
        self._seal_has_room()
        sealed_tasks = self.seal.sealed.tasks
        self.seal.mark_asked()
        now = await self._sealed_trial_of_current()
        mine = await self._trial(change, sealed_tasks, self.runs)
        self._check_canaries_passed(mine)
        real = [t for t in sealed_tasks if not is_canary(t)]
        change_tallies, current_tallies = mine.tallies(real), now.tallies(real)
        errored = {"choose": errored_choose, "sealed": mine.errored + now.errored}
        thin = _thin(change_tallies, current_tallies, real)
        if thin:
            self._not_judged(decision.not_judged(SEALED, thin), label, change, parent, errored["sealed"])
            return
        if self.seal.terms.holdout is not None:
            try:
                answer = self.seal.ask_holdout(gain_choose, _rate(change_tallies) - _rate(current_tallies))
            except ImproverError as exc:  # its budget went to another process since we looked
                raise Stop(str(exc)) from None
            held = decision.held_out(screened, answer.gain, answer.turned_down)
            if held:
                threshold = self.seal.terms.holdout["threshold"]
                self._decide(
                    held,
                    "turned down",
                    label,
                    f"better on the tasks to choose on ({screen.describe()}), but the sealed tasks "
                    f"answer its gain at {answer.gain:.1%}, at or below {threshold:.1%}: no confirmation spent",
                    change,
                    parent,
                    choose=comparison_json(screen),
                    holdout_gain=answer.gain,
                )
                return
        try:
            confirmation = self.seal.spend_confirmation()
        except SealSpent as exc:
            raise Stop(str(exc)) from None
        rule = replace(
            Rule.for_part(SEALED, self.seal.terms.test, confirmation.of, self.runs), level=confirmation.level
        )
        said, extra = await self._decided(rule, change, real, change_tallies, current_tallies)
        errored["sealed"] += extra
        counted = f"confirmation {confirmation.number} of {confirmation.of}"
        if said.outcome is Outcome.NOT_JUDGED:
            self._not_judged(said, label, change, parent, errored["sealed"])
            return
        sealed = said.comparison
        assert sealed is not None
        if said.outcome is not Outcome.KEPT:
            lost = said.outcome is Outcome.LOSES_TASKS
            why = f"it loses sealed tasks {', '.join(said.lost)}" if lost else "not better on the sealed tasks"
            self._decide(
                said,
                "tried",
                label,
                f"better on the tasks to choose on ({screen.describe()}), but {why} ({sealed.describe()}"
                f"{_contests(said)}; {counted} spent){_left_out(errored['choose'] + errored['sealed'])}",
                change,
                parent,
                choose=comparison_json(screen),
                sealed=comparison_json(sealed),
                lost=list(said.lost),
                contested=list(said.contested),
                confirmation=confirmation.number,
                confirmations=confirmation.of,
                errored=errored,
            )
            return
        self._keep(change, label, parent, said, screen, confirmation.number, errored)

    def _keep(
        self,
        change: Variant,
        label: str,
        parent: Archived,
        said: Decision,
        screen: Comparison,
        number: int,
        errored: dict[str, int],
    ) -> None:
        sealed = said.comparison
        assert sealed is not None
        before = self.current
        step = digest({"variant": change.id, "seal": self.seal.id, "confirmation": number})[:16]
        body = {
            "profile": self.profile,
            "step": step,
            "seal": self.seal.id,
            "seal_claim": self.seal.state().claim,
            "follows": self.follows,
            "change": label,
            "before": before.to_json(),
            "after": change.to_json(),
            "choose": comparison_json(screen),
            "sealed": comparison_json(sealed),
            "confirmation": number,
            "confirmations": self.seal.terms.confirmations,
            "level": self.seal.terms.level,  # one-sided; the intervals are two-sided at twice it
            "test": sealed.test,
            "errored": errored,
            **({"practice": self.practice.digest} if self.practice else {}),
            **({"challenge": self.challenged} if self.challenged else {}),
        }
        claim, pulse = self.publish(KIND, body) if self.publish else (None, None)
        kept = self._archived(change)
        assert kept is not None  # _consider archived it before judging
        kept.kept = True
        self.current = change
        self._sealed_current = None  # measured afresh with baseline_runs before it is compared with
        self._decide(
            said,
            "kept",
            label,
            f"{screen.describe()} on the tasks to choose on, and {sealed.describe()} on the sealed tasks "
            f"(confirmation {number} of {self.seal.terms.confirmations}){_left_out(errored['choose'] + errored['sealed'])}"
            + self._kept_as(step),
            change,
            parent,
            "kept (confirmed)",
            **body,
            claim=claim,
            pulse=pulse,
            contested=list(said.contested),
        )
        if claim:
            self.follows = claim
            self._emit("published", f"published as claim {claim}", claim=claim, pulse=pulse)
        if self.apply:
            self.apply(change, step)
            self._emit("applied", f"profile {self.profile} now has learned what step {step} kept", step=step)

    def _not_judged(self, said: Decision, label: str, change: Variant, parent: Archived, errored: int) -> None:
        thin = said.thin
        self._decide(
            said,
            "not judged",
            label,
            f"{errored} runs errored (provider or harness faults), leaving {', '.join(thin[:3])}"
            f"{' ...' if len(thin) > 3 else ''} without a judged run; no confirmation spent",
            change,
            parent,
            errored=errored,
            thin=list(thin),
        )

    # -- trials, stops and records ---------------------------------------------------

    async def _sealed_trial_of_current(self) -> TrialResult:
        if self._sealed_current and self._sealed_current[0] == self.current.id:
            return self._sealed_current[1]
        result = await self._trial(self.current, self.seal.sealed.tasks, self.baseline_runs)
        self._check_canaries_passed(result)
        self._sealed_current = (self.current.id, result)
        return result

    async def _trial(self, variant: Variant, tasks: Sequence[Task], runs: int) -> TrialResult:
        """Runs `tasks` `runs` times each. Under a token budget, in batches that fit what is
        left with every run at the most it may cost (its own token limit, and its simulated
        user's: the harness holds each model call to what its run has left), so no batch
        can pass the budget whatever its runs cost; the loop stops when not one more run
        fits."""
        if self.max_tokens is None:
            return await self._run_trial(variant, tasks, runs)
        per_run = max(run_cost(task, self.limits) for task in tasks)
        todo = [(task, runs) for task in tasks]  # each task and the runs of it still to go
        parts = []
        while todo:
            self._go(expected=per_run)
            fit = (self.max_tokens - self.used.total) // per_run
            first, count = todo[0]
            if fit < count:  # part of one task's runs
                parts.append(await self._run_trial(variant, [first], fit))
                todo[0] = (first, count - fit)
                continue
            batch = [task for task, _ in takewhile(lambda item, count=count: item[1] == count, todo[: fit // count])]
            parts.append(await self._run_trial(variant, batch, count))
            todo = todo[len(batch) :]
        return _combine(parts)

    async def _run_trial(self, variant: Variant, tasks: Sequence[Task], runs: int) -> TrialResult:
        self._go()
        trial = asyncio.ensure_future(
            run_trials(
                variant,
                tasks,
                self.candidate(variant),
                self.models,
                runs=runs,
                concurrency=self.concurrency,
                limits=self.limits,
                on_result=self._counter(f"trial of variant {variant.id}", len(tasks) * runs),
                halted=self.halted,
            )
        )
        stopper = asyncio.ensure_future(self.stopping.wait())
        done, _ = await asyncio.wait({trial, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if trial not in done:
            trial.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await trial
            raise Interrupted(
                "interrupted during a trial; the archive and the seal are as the last finished step left them"
            )
        try:
            result = trial.result()
        except Halted as exc:
            raise Stop(str(exc)) from None
        self.used = self.used + result.usage
        self._check_answers(result)
        return result

    def candidate(self, variant: Variant) -> Candidate:
        """What runs `variant`: the agent, or for a code change the program built from it."""
        return self.agent

    def _counter(self, what: str, total: int) -> Callable[[object], None] | None:
        if self.progress is None:
            return None
        report, done, last = self.progress, [0], [0.0]

        def count(_: object) -> None:
            done[0] += 1
            now = time.monotonic()
            if done[0] == total or now - last[0] >= 1.0:
                last[0] = now
                report(f"{what}: {done[0]}/{total} runs")

        return count

    def left(self) -> int | None:
        """The tokens the budget leaves, the most the next model call may be given; None without one."""
        return None if self.max_tokens is None else self.max_tokens - self.used.total

    def _go(self, expected: int = 0) -> None:
        """Checked before every proposal and trial; `expected` is the most the step may cost."""
        if self.stopping.is_set():
            raise Interrupted("interrupted; the archive and the seal are as the last finished step left them")
        why = self.halted()
        if why:
            raise Stop(why)
        if self.max_tokens is not None and self.used.total + expected > self.max_tokens:
            raise Stop(f"the next step could pass the budget of {self.max_tokens} tokens ({self.used.total} used)")

    def _check_canary(self, text: str) -> None:
        canary = self.seal.canary_in(text)
        if canary:
            raise Stop(
                f"a proposal holds the code word of {canary}: the sealed tasks have reached the proposer; seal fresh tasks"
            )

    def _check_answers(self, result: TrialResult) -> None:
        """A code word in any run's answer, however written: the sealed answers have leaked."""
        for run in result.results:
            canary = self.seal.canary_in(run.run.answer)
            if canary:
                raise Stop(
                    f"a run's answer holds the code word of {canary}: the sealed answers reached the agent; seal fresh tasks"
                )

    def _check_canaries_passed(self, result: TrialResult) -> None:
        for canary in self.seal.canaries:
            tally = result.per_task.get(canary.name)
            if tally and tally.passed:
                raise Stop(
                    f"{canary.name} was passed: the sealed answers reached the agent or its scoring was gamed; seal fresh tasks"
                )

    def _decide(
        self,
        said: Decision,
        verb: str,
        label: str,
        what: str,
        change: Variant | None,
        parent: Archived,
        went: str = "",
        /,
        **data: Any,
    ) -> None:
        """Records and reports a decision of improver.decide.decision's, under the lineage's name
        for it, as the line `_line` words from its verb, the change's label and what it found."""
        name = _LINEAGE[said.outcome, said.part]
        data = {"outcome": said.outcome.value, **data}
        self.archive.history.append({"change": label, "went": went or how_it_went(name, data)})
        if change is not None:
            self.archive.tried.add(change.id)  # only now: a change interrupted mid-trial may be proposed again
        self.archive.save()
        line = {
            "decision": name,
            "change": label,
            "variant": change.id if change else None,
            "parent": parent.variant.id,
            **data,
        }
        self._record(line)
        self._emit(name, self._line(verb, label, what), **{k: v for k, v in line.items() if k != "decision"})

    def _line(self, verb: str, label: str, what: str) -> str:
        """ "turned down: LABEL: why", or "tried|kept|not judged LABEL: what was found"."""
        return f"{verb}: {label}: {what}" if verb == "turned down" else f"{verb} {label}: {what}"

    def _kept_as(self, step: str) -> str:
        """How a kept line ends: the step the lineage records it as."""
        practice = f", chosen beside practice tasks {self.practice.digest[:16]}" if self.practice else ""
        return f", as step {step}{practice}"

    def _record(self, line: dict[str, Any]) -> None:
        stamp = utc_now()
        self.lineage.append({"at": stamp, "profile": self.profile, "round": self.round, **line})

    def _emit(self, kind: str, text: str, **data: Any) -> None:
        self.on_event(Event(kind, text, data))


async def decided(
    rule: Rule,
    tasks: Sequence[Task],
    mine: dict[str, Tally],
    current: dict[str, Tally],
    trial: Callable[[Sequence[Task], int], Awaitable[TrialResult]],
) -> tuple[Decision, int]:
    """The decision on one part, with the fresh runs of the change it asks for on
    contested tasks (`trial` runs them), batch by batch, until it no longer asks; and the
    runs that errored on the way. A contest whose runs keep erroring is settled as
    nothing lost after as many rounds as the most fresh runs allow. The loop and an
    attester (improver.trust.attest) decide by this one function."""
    names = tuple(t.name for t in tasks)
    fresh: dict[str, Tally] = {}
    errored = 0
    said = decision.decide(rule, Evidence(mine, current, fresh), names)
    for _ in range(-(-rule.contest_runs // rule.runs)):
        if said.outcome is not Outcome.MORE_RUNS:
            return said, errored
        for runs in sorted(set(said.more.values())):
            batch = [t for t in tasks if said.more.get(t.name) == runs]
            result = await trial(batch, runs)
            errored += result.errored
            for name, tally in result.tallies().items():
                old = fresh.get(name)
                fresh[name] = Tally(tally.passed + (old.passed if old else 0), tally.runs + (old.runs if old else 0))
        said = decision.decide(rule, Evidence(mine, current, fresh), names)
    return decision.settle(said), errored


# A decision's outcome and part, as the lineage has always named it.
_LINEAGE: dict[tuple[Outcome, str], str] = {
    (Outcome.TURNED_DOWN, CHOOSE): "turned down",
    (Outcome.HOLDOUT_TURNED_DOWN, SEALED): "turned down",
    (Outcome.DROPPED, CHOOSE): "dropped",
    (Outcome.NOT_JUDGED, CHOOSE): "not judged",
    (Outcome.NOT_JUDGED, SEALED): "not judged",
    (Outcome.NOT_BETTER, CHOOSE): "tried",
    (Outcome.NOT_BETTER, CHALLENGE): "shortcut",
    (Outcome.LOSES_TASKS, CHALLENGE): "shortcut",
    (Outcome.LOSES_TASKS, CHOOSE): "tried",
    (Outcome.NOT_BETTER, SEALED): "not confirmed",
    (Outcome.LOSES_TASKS, SEALED): "not confirmed",
    (Outcome.KEPT, SEALED): "kept",
}


def _contests(said: Decision) -> str:
    """How many tasks were contested (looked lost, so were run again) and how many were lost."""
    if not said.contested:
        return ""
    return f"; {len(said.contested)} contested task(s) run again, {len(said.lost)} lost beyond chance"


def how_it_went(decision: str, data: dict[str, Any], chosen_on: str = "tasks") -> str:
    """How a change went, as the proposer may be told: nothing a sealed task said. The
    improver loop words its own decisions so too, chosen on "problems"."""
    counts = chosen_counts(data)
    if decision == "turned down":
        return (
            "turned down before it was tried"
            if "holdout_gain" not in data
            else f"better on the {chosen_on} to choose on, but not confirmed"
        )
    if decision == "not confirmed":
        return f"better on the {chosen_on} to choose on{counts}, but not confirmed"
    if decision == "shortcut":
        return f"better on the {chosen_on} to choose on{counts}, but a shortcut: not better on variants of the tasks it newly passes"
    if decision == "dropped":
        return f"clearly worse after one run of each task{counts}"
    if decision == "not judged":
        return "not judged: too many of its runs errored"
    return f"not better on the {chosen_on} to choose on{counts}"


def _combine(parts: list[TrialResult]) -> TrialResult:
    """One result from trials of the same variant, on the same tasks or on some of them."""
    per_task: dict[str, TaskTally] = {}
    for part in parts:
        for name, tally in part.per_task.items():
            mine = per_task.setdefault(name, TaskTally())
            mine.passed += tally.passed
            mine.failed += tally.failed
            mine.errored += tally.errored
            mine.failures += [f for f in tally.failures if f not in mine.failures]
            mine.errors += [e for e in tally.errors if e not in mine.errors]
    runs = max(sum(t.passed + t.failed + t.errored for t in per_task.values()) // max(len(per_task), 1), 1)
    return TrialResult(parts[0].variant, runs, [r for part in parts for r in part.results], per_task)


def _thin(change: dict[str, Tally], current: dict[str, Tally], tasks: Sequence[Task]) -> list[str]:
    """The tasks errored runs left without a judged run in either arm."""
    return [t.name for t in tasks if t.name not in change or t.name not in current]


def _left_out(errored: int) -> str:
    """Errored runs are never counted as failures; the lines say how many were left out."""
    return f" ({errored} errored runs left out)" if errored else ""


def _rate(tallies: dict[str, Tally]) -> float:
    runs = sum(t.runs for t in tallies.values())
    return sum(t.passed for t in tallies.values()) / runs if runs else 0.0
