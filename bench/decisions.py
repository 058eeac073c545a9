"""How often the loop's decision rule keeps a change, by simulation.

The rule, exactly as the loop applies it (improver/loop.py: `Loop._judge` screens,
`Loop._confirm` confirms): a change is kept when, on the tasks to choose on, it is better
beyond chance at 95% and loses no task the agent passes (the screen), and, on the sealed
tasks, it is better beyond chance at the seal's level 0.05/k and loses no sealed task the
agent passes (the confirmation). A task the agent passes is one passed in more than half
its runs; a change loses it when the change does not pass it (improver.stats `passes`,
`lost_tasks`). Beside it the table shows the same changes without the no-loss condition
(better beyond chance on both parts, whatever tasks were lost), so a reader sees what
that condition costs. Each simulated change is judged by both tests, pooled Newcombe and
the task-paired sign-flip test, on the same simulated runs, so the two columns differ
only by the test.

What the loop does beside the rule, and the simulation leaves out, only ever turns a
change down, so the loop keeps at most what the table says: the early drop after one run
of each task (`Loop._consider`: clearly worse than the variant built on), a reusable
seal's holdout (`Seal.ask_holdout`), and changes left unjudged by errored runs.

The world simulated: every task has its own pass probability for the agent, drawn from a
Beta prior (Beta(0.5, 0.5): most tasks nearly always or nearly never passed; Beta(1, 1):
any difficulty equally likely). Both arms run every task the same number of times, so
the runs are paired by task; runs are independent given the task's probability. "N
tasks" means N on each part (a seal of 2N tasks at --share 50).

What "a true change of +10 points" means (--effect):
- add (the default): 0.10 is added to each task's pass probability, clipped at 1. Tasks
  the agent nearly always passes gain less, so the mean gain is below 10 points (the
  table's header gives it). This is the model the issue's figures were made with.
- logit: every task's log-odds move by the one amount that raises the mean pass
  probability by exactly 10 points; tasks of middling difficulty gain most.
A null change leaves every probability as it was.

    python bench/decisions.py            # 50,000 changes per cell and gain, a few minutes
    python bench/decisions.py --quick    # 2,000, for a look

`simulate` is what bench/loop.py imports.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
from numpy.typing import NDArray
from scipy import integrate, optimize, special, stats

from improver.stats import TESTS, confirmation_level, newcombe_bounds, passes, sign_flip_pvalues

# improver.loop's SCREEN_LEVEL, not imported: run as a script, this folder's ledger.py would
# shadow the ledger package improver.loop needs.
SCREEN_LEVEL = 0.05
PRIORS: dict[str, tuple[float, float]] = {"Beta(0.5,0.5)": (0.5, 0.5), "Beta(1,1)": (1.0, 1.0)}
TASKS = (20, 40, 80)
RUNS = (1, 2, 4)
GAINS = (0.10, 0.20, 0.30)
EFFECTS = ("add", "logit")


@dataclass(frozen=True)
class Rates:
    """Shares of simulated changes: better on each part (each test alone) and kept."""

    screened: float  # better beyond chance on the tasks to choose on, at 95%
    confirmed: float  # better beyond chance on the sealed tasks, at the seal's level
    both: float  # screened and confirmed, whatever tasks it lost: the rule without the no-loss condition
    kept: float  # kept by the loop's rule: screened and confirmed, losing no task the agent passes on either part


@dataclass(frozen=True)
class Part:
    """Passed runs on one part of the seal: one row per change, one column per task."""

    change: NDArray[np.int64]
    current: NDArray[np.int64]

    def loses_none(self, runs: int) -> NDArray[np.bool_]:
        """Per row: the change passes every task the agent passes (`lost_tasks` would be empty)."""
        lost = np.logical_and(passes(self.current, runs), np.logical_not(passes(self.change, runs)))
        return np.logical_not(lost.any(axis=1))


@dataclass(frozen=True)
class Judged:
    """Per row (one simulated change), what each condition of the loop's rule says."""

    screened: NDArray[np.bool_]
    choose_loses_none: NDArray[np.bool_]
    confirmed: NDArray[np.bool_]
    sealed_loses_none: NDArray[np.bool_]

    @property
    def both(self) -> NDArray[np.bool_]:
        """Better beyond chance on both parts: the rule without the no-loss condition."""
        return self.screened & self.confirmed

    @property
    def kept(self) -> NDArray[np.bool_]:
        """`Loop._judge` passes it on (better, nothing lost) and `Loop._confirm` keeps it (the same)."""
        return self.both & self.choose_loses_none & self.sealed_loses_none

    def rates(self) -> Rates:
        return Rates(*(float(x.mean()) for x in (self.screened, self.confirmed, self.both, self.kept)))


