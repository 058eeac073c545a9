"""How often the loop's decision keeps a change, by simulation through its own function.

Every simulated change goes through improver.decide.decision's `judge_many`, the vectorised core
that `decide` (what the loop calls) runs for one change, step by step as the loop takes
them: on the tasks to choose on, the change's first runs against the agent's baseline;
while the decision asks for more runs on contested tasks, a batch of fresh runs of the
change on each of them, and the decision again; then the same on the sealed tasks at the
seal's level 0.05/k. Kept = better and nothing lost on both parts.

The world: each task has its own pass probability for the agent, drawn from a prior
(beta(0.5,0.5): most tasks nearly always or nearly never passed; beta(1,1): any
difficulty alike; mostly-easy beta(4,1); mostly-hard beta(1,4)); runs are independent
given it. Sizes are tasks a part x runs of the change (12x4, 40x4, 80x2), the agent's
baseline 4 times as many runs.
- `uniform` +g: every task's probability raised by g points, at most to 1.
- `fixes-4` (effect 100): a lesson that takes a tenth of the tasks (4 of 40), ones the
  agent never passes, to always passing; nothing else changes.
- `breaks-one` +20: uniform +20, except one sealed task the agent always passes, which
  the change makes fall to 0.2. (The guard is the same function on both parts.)
- `family_false_keep` (four times as many seals as changes): a seal's sealed tasks and
  the agent's baseline on them drawn once, then each of its k confirmations spent on a
  null change (the worst case: as if each had passed screening); the share of seals
  that keep any of them.
- `challenger_flagged`: changes that pass screening at 40x4 are challenged as the loop
  does, on 2 variants of each of the (up to 4, or 1 as in the demo) tasks they newly
  pass, the tasks themselves run afresh; the share called a shortcut. `uniform` +20: a
  real gain, whose variants are as hard as their task and gain as much; `shortcut`: a
  change that takes 4 tasks the agent fails (p drawn uniformly below 0.5) to always
  passing and does nothing for their variants.
- `improver_kept` (bench/improvers.py): a no-better improver judged by the meta-loop.
- the reusable holdout: `kept` with `--reusable`'s Thresholdout asked before each
  confirmation, at 40, 80 and 400 sealed tasks.

Each figure is a JSON line (`--json`) or a table row, with the average number of runs
of the change it cost (the agent's baseline, measured once per seal, is apart); rows of
the test `improve seal` uses by default carry "default": true.

    python bench/decisions.py --quick --json   # 1,000 changes a figure
    python bench/decisions.py                  # 10,000
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]  # the project's `ledger` before this folder's ledger.py
sys.path.append(str(ROOT / "bench"))  # bench/improvers.py, beside this one, when loaded from elsewhere

import improvers  # type: ignore[import-not-found]  # a bench script beside this one
import numpy as np
from improvers import positive  # type: ignore[import-not-found]
from numpy.typing import NDArray

from improver.decide.decision import BASELINE_FACTOR, CHOOSE, SEALED, Outcome, Rule, judge_many
from improver.decide.holdout import Holdout
from improver.decide.levels import DEFAULT_TEST, TESTS
from improver.loop.challenger import TASKS as CHALLENGED_TASKS, VARIANTS

PRIORS: dict[str, tuple[float, float]] = {
    "beta(0.5,0.5)": (0.5, 0.5),
    "beta(1,1)": (1.0, 1.0),
    "mostly-easy": (4.0, 1.0),
    "mostly-hard": (1.0, 4.0),
}
SIZES = ((12, 4), (40, 4), (80, 2))  # tasks a part, runs of the change
CONFIRMATIONS = 4
HOLDOUT_TASKS = (40, 80, 400)
FAMILY_SEALS = 4  # seals a family figure, per change of the others
BROKEN_TO = 0.2
# (what, scenario, effect) -> goal; kept goals hold at 40x4 for the default test, the rest everywhere.
GOALS: dict[tuple[str, str, int], tuple[str, float]] = {
    ("family_false_keep", "uniform", 0): ("<=", 0.05),
    ("kept", "uniform", 10): (">=", 0.60),
    ("kept", "uniform", 20): (">=", 0.97),
    ("kept", "fixes-4", 100): (">=", 0.50),
    ("kept", "breaks-one", 20): ("<=", 0.10),
    ("challenger_flagged", "uniform", 20): ("<=", 0.10),
    ("challenger_flagged", "shortcut", 100): (">=", 0.95),
}
ANY_SIZE = {("family_false_keep", "uniform", 0), ("kept", "breaks-one", 20)}


@dataclass(frozen=True)
class Part:
    """One part's world for many changes: one row per change, one column per task."""

    agent: NDArray[np.float64]  # the agent's pass probability
    change: NDArray[np.float64]  # the change's
    baseline: NDArray[np.int64]  # the agent's passes in its baseline runs


