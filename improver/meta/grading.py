"""An improver graded on problems: the loop it runs, and the agent it leaves.

On a problem, the lesson loop (improver.loop.rounds) runs on its TRAIN tasks with the
improver writing the changes, on a seal of its own made in a scratch folder, and the
agent that loop kept is measured on the HELD tasks, which the loop never sees, against
the agent as it was (measured once a problem). The loop is random, so an improver is
graded on replications of it, each seeded (its seal's split, its draws): `Grades` grades
the two improvers of a comparison on the same fresh replications, and never reuses a
grade of the improver as it is for another comparison (improver.meta.replications says
why). Under a token budget each grading loop is given what the run has left, and the
run stops before a loop could pass it.
"""

from __future__ import annotations

import tempfile
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from improver.base.errors import ImproverError
from improver.base.protocol import EpisodeLimits, Model
from improver.base.routes import Routes
from improver.base.variant import Variant
from improver.decide.archive import Archive
from improver.decide.decision import BASELINE_FACTOR
from improver.decide.stats import Tally
from improver.episodes.harness import Candidate, ModelFactory, run_cost
from improver.loop.lineage import Lineage
from improver.loop.record import Event
from improver.loop.rounds import Loop
from improver.loop.running import OverBudget, Stop, Trials
from improver.meta.problems import Graded, Problem
from improver.meta.replications import replication_seed
from improver.seals.seal import SealRequest, make_seal
from improver.seals.separation import Separation
from improver.seals.settings import Settings
from improver.train.export import ExportRecord

LOOP_SHARE = 50  # the share of a problem's TRAIN tasks its loop seals
LOOP_CONFIRMATIONS = 4  # what that seal allows

Grade = Callable[[Settings, Problem, str], Awaitable[Graded]]  # an improver on a problem, one replication's seed


@dataclass(frozen=True)
class Replicated:
    """One improver graded on replications of each problem's grading loop."""

    improver: Settings
    problems: tuple[Problem, ...]
    graded: tuple[tuple[Graded, ...], ...]  # per problem, per replication

    def afters(self) -> list[list[dict[str, Tally]]]:
        """Per problem, per replication: the held tasks' tallies of the agent it left."""
        return [[r.after for r in g] for g in self.graded]

    @property
    def loops(self) -> int:
        return sum(len(g) for g in self.graded)

    def seeds(self) -> dict[str, list[str]]:
        """The replications' seeds, by problem digest: what the lineage records."""
        return {p.digest: [r.seed for r in g] for p, g in zip(self.problems, self.graded, strict=True)}

    def pooled(self) -> list[Graded]:
        """Per problem, the replications' runs of the held tasks together: what the improver
        is shown of how the agent did with it."""
        return [_pooled(g) for g in self.graded]


def _pooled(graded: Sequence[Graded]) -> Graded:
    after: dict[str, Tally] = {}
    wrong: dict[str, list[str]] = {}
    for g in graded:
        for name, t in g.after.items():
            old = after.get(name)
            after[name] = t if old is None else Tally(old.passed + t.passed, old.runs + t.runs)
        for name, said in g.wrong.items():
            mine = wrong.setdefault(name, [])
            mine += [w for w in said if w not in mine]
    first = graded[0]
    return Graded(first.problem, first.before, after, first.kept, wrong, first.seed)


@dataclass
class Grades:
    """Improvers graded by `grade` on `replications` replications of each problem's loop,
    each replication's seed drawn from the run's `seed`, the problem and the comparison."""

    grade: Grade
    replications: int
    seed: str  # the run's: every replication's seed derives from it

    async def of(self, improver: Settings, problems: Sequence[Problem], comparison: str) -> Replicated:
        """`improver` on fresh replications of each problem, named by `comparison`."""
        graded = []
        for problem in problems:
            seeds = [self.seed_of(problem, r, comparison) for r in range(self.replications)]
            graded.append(tuple([await self.grade(improver, problem, s) for s in seeds]))
        return Replicated(improver, tuple(problems), tuple(graded))

    async def compared(
        self, change: Settings, current: Settings, problems: Sequence[Problem], comparison: str
    ) -> tuple[Replicated, Replicated]:
        """Both improvers afresh, on the same replications: those `comparison` names."""
        return await self.of(change, problems, comparison), await self.of(current, problems, comparison)

    async def more(self, improver: Settings, problem: Problem, comparison: str, first: int, count: int) -> list[Graded]:
        """Replications `first` to `first + count` of the comparison's, on one problem."""
        return [
            await self.grade(improver, problem, self.seed_of(problem, r, comparison))
            for r in range(first, first + count)
        ]

    def seed_of(self, problem: Problem, replication: int, comparison: str) -> str:
        return replication_seed(self.seed, problem.digest, replication, comparison)