def judge(test: str, choose: Part, sealed: Part, runs: int, confirmations: int) -> Judged:
    """Judges each row's change as the loop does, on both parts, with the given test."""
    return Judged(
        better(test, choose.change, choose.current, runs, SCREEN_LEVEL),
        choose.loses_none(runs),
        better(test, sealed.change, sealed.current, runs, confirmation_level(confirmations)),
        sealed.loses_none(runs),
    )


def better(test: str, change: NDArray[np.int64], current: NDArray[np.int64], runs: int, level: float) -> NDArray[np.bool_]:
    """Whether each row's change is better beyond chance, vectorised over rows.

    `change` and `current` hold passed runs, one row per comparison, one column per
    task, each task run `runs` times in each arm. For the paired test, "p <= level / 2"
    is the same decision as `compare_paired`'s "interval above zero" (see improver.stats).
    """
    if test == "newcombe":
        total = change.shape[1] * runs
        low, _ = newcombe_bounds(change.sum(axis=1), total, current.sum(axis=1), total, level)
        return low > 0
    if test == "paired":
        return sign_flip_pvalues(change - current) <= level / 2
    raise ValueError(f"no test named {test!r}")


def improved(p: NDArray[np.float64], gain: float, effect: str, prior: tuple[float, float]) -> NDArray[np.float64]:
    """The changed agent's per-task pass probabilities (see the module's docstring)."""
    if gain == 0:
        return p
    if effect == "add":
        return np.minimum(p + gain, 1.0)
    if effect == "logit":
        return special.expit(special.logit(p) + logit_shift(gain, *prior))
    raise ValueError(f"no effect named {effect!r}: use one of {', '.join(EFFECTS)}")


@lru_cache(maxsize=None)
def logit_shift(gain: float, a: float, b: float) -> float:
    """The log-odds shift that raises the mean pass probability under Beta(a, b) by `gain`."""

    def shortfall(shift: float) -> float:
        # quad copes with Beta(0.5, 0.5)'s integrable singularities at 0 and 1.
        value, _ = integrate.quad(
            lambda p: (special.expit(special.logit(p) + shift) - p) * stats.beta.pdf(p, a, b), 0, 1, limit=200
        )
        return value - gain

    return float(optimize.brentq(shortfall, 0.0, 20.0, xtol=1e-12))


def mean_gain(gain: float, effect: str, prior: tuple[float, float], rng: np.random.Generator) -> float:
    """The change's true mean gain in pass probability, estimated on 10^6 tasks."""
    p = rng.beta(*prior, size=1_000_000)
    return float((improved(p, gain, effect, prior) - p).mean())


def simulate(
    tasks: int,
    runs: int,
    prior: tuple[float, float],
    gain: float,
    changes: int,
    rng: np.random.Generator,
    confirmations: int = 4,
    effect: str = "add",
    sealed_tasks: int | None = None,
) -> dict[str, Rates]:
    """Simulates `changes` changes through the loop's rule; returns each test's rates.

    `kept` is the loop's rule exactly as `Loop._judge` and `Loop._confirm` apply it: better
    beyond chance and no task the agent passes lost, on the tasks to choose on (at 95%)
    and on the sealed tasks (at 0.05/`confirmations`). `both` is the same changes without
    the no-loss condition on either part, to show what it costs. Each change gets tasks
    of its own (`tasks` to choose on, `sealed_tasks`, by default as many, sealed), so the
    rates average over task sets as well as over runs.
    """
    sealed_tasks = sealed_tasks or tasks
    parts = []
    for size in (tasks, sealed_tasks):
        p = rng.beta(*prior, size=(changes, size))
        current = rng.binomial(runs, p)
        change = rng.binomial(runs, improved(p, gain, effect, prior))
        parts.append(Part(change, current))
    choose, sealed = parts
    return {test: judge(test, choose, sealed, runs, confirmations).rates() for test in TESTS}