def world(
    rng: np.random.Generator, rows: int, tasks: int, prior: tuple[float, float], gain: float, baseline_runs: int
) -> Part:
    agent = rng.beta(*prior, size=(rows, tasks))
    return Part(agent, np.minimum(agent + gain, 1.0), rng.binomial(baseline_runs, agent))


def fixes(part: Part, rng: np.random.Generator, baseline_runs: int) -> Part:
    """A tenth of the tasks (at least one) become ones the agent never passes and the change always does."""
    agent, change = part.agent.copy(), part.agent.copy()
    fixed = max(1, round(agent.shape[1] / 10))
    agent[:, :fixed], change[:, :fixed] = 0.0, 1.0
    return Part(agent, change, rng.binomial(baseline_runs, agent))


def broken(part: Part, rng: np.random.Generator, baseline_runs: int) -> Part:
    """Task 0 becomes one the agent always passes and the change passes with p = 0.2."""
    agent, change, baseline = part.agent.copy(), part.change.copy(), part.baseline.copy()
    agent[:, 0], change[:, 0], baseline[:, 0] = 1.0, BROKEN_TO, baseline_runs
    return Part(agent, change, baseline)


def contested_out(
    rule: Rule,
    first: NDArray[np.int64],
    change: NDArray[np.float64],
    baseline: NDArray[np.int64],
    baseline_runs: int,
    rng: np.random.Generator,
    varied: tuple[NDArray[np.int64], ...] | None = None,
) -> tuple[NDArray[np.object_], NDArray[np.int64]]:
    """Per row: the decision's outcome once no contested task is pending, and the fresh
    runs it took. Fresh batches go only to the tasks the decision asks them for."""
    fresh_passed, fresh_runs = np.zeros_like(first), np.zeros_like(first)
    judged = judge_many(rule, first, rule.runs, baseline, baseline_runs, varied=varied)
    outcome = judged.outcome
    rows = np.flatnonzero(outcome == Outcome.MORE_RUNS)
    pending = judged.pending[rows]
    while len(rows):
        batch = np.where(pending, np.minimum(rule.runs, rule.contest_runs - fresh_runs[rows]), 0)
        fresh_passed[rows] += rng.binomial(batch, change[rows])
        fresh_runs[rows] += batch
        of_rows = None if varied is None else tuple(v[rows] for v in varied)
        again = judge_many(
            rule, first[rows], rule.runs, baseline[rows], baseline_runs, fresh_passed[rows], fresh_runs[rows], of_rows
        )
        outcome[rows] = again.outcome
        still = again.outcome == Outcome.MORE_RUNS
        rows, pending = rows[still], again.pending[still]
    return outcome, fresh_runs.sum(axis=1)


def judge_part(
    rule: Rule, part: Part, baseline_runs: int, rng: np.random.Generator
) -> tuple[NDArray[np.object_], NDArray[np.int64], NDArray[np.int64]]:
    """Per row: the outcome, the runs of the change it took, and its first runs' passes."""
    first = rng.binomial(rule.runs, part.change)
    outcome, fresh = contested_out(rule, first, part.change, part.baseline, baseline_runs, rng)
    return outcome, rule.runs * part.change.shape[1] + fresh, first


