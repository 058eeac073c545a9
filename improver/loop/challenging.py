"""The challenge: a change that goes on from the tasks to choose on, tried on variants of
the tasks it newly passes, before any sealed task is asked.

A stage of judging a change (improver.loop.judging), with a challenger only: it writes
variants of the tasks the change newly passes (improver.loop.challenger), the agent as it
is and as changed run on those that hold up and, afresh, on the tasks varied, and the
challenge's rule says whether the change gains less on the variants beyond chance. If
so, it is a shortcut, turned down with no confirmation spent. A challenge that can say
nothing (no task to vary, no variant held up, the challenger errored, every run errored)
lets the change go on, and says why.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from improver.decide.archive import Archived
from improver.decide.decision import Outcome, Rule
from improver.decide.stats import Comparison, Tally, confidence_label, percent
from improver.loop.challenger import Challenger, Shown, Variants, newly_passed, write_variants
from improver.loop.contests import decided
from improver.loop.lineage import comparison_json
from improver.loop.record import Event, Verdict, contests, left_out
from improver.loop.running import Stop, Trials
from improver.loop.writing import SealReached
from improver.tasks.task import Task


@dataclass(frozen=True)
class Challenged:
    """What the variants showed of a change that goes on (for its kept step), and the
    operator's line saying so."""

    record: dict[str, Any]
    event: Event


async def challenge(
    challenger: Challenger,
    shown: Shown,
    trials: Trials,
    change: Archived,
    current: Archived,
    screen: Comparison,
    runs: int,
) -> Verdict | Challenged:
    """The challenge of `change` (its runs on the tasks to choose on) against `current`,
    the agent as it is; `screen` is what the tasks to choose on said of it."""
    varied = newly_passed(shown.chosen, change.tallies, current.tallies, challenger.tasks)
    if not varied:
        return _unchallenged(challenger, shown.change, "it newly passes no task to vary", [])
    on = _Variants(challenger, shown, trials, change, current, runs)
    variants = await on.written(varied)
    wrote = {"written": variants.written, "left_out": dict(variants.left_out), "calls": variants.calls}
    if variants.failed:
        why = f"the challenger errored through every retry ({variants.errors[0]}), so it is not judged on variants"
        return _unchallenged(challenger, shown.change, why, variants.of, **wrote)
    if not variants.tasks:
        why = f"no variant the challenger wrote of the {len(varied)} tasks it newly passes held up"
        return _unchallenged(challenger, shown.change, why, variants.of, **wrote)
    return await on.judged(variants, [t for t in varied if t.name in variants.of], wrote, screen)