# -- the table --------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    prior: str
    tasks: int
    runs: int


Results = dict[tuple[Cell, float], dict[str, Rates]]


def run_all(changes: int, confirmations: int, effect: str, seed: int) -> Results:
    results: Results = {}
    started = time.monotonic()
    for prior_index, (prior_name, prior) in enumerate(PRIORS.items()):
        for tasks in TASKS:
            for runs in RUNS:
                cell = Cell(prior_name, tasks, runs)
                for gain_index, gain in enumerate((0.0, *GAINS)):
                    rng = np.random.default_rng([seed, prior_index, tasks, runs, gain_index])
                    results[cell, gain] = simulate(tasks, runs, prior, gain, changes, rng, confirmations, effect)
                print(f"{prior_name} {tasks} tasks x {runs} runs done ({time.monotonic() - started:.0f}s)", file=sys.stderr)
    return results


def pct(x: float) -> str:
    return f"{100 * x:.2f}%"


def print_tables(results: Results, changes: int, confirmations: int, effect: str, seed: int) -> None:
    confirm_level = confirmation_level(confirmations)
    cells = list(dict.fromkeys(cell for cell, _ in results))
    gains_rng = np.random.default_rng(seed)
    described = {
        name: ", ".join(f"+{g * 100:.0f} -> {mean_gain(g, effect, prior, gains_rng) * 100:+.1f}" for g in GAINS)
        for name, prior in PRIORS.items()
    }
    print(f"The loop's decision rule (Loop._judge, Loop._confirm): better at 95% and no task lost on the tasks to choose on; "
          f"better at {pct(confirm_level)} (0.05/{confirmations}) and no task lost on the sealed tasks.")
    print("A task lost: one the agent passes (in more than half its runs) that the change does not pass.")
    print(f"{changes} changes per cell; N tasks on each part; each task run R times by each arm.")
    print(f"Effect '{effect}'; nominal gain -> true mean gain in points: " + "; ".join(f"{k}: {v}" for k, v in described.items()))
    print()
    print("Kept by the loop's rule: false keeps (null changes) and power")
    print_rows(gain_table(results, cells, "kept"))
    print()
    print("Kept without the no-loss condition (better beyond chance on both parts, whatever tasks it lost): "
          "what that condition costs")
    print_rows(gain_table(results, cells, "both"))
    print()
    screen_nominal, confirm_nominal = SCREEN_LEVEL / 2, confirm_level / 2
    print(f"Each test alone on null changes against its nominal level (screen {pct(screen_nominal)}, "
          f"confirmation {pct(confirm_nominal)}, one-sided), and the screen alone at +10")
    head = ["prior", "N", "R", "newcombe screen", "confirm", "screen +10", "paired screen", "confirm", "screen +10"]
    rows = [head]
    for cell in cells:
        row = [cell.prior, str(cell.tasks), str(cell.runs)]
        for test in TESTS:
            null, plus10 = results[cell, 0.0][test], results[cell, GAINS[0]][test]
            row += [pct(null.screened), pct(null.confirmed), pct(plus10.screened)]
        rows.append(row)
    print_rows(rows)
    print()
    print_verdict(results, cells, screen_nominal, confirm_nominal, changes)


def gain_table(results: Results, cells: list[Cell], rate: str) -> list[list[str]]:
    """One row per cell: the given rate for a null change and each gain, for each test."""
    rows = [["prior", "N", "R", *(f"{test} {g}" for test in TESTS for g in ("null", "+10", "+20", "+30"))]]
    for cell in cells:
        row = [cell.prior, str(cell.tasks), str(cell.runs)]
        for test in TESTS:
            row += [pct(getattr(results[cell, g][test], rate)) for g in (0.0, *GAINS)]
        rows.append(row)
    return rows