@dataclass(frozen=True)
class Figure:
    what: str
    tasks: int
    runs: int
    prior: str
    test: str
    scenario: str
    effect: int
    rate: float
    n: int
    runs_per_change: float = 0.0
    baseline_runs: int = 0
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        line = {
            "what": self.what,
            "tasks": self.tasks,
            "runs": self.runs,
            "prior": self.prior,
            "test": self.test,
            "scenario": self.scenario,
            "effect": self.effect,
            "rate": round(self.rate, 5),
            "n": self.n,
            "runs_per_change": round(self.runs_per_change, 1),
            "baseline_runs": self.baseline_runs,
            **self.extra,
        }
        if self.test == DEFAULT_TEST:
            line["default"] = True
        goal = _goal(self)
        if goal:
            op, limit = goal
            line["goal"] = f"{op} {limit}"
            line["met"] = bool(self.rate <= limit if op == "<=" else self.rate >= limit)
        return line


def _goal(f: Figure) -> tuple[str, float] | None:
    if f.extra.get("holdout_tasks"):
        return None
    key = (f.what, f.scenario, f.effect)
    if key in ANY_SIZE:
        return GOALS[key]
    if f.what == "kept" and not (f.tasks == 40 and f.runs == 4 and f.test == DEFAULT_TEST):
        return None
    return GOALS.get(key)


def kept_rate(
    size: tuple[int, int],
    prior: str,
    test: str,
    effect: int,
    scenario: str,
    changes: int,
    rng: np.random.Generator,
    holdout_tasks: int | None = None,
) -> Figure:
    """Changes tried end to end: screened on the tasks to choose on, then confirmed."""
    tasks, runs = size
    baseline_runs = BASELINE_FACTOR * runs
    gain = effect / 100
    choose = world(rng, changes, tasks, PRIORS[prior], gain, baseline_runs)
    sealed = world(rng, changes, holdout_tasks or tasks, PRIORS[prior], gain, baseline_runs)
    if scenario == "fixes-4":
        choose, sealed = fixes(choose, rng, baseline_runs), fixes(sealed, rng, baseline_runs)
    if scenario == "breaks-one":
        sealed = broken(sealed, rng, baseline_runs)
    screened, cost, _ = judge_part(Rule.for_part(CHOOSE, test, CONFIRMATIONS, runs), choose, baseline_runs, rng)
    goes_on = screened == Outcome.GOES_ON
    confirmed, sealed_cost, _ = judge_part(Rule.for_part(SEALED, test, CONFIRMATIONS, runs), sealed, baseline_runs, rng)
    kept = goes_on & (confirmed == Outcome.KEPT)
    extra: dict = {}
    if holdout_tasks:
        kept &= _holdout_passes(choose, sealed, runs, baseline_runs, rng)
        extra = {"holdout_tasks": holdout_tasks, "threshold": round(Holdout.create(holdout_tasks, 1).threshold, 4)}
    spent = (cost + np.where(goes_on, sealed_cost, 0)).mean()
    return Figure(
        "kept",
        tasks,
        runs,
        prior,
        test,
        scenario,
        effect,
        float(kept.mean()),
        changes,
        float(spent),
        baseline_runs,
        extra,
    )


def _holdout_passes(
    choose: Part, sealed: Part, runs: int, baseline_runs: int, rng: np.random.Generator
) -> NDArray[np.bool_]:
    """Whether the reusable holdout lets each change on to its confirmation (a fresh
    holdout per change: its budget is not what limits it here, its threshold is)."""
    gains = []
    for part in (choose, sealed):
        change = rng.binomial(runs, part.change).sum(axis=1) / (runs * part.change.shape[1])
        gains.append(np.clip(change - part.baseline.sum(axis=1) / (baseline_runs * part.change.shape[1]), -1, 1))
    holdout = Holdout.create(sealed.change.shape[1], CONFIRMATIONS, rng)
    return np.array([not holdout.ask(float(c), float(s), rng).turned_down for c, s in zip(*gains, strict=False)])


