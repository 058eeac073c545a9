"""An improver graded on problems: the loop it runs, and the agent it leaves.

On a problem, the lesson loop (improver.loop.rounds) runs on its TRAIN tasks with the
improver writing the changes, on a seal of its own made in a scratch folder, and the
agent that loop kept is measured on the HELD tasks, which the loop never sees, against
the agent as it was. `Grades` grades the improver as it is once on each problem, since
every change to it is compared with that.
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
from improver.decide.stats import Tally
from improver.episodes.harness import Candidate, ModelFactory
from improver.loop.lineage import Lineage
from improver.loop.record import Event
from improver.loop.rounds import Loop
from improver.loop.running import Stop, Trials
from improver.meta.problems import Graded, Problem
from improver.seals.seal import SealRequest, make_seal
from improver.seals.separation import Separation
from improver.seals.settings import Settings
from improver.train.export import ExportRecord

LOOP_SHARE = 50  # the share of a problem's TRAIN tasks its loop seals
LOOP_CONFIRMATIONS = 4  # what that seal allows

Grade = Callable[[Settings, Problem], Awaitable[Graded]]


@dataclass
class Grades:
    """Improvers graded on problems by `grade`; the improver as it is, once on each."""

    grade: Grade
    kept: dict[tuple[str, str], Graded] = field(default_factory=dict)  # (improver, problem) -> graded

    async def of(self, improver: Settings, problems: Sequence[Problem]) -> list[Graded]:
        return [await self.grade(improver, problem) for problem in problems]

    async def as_it_is(self, improver: Settings, problems: Sequence[Problem]) -> list[Graded]:
        """The improver as it is, graded once on each problem (afresh once it changes)."""
        out = []
        for problem in problems:
            key = (improver.id, problem.digest)
            if key not in self.kept:
                self.kept[key] = await self.grade(improver, problem)
            out.append(self.kept[key])
        return out


@dataclass
class Grading:
    """How an improver is graded on one problem: a loop in a scratch folder, then the held tasks."""

    profile: str
    agent_variant: Variant  # the agent as it is: what every problem's loop starts from
    allowed_models: list[str]
    agent: Candidate
    models: ModelFactory
    proposer: Model
    trials: Trials  # the held tasks' trials, and every token spent
    runs: int
    loop_rounds: int
    limits: EpisodeLimits
    concurrency: int
    halted: Callable[[], str | None]
    rng: np.random.Generator
    progress: Callable[[str], None] | None = None  # each grading loop's lines, as it goes
    before: dict[str, dict[str, Tally]] = field(
        default_factory=dict
    )  # per problem: the agent as it is on its held tasks
    loop: Loop | None = None  # the loop grading an improver now, told of a stop request

    def request_stop(self) -> None:
        if self.loop is not None:
            self.loop.request_stop()

    async def grade(self, improver: Settings, problem: Problem) -> Graded:
        """The lesson loop on the problem's TRAIN tasks, with `improver` writing the
        changes, in a scratch folder; then the agent it kept on the HELD tasks."""
        kept = await self._kept(improver, problem)
        held = problem.held.tasks
        if problem.digest not in self.before:
            self.before[problem.digest] = (await self.trials.trial(self.agent_variant, held, self.runs)).tallies()
        result = await self.trials.trial(kept, held, self.runs)
        return Graded(problem, self.before[problem.digest], result.tallies(), kept, result.wrong())

    async def _kept(self, improver: Settings, problem: Problem) -> Variant:
        """What the loop on the problem's TRAIN tasks kept: the agent as changed, or as it was."""
        with tempfile.TemporaryDirectory(prefix="agentd-improver-") as scratch:
            routes = Routes(Path(scratch))
            request = SealRequest(
                share=LOOP_SHARE, confirmations=LOOP_CONFIRMATIONS, canaries=0, seed=problem.digest[:16]
            )
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
                rng=self.rng,
                on_event=self._told(improver, problem),
            )
            try:
                await loop.run(self.loop_rounds)
            finally:
                self.loop = None
            self.trials.spend(loop.used)
            if loop.stopped is not None:
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