def print_verdict(results: Results, cells: list[Cell], screen_nominal: float, confirm_nominal: float, changes: int) -> None:
    worst_screen = max(cells, key=lambda c: results[c, 0.0]["paired"].screened)
    worst_confirm = max(cells, key=lambda c: results[c, 0.0]["paired"].confirmed)
    worst_kept = max(cells, key=lambda c: results[c, 0.0]["paired"].kept)
    s, c = results[worst_screen, 0.0]["paired"].screened, results[worst_confirm, 0.0]["paired"].confirmed
    k = results[worst_kept, 0.0]["paired"].kept
    # A null change is kept only if its confirmation says better, so the rule keeps at most
    # what the confirmation alone does: the test holding its level is what bounds it.
    held = s <= screen_nominal and c <= confirm_nominal
    print(f"paired test at or under its nominal level in every cell: {'yes' if held else 'NO'} "
          f"(highest screen rate {pct(s)} at {label(worst_screen)}; highest confirmation rate {pct(c)} at "
          f"{label(worst_confirm)}; highest false keeps by the loop's rule {pct(k)} at {label(worst_kept)}; "
          f"simulation error at the nominal rates +/-{pct(two_se(screen_nominal, changes))} "
          f"and +/-{pct(two_se(confirm_nominal, changes))}, 2 SE)")
    twice: dict[str, bool] = {}
    for prior in PRIORS:
        plus10 = results[Cell(prior, 40, 4), GAINS[0]]
        for rate, what in (("kept", "the loop's rule keeps"), ("both", "without the no-loss condition, kept")):
            n, p = getattr(plus10["newcombe"], rate), getattr(plus10["paired"], rate)
            ratio = f"{p / n:.1f}x" if n > 0 else "newcombe kept none"
            print(f"+10 at 40 tasks x 4 runs, {prior}: {what} {pct(p)} with the paired test, {pct(n)} with newcombe "
                  f"({ratio}; +/-{pct(two_se(p, changes))} and +/-{pct(two_se(n, changes))}, 2 SE)")
        n, p = plus10["newcombe"].kept, plus10["paired"].kept
        twice[prior] = p > 0 and p >= 2 * n
    cell = Cell("Beta(0.5,0.5)", 40, 4)
    print(f"newcombe alone at 95%, 40 x 4, Beta(0.5,0.5): null {pct(results[cell, 0.0]['newcombe'].screened)}, "
          f"+10 {pct(results[cell, GAINS[0]]['newcombe'].screened)} (the issue: about 0.3% and 27%)")
    met = [prior for prior, yes in twice.items() if yes and held]
    verdict = "met" if len(met) == len(PRIORS) else f"met under {', '.join(met)} only" if met else "NOT met"
    print(f"issue 5's goal under the loop's rule: {verdict} (paired at or under its nominal level in every cell: "
          f"{'yes' if held else 'no'}; at least twice newcombe's keeps at +10 on 40 x 4: "
          + ", ".join(f"{prior} {'yes' if yes else 'no'}" for prior, yes in twice.items()) + ")")


def two_se(rate: float, changes: int) -> float:
    return 2 * float(np.sqrt(rate * (1 - rate) / changes))


def label(cell: Cell) -> str:
    return f"{cell.prior} {cell.tasks} x {cell.runs}"


def print_rows(rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.rjust(w) if i >= 3 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))).rstrip())


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1, not {text!r}")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2,000 changes per cell instead of 50,000")
    parser.add_argument("--changes", type=positive, help="changes simulated per cell and gain (default 50,000)")
    parser.add_argument("--confirmations", type=positive, default=4, help="the seal's confirmations k (level 0.05/k)")
    parser.add_argument("--effect", choices=EFFECTS, default="add", help="what a true change of +g points means")
    parser.add_argument("--seed", type=int, default=5, help="seed of the simulation")
    args = parser.parse_args(argv)
    changes = args.changes or (2_000 if args.quick else 50_000)
    results = run_all(changes, args.confirmations, args.effect, args.seed)
    print_tables(results, changes, args.confirmations, args.effect, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