@dataclass(frozen=True)
class _Variants:
    """A change and the agent as it is, on the variants a challenger writes."""

    challenger: Challenger
    shown: Shown
    trials: Trials
    change: Archived
    current: Archived
    runs: int

    async def written(self, varied: list[Task]) -> Variants:
        """The challenger's variants of `varied`, told how the agent and the change did on each."""
        self.trials.go()

        def how(task: Task) -> str:
            was, now = self.current.tallies[task.name], self.change.tallies[task.name]
            return f"the agent passed it in {was.passed} of {was.runs} runs; with the change, in {now.passed} of {now.runs}"

        try:
            variants = await write_variants(self.challenger, self.shown, varied, how, self.trials.left)
        except SealReached as exc:
            raise Stop(str(exc)) from None
        self.trials.spend(variants.usage)
        return variants

    async def judged(
        self, variants: Variants, varied: list[Task], wrote: dict[str, Any], screen: Comparison
    ) -> Verdict | Challenged:
        """The challenge's rule on the variants that held up, against fresh runs of the
        tasks they vary: the change goes on, or is a shortcut."""
        label, tasks, change = self.shown.change, variants.tasks, self.change.variant
        now = await self.trials.trial(self.current.variant, tasks, self.runs)
        mine = await self.trials.trial(change, tasks, self.runs)
        # The tasks varied, afresh, as many runs each as their variants have together.
        again = [
            await self.trials.trial(v, varied, self.runs * self.challenger.variants)
            for v in (change, self.current.variant)
        ]
        errored = now.errored + mine.errored + sum(r.errored for r in again)
        ours, theirs = (_pooled(r.tallies(), varied) for r in again)
        if ours is None or theirs is None:
            why = f"{errored} runs errored, leaving the tasks it varies without a judged run, so it is not judged on variants"
            return _unchallenged(self.challenger, label, why, variants.of, **wrote)
        originals = (ours, theirs)
        said, extra = await decided(
            Rule.challenge(self.runs),
            tasks,
            mine.tallies(),
            now.tallies(),
            lambda b, n: self.trials.trial(change, b, n),
            originals,
        )
        errored += extra
        if said.outcome is Outcome.NOT_JUDGED:
            why = f"{errored} runs on its variants errored, leaving some without a judged run, so it is not judged on them"
            return _unchallenged(self.challenger, label, why, variants.of, **wrote)
        c, gap = said.comparison, said.gap
        assert c is not None and gap is not None
        record = {
            "challenger": self.challenger.model.name,
            "of": variants.of,
            "variants": len(tasks),
            **comparison_json(c),
            "varied": [originals[0].passed, originals[0].runs, originals[1].passed, originals[1].runs],
            "gap": list(gap),
            "errored": errored,
            **wrote,
        }
        on = f"{_gains(c, originals, gap, len(tasks), len(varied))}{contests(said)}"
        if said.outcome is Outcome.GOES_ON:
            text = f"challenged {label}: {on}{left_out(errored)}: it goes on to the sealed tasks"
            return Challenged(record, Event("challenged", text, dict(record)))
        lost = f"; it loses variants {', '.join(said.lost)}, which the agent passes" if said.lost else ""
        return Verdict(
            said,
            "tried",
            f"{screen.describe()} on the tasks to choose on, but a shortcut: {on}{lost}"
            f"{left_out(errored)}; no confirmation spent",
            {
                "choose": comparison_json(screen),
                "challenge": record,
                "lost": list(said.lost),
                "contested": list(said.contested),
            },
        )


def _pooled(tallies: dict[str, Tally], tasks: list[Task]) -> Tally | None:
    """The runs of `tasks` pooled; None when every one errored."""
    got = [tallies[t.name] for t in tasks if t.name in tallies]
    return Tally(sum(t.passed for t in got), sum(t.runs for t in got)) if got else None


def _gains(c: Comparison, originals: tuple[Tally, Tally], gap: tuple[float, float], variants: int, varied: int) -> str:
    """E.g. "on 8 variants ... 10/32 against 8/32, and on fresh runs of those 4 tasks
    16/16 against 2/16: its gain on the variants (+6%) is beyond chance smaller than on
    the tasks (+88%; 90% interval of the gap -100% to -47%)"."""
    mine, now = originals
    on_variants = c.change_passed / c.change_runs - c.current_passed / c.current_runs
    on_tasks = mine.passed / mine.runs - now.passed / now.runs
    smaller = "beyond chance smaller" if gap[1] < 0 else "not beyond chance smaller"
    return (
        f"on {variants} variants the challenger wrote of the tasks it newly passes, {c.change_passed}/{c.change_runs} "
        f"against {c.current_passed}/{c.current_runs}, and on fresh runs of {_those(varied)} {mine.passed}/{mine.runs} "
        f"against {now.passed}/{now.runs}: its gain on the variants ({percent(on_variants)}) is {smaller} than on the "
        f"tasks ({percent(on_tasks)}; {confidence_label(c.level)} interval of the gap {percent(gap[0])} to {percent(gap[1])})"
    )


def _those(tasks: int) -> str:
    return "that task" if tasks == 1 else f"those {tasks} tasks"


def _unchallenged(challenger: Challenger, label: str, why: str, of: list[str], **wrote: Any) -> Challenged:
    record = {"challenger": challenger.model.name, "of": of, "variants": 0, "unchallenged": why, **wrote}
    text = f"unchallenged {label}: {why}; it goes on to the sealed tasks"
    return Challenged(record, Event("unchallenged", text, dict(record)))
