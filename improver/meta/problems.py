"""Problems: what an improver is graded on, each a pair of task files.

A problem's TRAIN tasks are those a loop chooses changes on; its HELD tasks, which that
loop never sees, are those the agent is measured on before and after what it kept
(improver.meta.grading). The problems an improver is chosen on and those held out to
confirm it share no task, and what the held-out problems say is never shown to the
proposer: every proposal is held against their words (improver.meta.proposing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from improver.base.digests import digest
from improver.base.errors import ImproverError
from improver.base.variant import Variant
from improver.decide.stats import Tally
from improver.loop.gates import SealedText
from improver.tasks.task import Task, TaskSet, load_tasks


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

    @property
    def tasks(self) -> tuple[Task, ...]:
        """Its TRAIN tasks and its HELD tasks."""
        return (*self.train.tasks, *self.held.tasks)


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
    """At least one problem to choose on; each problem given once; none held out that is
    also one to choose on, or shares a task with one."""
    if not problems:
        raise ImproverError("give at least one --problem TRAIN,HELD to grade improvers on")
    if not held_out:
        raise ImproverError("give at least one --held-out-problem TRAIN,HELD to confirm a kept improver on")
    _once(problems, "--problem")
    _once(held_out, "--held-out-problem")
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


def _once(problems: Sequence[Problem], option: str) -> None:
    """Each problem given once, by its digest: a problem named twice would count each of
    its tasks twice (and, held out, be a fresh set of held-out problems to spend on)."""
    seen: dict[str, str] = {}
    for problem in problems:
        first = seen.get(problem.digest)
        if first is not None:
            same = "" if first == problem.name else f" (the same tasks as {option} {first})"
            raise ImproverError(f"{option} {problem.name} is given twice{same}: give each problem once")
        seen[problem.digest] = problem.name


def held_texts(problems: Sequence[Problem], held_out: Sequence[Problem]) -> list[tuple[Problem, SealedText]]:
    """Each held-out problem's words, to hold proposals against: only those no task of the
    problems given holds too (the proposer is shown those, so it may repeat them)."""
    shown = [t for p in problems for t in (*p.train.tasks, *p.held.tasks)]
    return [(p, SealedText.of((*p.train.tasks, *p.held.tasks)).beyond(shown)) for p in held_out]


def held_digest(held_out: Sequence[Problem]) -> str:
    """What names a set of held-out problems, whose confirmations are counted together."""
    return digest(sorted(p.digest for p in held_out))


def held_tasks(held_out: Sequence[Problem]) -> dict[str, str]:
    """Every task of the held-out problems, TRAIN and HELD (both go into a confirmation: the
    loop chooses on the one, the agent is measured on the other), by its content key: what
    identical tasks share, however named and wherever they come from -> a name to say."""
    return {t.content_key: f"{t.name} of {p.name}" for p in held_out for t in p.tasks}


@dataclass(frozen=True)
class Graded:
    """The agent on one problem's held tasks, before and after an improver's loop."""

    problem: Problem
    before: dict[str, Tally]
    after: dict[str, Tally]
    kept: Variant  # what the loop kept: the agent as changed, or as it was
    wrong: dict[str, list[str]]  # per held task failed: what went wrong
    seed: str = ""  # the replication of the grading loop (improver.meta.replications)
