"""The improver, improved: the loop that writes the agent's changes, turned on itself.

An improver is the proposer's instructions and three settings (improver.seals.settings). It
is graded on problems, each a pair of task files: the ordinary loop (improver.loop.rounds) runs
on the first (TRAIN) with that improver writing the changes, on a seal of its own made
in a scratch folder, and the agent's runs on the second (HELD), which the loop never
sees, are counted before and after what that loop kept. One improver is better than
another when the agent ends better on the held tasks with it, beyond chance.

Each round the improver as it is proposes changes to itself with `propose_improver`,
under its own instructions; a change goes on when the agent ends better with it on the
problems given (at the screening level), and is kept when it does so again on problems
held out, at the level the held-out problems' confirmations allow (Bonferroni, as a
seal's). The decisions are improver.decide.decision's, the same pure function as the loop's.
The improver kept proposes the next round's changes. Every decision is a line in the
profile's improver lineage; a kept improver published with a wallet is an
`agent.improver/v1` claim.

The held-out problems are never shown to the proposer as the improver: every proposal
is held against their tasks before any is tried, as a writer's task is held against
sealed ones (improver.loop.gates: what a task asks word for word, or a run of eight of its
words that no task of the problems given holds too), and one that holds a held-out
task stops the run: those tasks reached the proposer.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from improver.base.clock import utc_now
from improver.base.digests import digest
from improver.base.errors import ImproverError
from improver.base.protocol import EpisodeLimits, Model, ProviderError, TokenUsage
from improver.base.routes import Routes
from improver.base.variant import Variant
from improver.decide import decision, levels
from improver.decide.archive import Archive
from improver.decide.decision import CHOOSE, SEALED, Decision, Evidence, Outcome, Rule
from improver.decide.stats import Comparison, Tally
from improver.episodes.harness import Candidate, ModelFactory
from improver.episodes.trials import Halted, TrialResult, run_trials
from improver.loop.gates import SealedText
from improver.loop.lineage import Lineage, chosen_counts, comparison_json
from improver.loop.rounds import Event, Interrupted, Loop, Publish, Stop, how_it_went
from improver.seals.claims import IMPROVER
from improver.seals.seal import SealRequest, make_seal
from improver.seals.separation import Separation
from improver.seals.settings import TUNABLE, Settings, describe_change
from improver.tasks.task import Task, TaskSet, load_tasks
from improver.train.export import ExportRecord

KIND = IMPROVER
TOOL_NAME = "propose_improver"
LOOP_SHARE = 50  # the share of a problem's TRAIN tasks its loop seals
LOOP_CONFIRMATIONS = 4  # what that seal allows
PROPOSE_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Propose one change to the improver: the full new text of its instructions, new values of "
        "its settings, or both. What you leave out stays as it is.",
        "parameters": {
            "type": "object",
            "properties": {
                "instructions": {"type": "string", "description": "The full new text of its instructions."},
                "changes_per_round": {"type": "integer", "minimum": 1, "description": "Changes it proposes a round."},
                "failed_shown": {"type": "integer", "minimum": 1, "description": "Failed tasks it is shown."},
                "show_history": {"type": "boolean", "description": "Whether it sees what was tried before."},
            },
        },
    },
}


# -- problems ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Problem:
    """A pair of task files: TRAIN, which a loop chooses changes on, and HELD, on which the
    agent is measured before and after what that loop kept."""

    name: str  # as the operator gave it: TRAIN,HELD
    train: TaskSet
    held: TaskSet

    @property
    def digest(self) -> str:
        return digest({"train": self.train.digest, "held": self.held.digest})


def load_problem(spec: str, profile: str) -> Problem:
    """`TRAIN,HELD` read and checked: two task files of the profile, validated, different,
    sharing no task."""
    paths = [p.strip() for p in spec.split(",")]
    if len(paths) != 2 or not all(paths):
        raise ImproverError(f"problem {spec!r} is not two task files: give it as TRAIN,HELD")
    if Path(paths[0]).resolve() == Path(paths[1]).resolve():
        raise ImproverError(f"problem {spec!r} names one file twice: its HELD tasks must be other tasks than its TRAIN")
    train, held = (_taskset(Path(p), spec, profile) for p in paths)
    shared = {t.content_key for t in train.tasks} & {t.content_key for t in held.tasks}
    if shared:
        name = next(t.name for t in held.tasks if t.content_key in shared)
        raise ImproverError(
            f"problem {spec!r}: task {name} of HELD is also in TRAIN; held tasks must be tasks the loop never sees"
        )
    return Problem(spec, train, held)


def _taskset(path: Path, spec: str, profile: str) -> TaskSet:
    try:
        taskset = load_tasks(path)
    except ImproverError as exc:
        raise ImproverError(f"problem {spec!r}: {exc}") from None
    if not taskset.validated:
        raise ImproverError(f"problem {spec!r}: {path} is not validated; run agentd improve validate {path} first")
    if taskset.profile != profile:
        raise ImproverError(f"problem {spec!r}: {path} holds profile {taskset.profile}'s tasks, not {profile}'s")
    if not taskset.tasks:
        raise ImproverError(f"problem {spec!r}: {path} holds no task")
    return taskset


def check_problems(problems: Sequence[Problem], held_out: Sequence[Problem]) -> None:
    """At least one problem to choose on; none held out that is also one to choose on."""
    if not problems:
        raise ImproverError("give at least one --problem TRAIN,HELD to grade improvers on")
    if not held_out:
        raise ImproverError("give at least one --held-out-problem TRAIN,HELD to confirm a kept improver on")
    given = {p.digest: p.name for p in problems}
    again = next((p for p in held_out if p.digest in given), None)
    if again:
        raise ImproverError(
            f"--held-out-problem {again.name} is also a --problem ({given[again.digest]}): held-out problems must be others"
        )
    # A task the improvers were chosen on would confirm nothing about them when held out.
    seen = {t.content_key: p.name for p in problems for t in (*p.train.tasks, *p.held.tasks)}
    for problem in held_out:
        shared = next((t for t in (*problem.train.tasks, *problem.held.tasks) if t.content_key in seen), None)
        if shared:
            raise ImproverError(
                f"--held-out-problem {problem.name}: task {shared.name} is also in --problem {seen[shared.content_key]}; "
                "held-out problems must hold tasks the improvers were not chosen on"
            )


def held_texts(problems: Sequence[Problem], held_out: Sequence[Problem]) -> list[tuple[Problem, SealedText]]:
    """Each held-out problem's words, to hold proposals against: only those no task of the
    problems given holds too (the proposer is shown those, so it may repeat them)."""
    shown = [t for p in problems for t in (*p.train.tasks, *p.held.tasks)]
    return [(p, SealedText.of((*p.train.tasks, *p.held.tasks)).beyond(shown)) for p in held_out]


def held_digest(held_out: Sequence[Problem]) -> str:
    """What names a set of held-out problems, whose confirmations are counted together."""
    return digest(sorted(p.digest for p in held_out))


# -- what the proposer is shown, and what it proposes ---------------------------------------


@dataclass(frozen=True)
class Graded:
    """The agent on one problem's held tasks, before and after an improver's loop."""

    problem: Problem
    before: dict[str, Tally]
    after: dict[str, Tally]
    kept: Variant  # what the loop kept: the agent as changed, or as it was
    wrong: dict[str, list[str]]  # per held task failed: what went wrong


@dataclass(frozen=True)
class Proposed:
    """One propose_improver call: the improver it makes, or why it makes none."""

    improver: Settings | None
    why: str = ""  # why it makes none


def improver_messages(
    improver: Settings, graded: Sequence[Graded], tried: Sequence[tuple[str, str]]
) -> list[dict[str, Any]]:
    """What the improver is shown of itself, under its own instructions."""
    parts = [
        "The system you improve is an improver: a proposer that is shown an agent's work and proposes changes to what "
        "the agent has learned. It is graded by how much the agent improves on tasks its changes were not chosen on.",
        "What you may not change: the agent, and how the improver's changes are tried and kept.",
        "What you may change: the improver's instructions (below) and its settings: "
        + ", ".join(f"{name} ({label})" for name, label in TUNABLE.items())
        + ".",
        "Its instructions now:",
        textwrap.indent(improver.instructions.strip(), "    "),
        f"Its settings now: {improver.describe()}.",
        "How the agent did with it, on each problem's held tasks:",
        *(f"- {g.problem.name}: {_passed(g.before)} before its changes, {_passed(g.after)} after" for g in graded),
    ]
    failed = [(g, t) for g in graded for t in g.problem.held.tasks if t.name in g.after and not g.after[t.name].passes]
    shown = failed[: improver.failed_shown]
    if shown:
        parts.append(
            f"Tasks the agent still failed after its changes ({len(shown)} of {len(failed)}), with what went wrong:"
        )
        parts += [
            f"- {t.task}\n  went wrong: {'; '.join(g.wrong.get(t.name, [])) or 'it did not pass'}" for g, t in shown
        ]
    else:
        parts.append("The agent failed none of the held tasks after its changes.")
    if improver.show_history and tried:
        parts.append("Tried before, and how it went:")
        parts += [f"- {change}: {went}" for change, went in tried]
    parts.append(f"Propose up to {improver.changes_per_round} changes with {TOOL_NAME}.")
    return [{"role": "system", "content": improver.instructions}, {"role": "user", "content": "\n\n".join(parts)}]


def proposed(base: Settings, arguments: Any) -> Proposed:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments)
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return Proposed(None, "its arguments are not valid JSON")
    allowed = {"instructions", *TUNABLE}
    if not isinstance(data, dict) or not data:
        return Proposed(None, "it changes neither the instructions nor a setting")
    other = sorted(set(data) - allowed)
    if other:
        return Proposed(
            None, f"{other[0]!r} is not the improver's to change (it may change {', '.join(sorted(allowed))})"
        )
    try:
        return Proposed(Settings.from_json({**base.to_json(), **data}, TOOL_NAME))
    except (ImproverError, TypeError) as exc:
        return Proposed(None, str(exc).removeprefix(f"{TOOL_NAME}: "))


def _proposal_words(arguments: Any) -> str:
    """What a propose_improver call says: the text of each of its values, or its arguments
    as given when they are no JSON object (JSON's escapes would split its words)."""
    try:
        data = json.loads(arguments) if isinstance(arguments, str) else arguments
    except json.JSONDecodeError:
        return str(arguments)
    return "\n".join(str(v) for v in data.values()) if isinstance(data, dict) else str(arguments)


def _passed(tallies: dict[str, Tally]) -> str:
    return f"{sum(t.passed for t in tallies.values())}/{sum(t.runs for t in tallies.values())}"


# -- the loop --------------------------------------------------------------------------------


@dataclass
class MetaLoop:
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
    test: str = "newcombe"
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)
    concurrency: int = 8
    publish: Publish | None = None
    apply: Callable[[Settings, str], None] | None = None
    halted: Callable[[], str | None] = lambda: None
    seed: int | None = None
    on_event: Callable[[Event], None] = lambda event: None
    progress: Callable[[str], None] | None = None  # each grading loop's lines, as it goes

    def __post_init__(self) -> None:
        check_problems(self.problems, self.held_out)
        self.held = held_digest(self.held_out)
        self.held_texts = held_texts(self.problems, self.held_out)
        self.used = TokenUsage()
        self.round = 0
        self.stopped: Stop | None = None
        self.stopping = asyncio.Event()
        self._grading_loop: Loop | None = None  # the loop grading an improver now, told of a stop request
        self.rng = np.random.default_rng(self.seed)
        self._before: dict[str, dict[str, Tally]] = {}  # per problem: the agent as it is on its held tasks
        self._graded: dict[tuple[str, str], Graded] = {}  # (improver, problem) -> graded, for the improver as it is
        self.kept_by: dict[str, str] = {}  # improver id -> the step that kept it, in this run
        lines = [line for _, line in self.lineage.lines()]
        self.tried = {line["improver"] for line in lines if line.get("improver")}
        self.history = [(line["change"], line["went"]) for line in lines if line.get("went")]
        allowed = {line["confirmations"] for line in lines if line.get("held_out_digest") == self.held}
        if allowed - {self.confirmations}:
            raise ImproverError(
                f"these held-out problems were given with --confirmations {allowed.pop()} before: their level is fixed "
                "by it, so give the same, or fresh held-out problems"
            )
        self.follows = next(
            (line["claim"] for line in reversed(lines) if line["decision"] == "kept" and line.get("claim")), None
        )

    def request_stop(self) -> None:
        """Called from a signal handler: the run stops at the next step it can, the
        loop grading an improver at its own next step."""
        self.stopping.set()
        if self._grading_loop is not None:
            self._grading_loop.request_stop()

    async def run(self, rounds: int) -> None:
        try:
            graded = await self._current(self.problems)
            self._emit(
                "baseline",
                f"the improver as it is ({self.improver.id}): on the problems to choose on the agent passed "
                f"{_pooled(graded, 'before')} held-out runs before its changes and {_pooled(graded, 'after')} after",
                improver=self.improver.id,
                before=_counts(graded, "before"),
                after=_counts(graded, "after"),
            )
            for self.round in range(1, rounds + 1):
                await self._round()
        except Stop as stop:
            self.stopped = stop
            self._emit("stopped", f"stopped: {stop}", reason=str(stop))
            self._record({"decision": "stopped", "reason": str(stop)})
        finally:
            self._emit(
                "tokens",
                f"{self.used.total} tokens used",
                tokens_in=self.used.tokens_in,
                tokens_out=self.used.tokens_out,
            )
            self._emit("recorded", f"recorded in {self.lineage.path}", lineage=str(self.lineage.path))

    async def _round(self) -> None:
        self._go()
        proposer = self.improver
        graded = await self._current(self.problems)
        messages = improver_messages(proposer, graded, self.history if proposer.show_history else [])
        try:
            completion = await self.proposer.complete(messages, [PROPOSE_TOOL], None)
        except ProviderError as exc:
            self._emit("proposer", f"round {self.round}: the proposer errored ({exc}); no change this round")
            return
        self.used = self.used + completion.usage
        calls = [
            c for c in completion.message.get("tool_calls") or [] if c.get("function", {}).get("name") == TOOL_NAME
        ]
        self._check_held_out(calls)  # every call, those past changes_per_round too, before any is tried
        proposals = [proposed(proposer, c["function"].get("arguments")) for c in calls[: proposer.changes_per_round]]
        n = len(proposals)
        self._emit(
            "round",
            f"round {self.round}: the improver {proposer.id} proposed {n} {'change' if n == 1 else 'changes'} to itself"
            + ("" if n else f" (no {TOOL_NAME} call)"),
            improver=proposer.id,
            proposals=n,
        )
        for proposal in proposals:
            await self._consider(proposal, proposer)

    async def _consider(self, proposal: Proposed, proposer: Settings) -> None:
        change = proposal.improver
        if change is None:
            self._decide(
                "turned down", f"turned down: a proposal: {proposal.why}", "a proposal", None, reason=proposal.why
            )
            return
        label = describe_change(change, proposer)
        why = (
            "tried already"
            if change.id in self.tried
            else ("it is the improver as it is" if change == proposer else "")
        )
        if why:
            self._decide("turned down", f"turned down: {label}: {why}", label, change, reason=why)
            return
        mine = await self._grade_all(change, self.problems)
        current = await self._current(self.problems)
        rule = Rule.for_part(CHOOSE, self.test, self.confirmations, self.runs)
        said = await self._decided(rule, mine, current)
        if said.outcome is Outcome.NOT_JUDGED:
            self._not_judged(label, change, said)
            return
        screen = said.comparison
        assert screen is not None
        if said.outcome is not Outcome.GOES_ON:
            self._decide(
                "tried",
                f"tried {label}: the agent ended at {screen.describe()} on the problems to choose on: {_verdict(said)}",
                label,
                change,
                choose=comparison_json(screen),
                lost=list(said.lost),
            )
            return
        await self._confirm(change, label, screen, proposer)

    async def _confirm(self, change: Settings, label: str, screen: Comparison, proposer: Settings) -> None:
        number = self._spent() + 1
        if number > self.confirmations:
            raise Stop(
                f"the held-out problems have spent their {self.confirmations} confirmations: give fresh held-out problems"
            )
        mine = await self._grade_all(change, self.held_out)
        current = await self._current(self.held_out)
        rule = Rule.for_part(SEALED, self.test, self.confirmations, self.runs)
        said = await self._decided(rule, mine, current)
        counted = {"confirmation": number, "confirmations": self.confirmations, "held_out_digest": self.held}
        if said.outcome is Outcome.NOT_JUDGED:
            self._not_judged(label, change, said, **counted)
            return
        held = said.comparison
        assert held is not None
        if said.outcome is not Outcome.KEPT:
            self._decide(
                "not confirmed",
                f"tried {label}: the agent ended at {screen.describe()} on the problems to choose on, but at "
                f"{held.describe()} on those held out: {_verdict(said)} (confirmation {number} of {self.confirmations} spent)",
                label,
                change,
                choose=comparison_json(screen),
                held=comparison_json(held),
                lost=list(said.lost),
                **counted,
            )
            return
        self._keep(change, label, screen, held, number, proposer)

    def _keep(
        self, change: Settings, label: str, screen: Comparison, held: Comparison, number: int, proposer: Settings
    ) -> None:
        step = digest({"improver": change.id, "held_out": self.held, "confirmation": number})[:16]
        body = {
            "profile": self.profile,
            "step": step,
            "follows": self.follows,
            "change": label,
            "before": self.improver.to_json(),  # what it replaces: the proposer, unless this round kept another first
            "after": change.to_json(),
            "improver": change.id,
            "problems": [p.digest for p in self.problems],
            "held_out": [p.digest for p in self.held_out],
            "held_out_digest": self.held,
            "choose": comparison_json(screen),
            "held": comparison_json(held),
            "confirmation": number,
            "confirmations": self.confirmations,
            "level": levels.confirmation_level(
                self.confirmations
            ),  # one-sided; the intervals are two-sided at twice it
            "test": self.test,
        }
        claim, pulse = self.publish(KIND, body) if self.publish else (None, None)
        parent_step = self.kept_by.get(proposer.id)
        self._decide(
            "kept",
            f"kept {label}: with it the agent ended at {screen.describe()} on the problems to choose on, and at "
            f"{held.describe()} on the problems held out (confirmation {number} of {self.confirmations}), as step {step}",
            label,
            change,
            **body,
            claim=claim,
            pulse=pulse,
            proposed_by=proposer.id,
            proposed_by_step=parent_step,
        )
        if parent_step:
            self._emit(
                "self-improved",
                f"the improver step {parent_step} kept went on to propose the change step {step} kept",
                step=step,
                proposed_by_step=parent_step,
            )
        if claim:
            self.follows = claim
            self._emit("published", f"published as claim {claim}", claim=claim, pulse=pulse)
        self.kept_by[change.id] = step
        self.improver = change
        if self.apply:
            self.apply(change, step)
            self._emit("applied", f"profile {self.profile}'s improver is now the one step {step} kept", step=step)

    def _not_judged(self, label: str, change: Settings, said: Decision, **data: Any) -> None:
        thin = ", ".join(said.thin[:3]) + (" ..." if len(said.thin) > 3 else "")
        self._decide(
            "not judged",
            f"not judged {label}: errored runs left {thin} without a judged run",
            label,
            change,
            thin=list(said.thin),
            **data,
        )

    def _check_held_out(self, calls: Sequence[dict[str, Any]]) -> None:
        for call in calls:
            said = _proposal_words(call["function"].get("arguments"))
            for problem, words in self.held_texts:
                task = words.held_in(said)
                if task:
                    raise Stop(
                        f"a proposal holds task {task} of held-out problem {problem.name}: the held-out tasks reached "
                        "the proposer; hold out fresh problems"
                    )

    # -- grading ---------------------------------------------------------------------------

    async def _current(self, problems: Sequence[Problem]) -> list[Graded]:
        """The improver as it is, graded once on each problem (afresh once it changes)."""
        out = []
        for problem in problems:
            key = (self.improver.id, problem.digest)
            if key not in self._graded:
                self._graded[key] = await self._grade(self.improver, problem)
            out.append(self._graded[key])
        return out

    async def _grade_all(self, improver: Settings, problems: Sequence[Problem]) -> list[Graded]:
        return [await self._grade(improver, problem) for problem in problems]

    async def _grade(self, improver: Settings, problem: Problem) -> Graded:
        """The ordinary loop on the problem's TRAIN tasks, with `improver` writing the
        changes, in a scratch folder; then the agent it kept on the HELD tasks."""
        with tempfile.TemporaryDirectory(prefix="agentd-improver-") as scratch:
            routes = Routes(Path(scratch))
            request = SealRequest(
                share=LOOP_SHARE, confirmations=LOOP_CONFIRMATIONS, canaries=0, seed=problem.digest[:16]
            )
            try:
                seal = make_seal(problem.train, routes, request, Separation.of([], [], ExportRecord()))
            except ImproverError as exc:
                raise Stop(f"problem {problem.name}: its TRAIN tasks cannot be sealed for the loop: {exc}") from None
            loop = Loop(
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
                on_event=self._grading(improver, problem),
            )
            self._grading_loop = loop
            try:
                await loop.run(self.loop_rounds)
            finally:
                self._grading_loop = None
            self.used = self.used + loop.used
            if loop.stopped is not None:
                raise loop.stopped
            kept = loop.current
        if problem.digest not in self._before:
            self._before[problem.digest] = (
                await self._trial(self.agent_variant, problem.held.tasks, self.runs)
            ).tallies()
        result = await self._trial(kept, problem.held.tasks, self.runs)
        return Graded(problem, self._before[problem.digest], result.tallies(), kept, result.wrong())

    def _grading(self, improver: Settings, problem: Problem) -> Callable[[Event], None]:
        report = self.progress
        if report is None:
            return lambda event: None

        def say(event: Event) -> None:
            if event.kind not in ("tokens", "recorded"):  # counted in the run's own; its scratch folder goes
                report(f"grading the improver {improver.id} on {problem.name}: {event.text}")

        return say

    async def _decided(self, rule: Rule, mine: list[Graded], current: list[Graded]) -> Decision:
        """The decision on one part, over every problem's held tasks, with fresh runs of what
        the change's loops kept on the contested tasks, batch by batch, as the loop does."""
        tasks = {f"{i}/{t.name}": (g, t) for i, g in enumerate(mine) for t in g.problem.held.tasks}
        ours = {f"{i}/{n}": tally for i, g in enumerate(mine) for n, tally in g.after.items()}
        theirs = {f"{i}/{n}": tally for i, g in enumerate(current) for n, tally in g.after.items()}
        names = tuple(tasks)
        fresh: dict[str, Tally] = {}
        said = decision.decide(rule, Evidence(ours, theirs, fresh), names)
        for _ in range(-(-rule.contest_runs // rule.runs)):
            if said.outcome is not Outcome.MORE_RUNS:
                return said
            for key, runs in said.more.items():
                graded, task = tasks[key]
                tally = (await self._trial(graded.kept, [task], runs)).tallies().get(task.name)
                if tally is None:  # every fresh run errored: settled below if it keeps on
                    continue
                old = fresh.get(key)
                fresh[key] = Tally(tally.passed + (old.passed if old else 0), tally.runs + (old.runs if old else 0))
            said = decision.decide(rule, Evidence(ours, theirs, fresh), names)
        return decision.settle(said)

    async def _trial(self, variant: Variant, tasks: Sequence[Task], runs: int) -> TrialResult:
        self._go()
        try:
            result = await run_trials(
                variant,
                tasks,
                self.agent,
                self.models,
                runs=runs,
                concurrency=self.concurrency,
                limits=self.limits,
                halted=self.halted,
            )
        except Halted as exc:
            raise Stop(str(exc)) from None
        self.used = self.used + result.usage
        return result

    # -- records -----------------------------------------------------------------------------

    def _spent(self) -> int:
        """The held-out problems' confirmations spent, by this run and every run before."""
        return max(
            (
                line.get("confirmation", 0)
                for _, line in self.lineage.lines()
                if line.get("held_out_digest") == self.held
            ),
            default=0,
        )

    def _go(self) -> None:
        if self.stopping.is_set():
            raise Interrupted("interrupted; the improver lineage is as the last finished step left it")
        why = self.halted()
        if why:
            raise Stop(why)

    def _decide(self, name: str, text: str, label: str, change: Settings | None, /, **data: Any) -> None:
        went = _went(name, data)
        self.history.append((label, went))
        if change is not None:
            self.tried.add(change.id)
        line = {"decision": name, "change": label, "improver": change.id if change else None, "went": went, **data}
        self._record(line)
        self._emit(name, text, **{k: v for k, v in line.items() if k != "decision"})

    def _record(self, line: dict[str, Any]) -> None:
        self.lineage.append({"at": utc_now(), "profile": self.profile, "round": self.round, **line})

    def _emit(self, kind: str, text: str, **data: Any) -> None:
        self.on_event(Event(kind, text, data))


def _verdict(said: Decision) -> str:
    if said.outcome is Outcome.LOSES_TASKS:
        return f"the agent loses {', '.join(said.lost)}, which it passed with the improver as it is"
    return "not better beyond chance"


def _went(name: str, data: dict[str, Any]) -> str:
    """How a change went, as the improver may be told: nothing a held-out problem said.
    Its reasons for turning one down name nothing held out, so it is told them."""
    if name == "turned down":
        return f"turned down before it was tried ({data.get('reason')})"
    if name == "kept":
        return f"kept{chosen_counts(data)}"
    return how_it_went(name, data, "problems")


def _pooled(graded: Sequence[Graded], which: str) -> str:
    tallies = [t for g in graded for t in getattr(g, which).values()]
    return f"{sum(t.passed for t in tallies)}/{sum(t.runs for t in tallies)}"


def _counts(graded: Sequence[Graded], which: str) -> list[int]:
    passed, runs = _pooled(graded, which).split("/")
    return [int(passed), int(runs)]