def family_false_keep(size: tuple[int, int], prior: str, test: str, seals: int, rng: np.random.Generator) -> Figure:
    """Seals whose k confirmations, each spent on a null change, keep any of them."""
    tasks, runs = size
    baseline_runs = BASELINE_FACTOR * runs
    sealed = world(rng, seals, tasks, PRIORS[prior], 0.0, baseline_runs)
    rule = Rule.for_part(SEALED, test, CONFIRMATIONS, runs)
    kept = np.zeros(seals, dtype=bool)
    spent = np.zeros(seals)
    for _ in range(CONFIRMATIONS):
        outcome, cost, _ = judge_part(rule, sealed, baseline_runs, rng)
        kept |= outcome == Outcome.KEPT
        spent += cost
    return Figure(
        "family_false_keep",
        tasks,
        runs,
        prior,
        test,
        "uniform",
        0,
        float(kept.mean()),
        seals,
        float(spent.mean() / CONFIRMATIONS),
        baseline_runs,
    )


def challenger_flagged(scenario: str, most: int, changes: int, rng: np.random.Generator) -> Figure:
    """Of the changes that pass screening (40x4, beta(0.5,0.5), the default test), the
    share the challenge calls a shortcut."""
    tasks, runs = 40, 4
    baseline_runs = BASELINE_FACTOR * runs
    choose = world(rng, changes, tasks, PRIORS["beta(0.5,0.5)"], 0.2, baseline_runs)
    variant_gain = 0.2
    if scenario == "shortcut":
        agent, change = choose.agent.copy(), choose.agent.copy()
        agent[:, :4] = rng.uniform(0.0, 0.5, size=(changes, 4))
        change[:, :4] = 1.0
        choose = Part(agent, change, rng.binomial(baseline_runs, agent))
        variant_gain = 0.0
    screened, _, first = judge_part(
        Rule.for_part(CHOOSE, DEFAULT_TEST, CONFIRMATIONS, runs), choose, baseline_runs, rng
    )
    on = np.flatnonzero(screened == Outcome.GOES_ON)
    picks = newly_passed(first[on], runs, choose.baseline[on], baseline_runs, most)
    flagged = np.zeros(len(on), dtype=bool)
    for count in range(1, most + 1):
        rows = np.flatnonzero((picks >= 0).sum(axis=1) == count)
        if len(rows):
            task = picks[rows, :count]
            agent = choose.agent[on[rows, None], task]
            change = choose.change[on[rows, None], task]
            flagged[rows] = _shortcut(agent, change, np.minimum(agent + variant_gain, 1.0), runs, rng)
    challenged = (picks >= 0).any(axis=1)
    rate = float(flagged[challenged].mean()) if challenged.any() else 0.0
    effect = 100 if scenario == "shortcut" else 20
    extra = {"varied": most, "variants": VARIANTS}
    return Figure(
        "challenger_flagged",
        tasks,
        runs,
        "beta(0.5,0.5)",
        DEFAULT_TEST,
        scenario,
        effect,
        rate,
        int(challenged.sum()),
        extra=extra,
    )


def newly_passed(
    change: NDArray[np.int64], runs: int, baseline: NDArray[np.int64], baseline_runs: int, most: int
) -> NDArray[np.int64]:
    """improver.loop.challenger.newly_passed on arrays: per row, up to `most` task indices
    (-1 beyond), those the agent failed in some run and the change passes, most gained first."""
    gain = np.where((baseline < baseline_runs) & (2 * change > runs), change / runs - baseline / baseline_runs, 0.0)
    order = np.argsort(-gain, axis=1, kind="stable")[:, :most]
    return np.where(np.take_along_axis(gain, order, axis=1) > 0, order, -1)


