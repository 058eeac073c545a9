"""Attesting a release: someone other than its publisher rebuilds it and scores it.

The attester is handed the release's patch and the seal's sealed tasks, and holds a
checkout of the code. Each is held to what the ledger says before anything is built: the
patch to the release's SHA-256, the tasks to the `sealed_digest` of the seal the release
names, the checkout to holding the release's commit. The code is then rebuilt from fresh
clones at that commit (the code loop's `Workshop`), once as it stood and once with the
patch, each built and tested in the attester's own sandbox; both trees are scored as
candidates on the sealed tasks, R runs of each, by the attester's harness; and the same
decision the loop kept it by (`improver.loop.contests.decided`, at the seal's level and with its
test) says whether it holds up. A canary passed, or its code word said, means it does not.

A challenge's rebuild recipe (improver/code/release.py's `recipe_for`, read back by
`Release.following`) names the same things, so a challenger or an adjudicator reruns it
through the same function.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from improver.base.errors import ImproverError
from improver.base.locks import holding
from improver.base.protocol import EpisodeLimits
from improver.base.variant import Variant
from improver.code.codeloop import Workshop
from improver.code.release import Release, patch_digest
from improver.decide import codewords
from improver.decide.decision import SEALED, Outcome, Rule
from improver.decide.stats import Comparison
from improver.episodes.harness import ModelFactory
from improver.episodes.trials import CONCURRENCY, Halted, TrialResult, run_trials
from improver.loop.contests import decided
from improver.seals.seal import code_word, is_canary
from improver.tasks.task import Task, TaskSet, parse_set
from sandbox import Runner

RUNS = 4


def load_sealed(path: Path) -> TaskSet:
    """The sealed tasks handed over: a task set file, or a seal file (its sealed part)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ImproverError(f"no sealed tasks file at {path}") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise ImproverError(f"{path}: not a sealed tasks file ({exc})") from None
    held = data.get("tasks") if isinstance(data, dict) and "terms" in data else data
    return parse_set(held, str(path))


