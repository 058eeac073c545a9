"""What a loop on a seal is given, and the units it runs on, made from it.

The lesson loop (improver.loop.rounds) and the code loop (improver.code.codeloop) are
given the same: the agent as it is, the seal, the archive and the lineage, the proposer
or coder, the round settings, how to run and publish. `judge_on` checks what they are
given before anything is spent and makes the units they compose: the trials
(improver.loop.running), the record (improver.loop.record) and the judging of changes
(improver.loop.judging), with what differs between them passed in.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from improver.base.protocol import EpisodeLimits, Model, TokenUsage
from improver.base.variant import Variant
from improver.decide import decision
from improver.decide.archive import Archive
from improver.episodes.executors import Executor
from improver.episodes.harness import Candidate, ModelFactory
from improver.loop.challenger import Challenger
from improver.loop.confirming import Examination
from improver.loop.gates import SealedText
from improver.loop.judging import Judge
from improver.loop.keeping import Keeper, Publish
from improver.loop.lineage import Lineage
from improver.loop.practice import with_practice
from improver.loop.record import Event, Record, Verdicts, Wording
from improver.loop.running import Stop, Trials, check_budget, run_rounds
from improver.loop.screening import Gates
from improver.seals.seal import Seal
from improver.seals.settings import Settings
from improver.tasks.task import TaskSet

LEFT_AS = "the archive and the seal are as the last finished step left them"


@dataclass
class Given(ABC):
    """What a loop on a seal is given, whether its changes are lessons or code, and what
    both loops do alike with it: their stops, their tokens and the run of their rounds."""

    profile: str
    current: Variant  # the agent as it is
    allowed_models: list[str]
    seal: Seal
    agent: Candidate
    models: ModelFactory
    proposer: Model  # the proposer, or the coder
    settings: Settings
    archive: Archive
    lineage: Lineage
    runs: int = 4
    baseline_runs: int | None = None  # the agent's runs of each task; default decision.BASELINE_FACTOR x runs
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)
    concurrency: int = 8
    publish: Publish | None = None
    halted: Callable[[], str | None] = lambda: None
    max_tokens: int | None = None
    rng: np.random.Generator = field(default_factory=np.random.default_rng)
    on_event: Callable[[Event], None] = lambda event: None
    progress: Callable[[str], None] | None = None  # "trial: 40/320 runs", at most once a second
    practice: TaskSet | None = None  # practice tasks chosen on beside the seal's (improver.loop.practice)
    challenge: Challenger | None = None  # a challenger's variants between screening and the sealed tasks
    # Who asks the sealed tasks, given the loop's trials and the agent's baseline runs: an examiner elsewhere, for a seal
    # handed to one; default (None), this process, on the seal's own tasks.
    examiner: Callable[[Trials, int], Examination] | None = None
    executor: Executor | None = None  # where the trials' runs run: None, here (improver.episodes.executors)

    def compose(self, candidate: Callable[[Variant], Candidate], wording: Wording, keeper: Keeper) -> None:
        """Makes the units the loop runs on (see `judge_on`); called by its __post_init__."""
        self.judge = judge_on(self, candidate, wording, keeper)
        self.trials, self.record = self.judge.trials, self.judge.verdicts.record
        self.stopped: Stop | None = None  # why the last run stopped early, if it did

    @property
    def used(self) -> TokenUsage:
        return self.trials.used

    def request_stop(self) -> None:
        """Called from a signal handler: the loop stops at the next step it can."""
        self.trials.request_stop()

    async def run(self, rounds: int) -> None:
        self.stopped = await run_rounds(
            self.record, self.trials, self._baseline, self._round, rounds, self.archive.save
        )

    @abstractmethod
    async def _baseline(self) -> None:
        """The agent as it is (or the code as it stands) measured, before each round."""

    @abstractmethod
    async def _round(self) -> None:
        """One round: what is proposed (or coded), each change judged."""


def judge_on(given: Given, candidate: Callable[[Variant], Candidate], wording: Wording, keeper: Keeper) -> Judge:
    """The judging of `given`'s changes, its trials running each variant with `candidate`,
    its lines worded by `wording`, a kept change published and followed up by `keeper`.
    Stop when what it is given is refused before anything is spent."""
    baseline_runs = given.baseline_runs if given.baseline_runs is not None else decision.BASELINE_FACTOR * given.runs
    if baseline_runs < given.runs:
        raise Stop(f"--baseline-runs ({baseline_runs}) must be at least --runs ({given.runs})")
    seal = given.seal
    train = with_practice(seal, given.practice)
    if not seal.held_here and given.examiner is None:
        raise Stop(f"seal {seal.id}'s sealed tasks are held by the examiner at {seal.held_by}: ask it to confirm")
    # An examiner's runs are on its own models and its own account, not this loop's budget.
    check_budget(given.max_tokens, given.limits, [*train.tasks, *(seal.sealed.tasks if seal.held_here else ())])
    trials = Trials(
        candidate=candidate,
        models=given.models,
        limits=given.limits,
        concurrency=given.concurrency,
        halted=given.halted,
        left_as=LEFT_AS,
        max_tokens=given.max_tokens,
        progress=given.progress,
        canary_in=seal.canary_in,
        executor=given.executor,
    )
    record = Record(given.profile, given.lineage, given.on_event)
    judge = Judge(
        profile=given.profile,
        seal=seal,
        train=train,
        runs=given.runs,
        baseline_runs=baseline_runs,
        archive=given.archive,
        trials=trials,
        verdicts=Verdicts(record, given.archive, wording),
        keeper=keeper,
        gates=Gates(given.allowed_models, SealedText.of(seal.real_tasks), given.settings.max_lessons),
        challenger=given.challenge,
        practice=given.practice,
        examination=given.examiner(trials, baseline_runs) if given.examiner else None,
    )
    if given.publish and not seal.state().claim:
        raise Stop(f"seal {seal.id} is not on the ledger, so a kept change could not name it; run without --wallet")
    return judge