def _shortcut(
    agent: NDArray[np.float64],
    change: NDArray[np.float64],
    variant_change: NDArray[np.float64],
    runs: int,
    rng: np.random.Generator,
) -> NDArray[np.bool_]:
    """Per row: the challenge's verdict on VARIANTS variants of each task (as hard as it),
    both arms `runs` runs of each and, afresh, of the tasks themselves."""
    rows = len(agent)
    agent_v, change_v = np.repeat(agent, VARIANTS, axis=1), np.repeat(variant_change, VARIANTS, axis=1)
    again = VARIANTS * runs  # the tasks themselves, afresh, as many runs each as their variants together
    varied = (
        rng.binomial(again, change).sum(axis=1),
        np.full(rows, again * agent.shape[1]),
        rng.binomial(again, agent).sum(axis=1),
        np.full(rows, again * agent.shape[1]),
    )
    first, now = rng.binomial(runs, change_v), rng.binomial(runs, agent_v)
    rule = Rule.challenge(runs)
    outcome, _ = contested_out(rule, first, change_v, now, runs, rng, varied)  # the agent's own `runs` on variants
    return np.asarray(outcome != Outcome.GOES_ON, dtype=bool)


def improver_figures(changes: int, seed: int) -> list[dict]:
    """bench/improvers.py's figures: a no-better improver at each grading randomness, and better ones."""
    lines = [improvers.improver_kept(q, max(200, changes // 5), seed) for q in (0.3, 0.5, 0.8)]
    return lines + list(improvers.better_figures(max(200, changes // 5), seed))


def figures(changes: int, seed: int) -> list[Figure]:
    out: list[Figure] = []
    started = time.monotonic()
    for p, prior in enumerate(PRIORS):
        for size in SIZES:
            for t, test in enumerate(TESTS):
                rng = np.random.default_rng([seed, p, size[0], t])
                out.append(family_false_keep(size, prior, test, FAMILY_SEALS * changes, rng))
                for effect, scenario in ((10, "uniform"), (20, "uniform"), (100, "fixes-4"), (20, "breaks-one")):
                    out.append(kept_rate(size, prior, test, effect, scenario, changes, rng))
            print(f"{prior} {size[0]}x{size[1]} done ({time.monotonic() - started:.0f}s)", file=sys.stderr)
    rng = np.random.default_rng([seed, 98])
    for most in (CHALLENGED_TASKS, 1):
        for scenario in ("uniform", "shortcut"):
            out.append(challenger_flagged(scenario, most, changes, rng))
    rng = np.random.default_rng([seed, 99])
    for holdout_tasks in HOLDOUT_TASKS:
        for effect in (10, 20):
            out.append(
                kept_rate((40, 4), "beta(0.5,0.5)", DEFAULT_TEST, effect, "uniform", changes, rng, holdout_tasks)
            )
    return out


def print_table(rows: list[dict]) -> None:
    print(
        f"{'what':<19} {'size':>5} {'prior':<14} {'test':<10} {'scenario':<10} {'effect':>6} {'rate':>8} "
        f"{'runs/change':>11}  goal"
    )
    for line in rows:
        goal = f"{line['goal']} {'met' if line['met'] else 'MISSED'}" if "goal" in line else ""
        held = f" (holdout, {line['holdout_tasks']} sealed)" if line.get("holdout_tasks") else ""
        size = f"{line['tasks']}x{line['runs']}"
        print(
            f"{line['what']:<19} {size:>5} {line['prior']:<14} {line['test']:<10} {line['scenario']:<10} "
            f"{line['effect']:>+6} {line['rate']:8.2%} {line.get('runs_per_change', 0):11.0f}  {goal}{held}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="1,000 changes a figure instead of 10,000")
    parser.add_argument("--changes", type=positive, help="changes (or seals) simulated a figure")
    parser.add_argument("--json", action="store_true", help="one JSON line a figure")
    parser.add_argument("--seed", type=int, default=18, help="seed of the simulation")
    args = parser.parse_args(argv)
    changes = args.changes or (1_000 if args.quick else 10_000)
    started = time.monotonic()
    rows = [f.to_json() for f in figures(changes, args.seed)] + improver_figures(changes, args.seed)
    if args.json:
        for line in rows:
            print(json.dumps(line))
    else:
        print_table(rows)
    load = os.getloadavg()
    print(f"{time.monotonic() - started:.0f}s; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
