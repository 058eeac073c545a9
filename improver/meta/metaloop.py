"""The improver, improved: the loop that writes the agent's changes, turned on itself.

An improver is the proposer's instructions and three settings (improver.seals.settings). It
is graded on problems, each a pair of task files (improver.meta.problems): the lesson loop
(improver.loop.rounds) runs on the first (TRAIN) with that improver writing the changes,
on a seal of its own made in a scratch folder, and the agent's runs on the second (HELD),
which the loop never sees, are counted before and after what that loop kept
(improver.meta.grading). That loop is random, so one improver is better than another
when, on fresh replications of each problem's grading loop seeded alike for both, its
replications leave the agent better on the held tasks more often, beyond chance
(improver.meta.replications: the replication is the unit of evidence).

Each round the improver as it is proposes changes to itself with `propose_improver`,
under its own instructions; a change goes on when its replications do better on the
problems given (at the screening level), and is kept when they do so again on problems
held out, at the level the held-out problems' confirmations allow (Bonferroni, as a
seal's), counted for the set and for each of its tasks across runs
(improver.meta.spending). The decisions are improver.decide.decision's, the same pure
function as the loop's. Under `max_tokens` the run stops before the proposals, the
grading loops and the trials together could pass it.
The improver kept proposes the next round's changes. Every decision is a line in the
profile's improver lineage; a kept improver published with a wallet is an
`agent.improver/v1` claim.

The held-out problems are never shown to the proposer as the improver: every proposal
is held against their tasks before any is tried, as a writer's task is held against
sealed ones (improver.loop.gates: what a task asks word for word, or a run of eight of its
words that no task of the problems given holds too), and one that holds a held-out
task stops the run: those tasks reached the proposer (improver.meta.proposing). The
trials, stop requests and the kill switch are improver.loop.running's, the lines and
events improver.loop.record's, as the lesson loop's.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from improver.base.protocol import EpisodeLimits, Model, ProviderError, TokenUsage
from improver.base.variant import Variant
from improver.decide.levels import DEFAULT_TEST
from improver.episodes.harness import Candidate, ModelFactory
from improver.loop.keeping import Publish
from improver.loop.lineage import Lineage
from improver.loop.record import Event, Record
from improver.loop.running import Stop, Trials, check_budget, run_rounds
from improver.meta.grading import Grades, Grading, Replicated
from improver.meta.judging import ImproverJudge
from improver.meta.problems import Graded, Problem, check_problems, held_texts
from improver.meta.proposing import PROPOSE_TOOL, TOOL_NAME, check_held_out, improver_messages, proposed
from improver.meta.replications import REPLICATIONS
from improver.seals.settings import Settings

LEFT_AS = "the improver lineage is as the last finished step left it"


@dataclass
class MetaLoop:
    """The improver loop: the improver's changes to itself, graded, screened on the
    problems given, confirmed on those held out, kept."""

    profile: str
    improver: Settings  # the improver as it is
    agent_variant: Variant  # the agent as it is: what every problem's loop starts from
    allowed_models: list[str]
    agent: Candidate
    models: ModelFactory
    proposer: Model
    problems: list[Problem]
    held_out: list[Problem]
    lineage: Lineage
    runs: int = 4
    loop_rounds: int = 1
    confirmations: int = 4
    replications: int = REPLICATIONS  # of each problem's grading loop, for each improver compared
    test: str = DEFAULT_TEST
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)
    concurrency: int = 8
    publish: Publish | None = None
    apply: Callable[[Settings, str], None] | None = None
    halted: Callable[[], str | None] = lambda: None
    max_tokens: int | None = None  # grading loops, trials and proposals together
    seed: int | None = None
    on_event: Callable[[Event], None] = lambda event: None
    progress: Callable[[str], None] | None = None  # each grading loop's lines, as it goes

    def __post_init__(self) -> None:
        check_problems(self.problems, self.held_out)
        if self.replications < 1:
            raise Stop("--replications must be at least 1")
        check_budget(self.max_tokens, self.limits, [t for p in (*self.problems, *self.held_out) for t in p.tasks])
        self.held_texts = held_texts(self.problems, self.held_out)
        self.trials = Trials(
            candidate=lambda _: self.agent,
            models=self.models,
            limits=self.limits,
            concurrency=self.concurrency,
            halted=self.halted,
            left_as=LEFT_AS,
            max_tokens=self.max_tokens,
            cancels=False,
        )
        self.record = Record(self.profile, self.lineage, self.on_event)
        self.grading = Grading(
            profile=self.profile,
            agent_variant=self.agent_variant,
            allowed_models=self.allowed_models,
            agent=self.agent,
            models=self.models,
            proposer=self.proposer,
            trials=self.trials,
            runs=self.runs,
            loop_rounds=self.loop_rounds,
            limits=self.limits,
            concurrency=self.concurrency,
            halted=self.halted,
            progress=self.progress,
        )
        # Every replication's seed derives from the run's: given, the run is repeated; not, it is fresh.
        self.seed_text = str(self.seed) if self.seed is not None else secrets.token_hex(8)
        self.grades = Grades(self.grading.grade, self.replications, self.seed_text)
        self.judge = ImproverJudge(
            profile=self.profile,
            problems=self.problems,
            held_out=self.held_out,
            runs=self.runs,
            confirmations=self.confirmations,
            test=self.test,
            grades=self.grades,
            trials=self.trials,
            record=self.record,
            publish=self.publish,
            apply=self.apply,
        )
        self.stopped: Stop | None = None  # why the last run stopped early, if it did

    @property
    def used(self) -> TokenUsage:
        return self.trials.used

    def request_stop(self) -> None:
        """Called from a signal handler: the run stops at the next step it can, the
        loop grading an improver at its own next step."""
        self.trials.request_stop()
        self.grading.request_stop()

    async def run(self, rounds: int) -> None:
        self.stopped = await run_rounds(self.record, self.trials, self._baseline, self._round, rounds)

    async def _baseline(self) -> None:
        """The improver as it is, graded on replications of its own: what it is shown of
        itself in the first round (never what a change is compared with)."""
        graded = await self._shown(self.improver)
        pooled = graded.pooled()
        self.record.emit(
            "baseline",
            f"the improver as it is ({self.improver.id}): on the problems to choose on the agent passed "
            f"{_pooled(pooled, 'before')} held-out runs before its changes and {_pooled(pooled, 'after')} after, "
            f"over {graded.loops} grading loops",
            improver=self.improver.id,
            before=_counts(pooled, "before"),
            after=_counts(pooled, "after"),
            loops=graded.loops,
            seed=self.seed_text,
        )

    async def _shown(self, improver: Settings) -> Replicated:
        """The improver's latest grades on the problems given, graded now if it has none."""
        if improver.id not in self.judge.shown:
            self.judge.shown[improver.id] = await self.grades.of(improver, self.problems, f"shown/{improver.id[:16]}")
        return self.judge.shown[improver.id]

    async def _round(self) -> None:
        self.trials.go(expected=self.limits.max_tokens)  # no round unless a run of what it proposes could follow
        number = self.record.round
        proposer = self.improver
        graded = (await self._shown(proposer)).pooled()
        messages = improver_messages(proposer, graded, self.judge.history if proposer.show_history else [])
        try:
            completion = await self.proposer.complete(messages, [PROPOSE_TOOL], self.trials.left())
        except ProviderError as exc:
            self.record.emit("proposer", f"round {number}: the proposer errored ({exc}); no change this round")
            return
        self.trials.spend(completion.usage)
        calls = [
            c for c in completion.message.get("tool_calls") or [] if c.get("function", {}).get("name") == TOOL_NAME
        ]
        check_held_out(calls, self.held_texts)  # every call, those past changes_per_round too, before any is tried
        proposals = [proposed(proposer, c["function"].get("arguments")) for c in calls[: proposer.changes_per_round]]
        n = len(proposals)
        self.record.emit(
            "round",
            f"round {number}: the improver {proposer.id} proposed {n} {'change' if n == 1 else 'changes'} to itself"
            + ("" if n else f" (no {TOOL_NAME} call)"),
            improver=proposer.id,
            proposals=n,
        )
        for proposal in proposals:
            self.improver = await self.judge.consider(proposal, proposer, self.improver)


def _pooled(graded: Sequence[Graded], which: str) -> str:
    tallies = [t for g in graded for t in getattr(g, which).values()]
    return f"{sum(t.passed for t in tallies)}/{sum(t.runs for t in tallies)}"


def _counts(graded: Sequence[Graded], which: str) -> list[int]:
    passed, runs = _pooled(graded, which).split("/")
    return [int(passed), int(runs)]