@dataclass
class Grading:
    """How an improver is graded on one problem: a loop in a scratch folder, then the held tasks."""

    profile: str
    agent_variant: Variant  # the agent as it is: what every problem's loop starts from
    allowed_models: list[str]
    agent: Candidate
    models: ModelFactory
    proposer: Model
    trials: Trials  # the held tasks' trials, and every token spent (the grading loops' too)
    runs: int
    loop_rounds: int
    limits: EpisodeLimits
    concurrency: int
    halted: Callable[[], str | None]
    progress: Callable[[str], None] | None = None  # each grading loop's lines, as it goes
    before: dict[str, Graded] = field(default_factory=dict)  # per problem: the agent as it is on its held tasks
    loop: Loop | None = None  # the loop grading an improver now, told of a stop request

    def request_stop(self) -> None:
        if self.loop is not None:
            self.loop.request_stop()

    async def grade(self, improver: Settings, problem: Problem, seed: str) -> Graded:
        """The lesson loop on the problem's TRAIN tasks, seeded `seed`, with `improver`
        writing the changes, in a scratch folder; then the agent it kept on the HELD tasks
        (unless it kept nothing: then the agent is as it was, and so are its runs)."""
        was = await self._before(problem)
        kept = await self._kept(improver, problem, seed)
        if kept == self.agent_variant:
            return Graded(problem, was.before, was.before, kept, was.wrong, seed)
        result = await self.trials.trial(kept, problem.held.tasks, self.runs)
        return Graded(problem, was.before, result.tallies(), kept, result.wrong(), seed)

    async def _before(self, problem: Problem) -> Graded:
        """The agent as it is on the problem's held tasks, measured once, on BASELINE_FACTOR
        times the runs: what every replication's agent is held against."""
        if problem.digest not in self.before:
            result = await self.trials.trial(self.agent_variant, problem.held.tasks, BASELINE_FACTOR * self.runs)
            tallies = result.tallies()
            self.before[problem.digest] = Graded(problem, tallies, tallies, self.agent_variant, result.wrong())
        return self.before[problem.digest]

    async def _kept(self, improver: Settings, problem: Problem, seed: str) -> Variant:
        """What the loop on the problem's TRAIN tasks kept: the agent as changed, or as it was."""
        # Not a loop unless one run of it fits what the budget leaves (its own check would word it as its own).
        self.trials.go(expected=max(run_cost(t, self.limits) for t in problem.train.tasks))
        left = self.trials.left()
        with tempfile.TemporaryDirectory(prefix="agentd-improver-") as scratch:
            routes = Routes(Path(scratch))
            request = SealRequest(share=LOOP_SHARE, confirmations=LOOP_CONFIRMATIONS, canaries=0, seed=seed)
            try:
                seal = make_seal(problem.train, routes, request, Separation.of([], [], ExportRecord()))
            except ImproverError as exc:
                raise Stop(f"problem {problem.name}: its TRAIN tasks cannot be sealed for the loop: {exc}") from None
            self.loop = loop = Loop(
                profile=self.profile,
                current=self.agent_variant,
                allowed_models=self.allowed_models,
                seal=seal,
                agent=self.agent,
                models=self.models,
                proposer=self.proposer,
                settings=improver,
                archive=Archive.load(routes.archive(self.profile, seal.terms.train_digest), seal.terms.train_digest),
                lineage=Lineage(routes.lineage(self.profile)),
                runs=self.runs,
                limits=self.limits,
                concurrency=self.concurrency,
                halted=self.halted,
                max_tokens=left,  # what the run's budget leaves: the loop stops before passing it
                rng=np.random.default_rng(int(seed, 16)),
                on_event=self._told(improver, problem),
            )
            try:
                await loop.run(self.loop_rounds)
            finally:
                self.loop = None
            self.trials.spend(loop.used)
            if loop.stopped is not None:
                if left is not None and isinstance(loop.stopped, OverBudget):
                    # The loop stopped before passing what the run's budget left it: the run's next
                    # step could pass the run's budget, said as the run says it.
                    self.trials.go(expected=left - loop.used.total + 1)
                raise loop.stopped
            return loop.current

    def _told(self, improver: Settings, problem: Problem) -> Callable[[Event], None]:
        report = self.progress
        if report is None:
            return lambda event: None

        def say(event: Event) -> None:
            if event.kind not in ("tokens", "recorded"):  # counted in the run's own; its scratch folder goes
                report(f"grading the improver {improver.id} on {problem.name}: {event.text}")

        return say