@dataclass(frozen=True)
class Setup:
    """The attester's own: its sandbox, its models, where clones go, and its limits."""

    runner: Runner
    models: ModelFactory
    root: Path  # the rebuild's folder, removed when it ends
    limits: EpisodeLimits = field(default_factory=EpisodeLimits)
    concurrency: int = CONCURRENCY
    readable: tuple[Path, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    progress: Callable[[str], None] = lambda line: None
    halted: Callable[[], str | None] = lambda: None


@dataclass(frozen=True)
class Finding:
    """What a rebuild found: whether the release holds up, and the figures behind it."""

    release: Release
    tasks: str  # the sealed tasks' digest
    runs: int
    holds: bool
    why: str  # one line
    before: tuple[int, int]  # (passed, runs) of the code as it stood, pooled over the real sealed tasks
    after: tuple[int, int]  # with the patch
    interval: tuple[float, float] | None  # two-sided at twice the seal's level; None when nothing was compared
    built: bool  # with the patch
    tested: bool
    sandbox: str

    def body(
        self, runner: str, expires: str, bond: str | None = None, adjudicator: str | None = None
    ) -> dict[str, Any]:
        """The agent.release-attestation/v1 body."""
        r = self.release
        return {
            "release": r.id,
            "release_claim": r.claim,
            "commit": r.commit,
            "patch": r.patch,
            "holds": self.holds,
            "why": self.why,
            "tasks": self.tasks,
            "runs": self.runs,
            "before": {"passed": self.before[0], "runs": self.before[1]},
            "after": {"passed": self.after[0], "runs": self.after[1]},
            "interval": list(self.interval) if self.interval else None,
            "level": r.level,
            "rebuilt": {"built": self.built, "tested": self.tested, "commands": r.commands.to_json()},
            "sandbox": self.sandbox,
            "runner": runner,
            "expires": expires,
            "bond": bond,
            "adjudicator": adjudicator,
        }


def check_handed(release: Release, patch: bytes, tasks: TaskSet) -> None:
    """ImproverError when the patch or the sealed tasks are not the ones the ledger names
    (the release itself was held to its id as it was read: `Release.of`)."""
    if patch_digest(patch) != release.patch:
        raise ImproverError(
            f"the patch's SHA-256 ({patch_digest(patch)[:16]}) is not release {release.id}'s ({release.patch[:16]}): "
            "give --patch the patch it published"
        )
    if tasks.digest != release.sealed_digest:
        raise ImproverError(
            f"the sealed tasks' digest ({tasks.digest[:16]}) is not the one the release's seal published "
            f"({release.sealed_digest[:16]}): give --tasks the sealed tasks of that seal"
        )


async def attest(
    release: Release, source: Path, patch: bytes, tasks: TaskSet, setup: Setup, runs: int = RUNS
) -> Finding:
    """Rebuilds the release at its commit, as it stood and with its patch, and scores
    both on the sealed tasks; ImproverError when what is handed over is not what the
    ledger names (nothing is built then)."""
    if runs < 1:
        raise ImproverError("--runs must be at least 1")
    check_handed(release, patch, tasks)
    with holding(setup.root, timeout=0):  # one rebuild of a release at a time in its folder
        workshop = Workshop(
            source, setup.root, release.commands, setup.runner, setup.readable, setup.env, at=release.commit
        )
        try:
            return await _rebuilt(release, workshop, patch, tasks, setup, runs)
        except Halted as exc:
            raise ImproverError(str(exc)) from None
        finally:
            workshop.close()


async def _rebuilt(
    release: Release, workshop: Workshop, patch: bytes, tasks: TaskSet, setup: Setup, runs: int
) -> Finding:
    found = _Found(release, tasks.digest, runs, setup.runner.name)
    commit = release.commit[:12]
    setup.progress(f"building commit {commit} as it stood, in the {setup.runner.name} sandbox")
    stood, why = await workshop.built(b"")
    if stood is None:
        return found.no(f"the code as it stood (commit {commit}) does not build and test: {why}")
    setup.progress(f"building commit {commit} with the patch of release {release.id}")
    patched, why = await workshop.built(patch)
    if patched is None:
        # Workshop.built says which step failed first: a failed test was built.
        return found.no(f"with the patch, {why}", built=why.startswith("the test"))
    found.built, found.tested = True, bool(release.commands.test)
    before, after = (
        replace(release.agent, commit=release.commit),
        replace(release.agent, commit=release.commit, patch=release.patch),
    )

    async def trial(variant: Variant, tree: Path, batch: Sequence[Task], n: int) -> TrialResult:
        what = "the code as it stood" if variant == before else "the release"
        return await run_trials(
            variant,
            batch,
            workshop.candidate(tree),
            setup.models,
            runs=n,
            concurrency=setup.concurrency,
            limits=setup.limits,
            on_result=_counter(setup.progress, what, len(batch) * n),
            halted=setup.halted,
        )

    stood_result = await trial(before, stood, tasks.tasks, runs)
    patched_result = await trial(after, patched, tasks.tasks, runs)
    canaries = [t for t in tasks.tasks if is_canary(t)]
    leak = _leak(stood_result, canaries) or _leak(patched_result, canaries)
    if leak:
        return found.no(leak)
    real = [t for t in tasks.tasks if not is_canary(t)]
    mine, current = patched_result.tallies(real), stood_result.tallies(real)
    rule = replace(Rule.for_part(SEALED, release.test, release.confirmations, runs), level=release.level)
    said, _ = await decided(rule, real, mine, current, lambda batch, n: trial(after, patched, batch, n))
    if said.outcome is Outcome.NOT_JUDGED:
        return found.no(f"not judged: errored runs left {', '.join(said.thin[:3])} without a judged run")
    assert said.comparison is not None
    found.compared(said.comparison)
    figures = f"{said.comparison.describe()} on the sealed tasks"
    if said.outcome is Outcome.KEPT:
        return found.yes(f"{figures}: better beyond chance at the seal's level {release.level:g}, losing no task")
    if said.outcome is Outcome.LOSES_TASKS:
        return found.no(f"it loses sealed tasks {', '.join(said.lost)}: {figures}")
    return found.no(f"not better beyond chance at the seal's level {release.level:g}: {figures}")


@dataclass
class _Found:
    """A Finding as it is put together, step by step."""

    release: Release
    tasks: str
    runs: int
    sandbox: str
    before: tuple[int, int] = (0, 0)
    after: tuple[int, int] = (0, 0)
    interval: tuple[float, float] | None = None
    built: bool = False
    tested: bool = False

    def compared(self, c: Comparison) -> None:
        self.before, self.after = (c.current_passed, c.current_runs), (c.change_passed, c.change_runs)
        self.interval = None if c.low is None or c.high is None else (c.low, c.high)

    def yes(self, why: str) -> Finding:
        return self._finding(True, why)

    def no(self, why: str, built: bool | None = None) -> Finding:
        if built is not None:
            self.built = built
        return self._finding(False, why)

    def _finding(self, holds: bool, why: str) -> Finding:
        return Finding(
            self.release,
            self.tasks,
            self.runs,
            holds,
            why,
            self.before,
            self.after,
            self.interval,
            self.built,
            self.tested,
            self.sandbox,
        )


def _leak(result: TrialResult, canaries: list[Task]) -> str | None:
    """Why a trial shows the sealed answers reached the candidate, or None."""
    for canary in canaries:
        tally = result.per_task.get(canary.name)
        if tally and tally.passed:
            return f"{canary.name} was passed: the sealed answers reached the agent or its scoring was gamed"
    words = [code_word(c) for c in canaries]
    for run in result.results:
        said = codewords.said_of(run.run.answer, words)
        if said is not None:
            return f"a run's answer holds the code word of {canaries[said].name}: the sealed answers reached the agent"
    return None


def _counter(progress: Callable[[str], None], what: str, total: int) -> Callable[[object], None]:
    done = [0]
    step = max(total // 4, 1)

    def count(_: object) -> None:
        done[0] += 1
        if done[0] == total or done[0] % step == 0:
            progress(f"scoring {what}: {done[0]}/{total} runs")

    return count
