"""How often the meta-loop keeps an improver no better than the one it has, by simulation
through its own decision path.

Every simulated comparison goes through improver.meta.replications' `judged`, what the
meta-loop's judge (improver.meta.judging) calls: the replications' tallies cut into one
column a problem, the decision's rule for the part, improver.decide.decision's `decide`
with fresh replications of the change's loop on a contested problem. Only the grading
loop is simulated.

The world: each problem has TASKS held tasks, each with its own pass probability for the
agent as it was, drawn from beta(0.5,0.5) (most tasks nearly always or nearly never
passed); the agent as it was is measured once a problem, on BASELINE_FACTOR x RUNS runs
of each. A replication of an improver's grading loop keeps a lesson with the improver's
keep probability; a kept lesson lifts every held task's probability by LIFT (at most to
1), and the agent it leaves is run RUNS times on each; a loop that kept nothing leaves
the agent as it was (and its runs: improver.meta.grading does the same). Both improvers
of a comparison get REPLICATIONS fresh replications of each problem, as the meta-loop
gives them.

- `no-better` (effect = the keep probability, 30, 50, 80): both improvers keep alike.
  `rate` is the share of comparisons kept end to end: screened on PROBLEMS problems, and
  when it goes on, confirmed on HELD_OUT held-out problems at 0.05/CONFIRMATIONS;
  `family` is the worst case for one set of held-out problems, every one of its
  CONFIRMATIONS confirmations spent on a no-better change (as if each had passed
  screening): the share of sets that keep any. Goal: both at most 0.05.
- `better` (effect 80): the change keeps its lesson 80% of the time, the improver as it
  is 30%; `rate` is the share kept, with 1 and with 3 held-out problems.

    python bench/improvers.py --quick   # 200 comparisons a figure, one JSON line each
    python bench/improvers.py           # 1,000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]  # the project's `ledger` before this folder's ledger.py

import numpy as np
from numpy.typing import NDArray

from improver.decide.decision import BASELINE_FACTOR, CHOOSE, SEALED, Outcome
from improver.decide.levels import DEFAULT_TEST
from improver.decide.stats import Tally
from improver.meta.replications import REPLICATIONS, judged, part_rule

PRIOR = "beta(0.5,0.5)"
TASKS = 16  # held tasks a problem
RUNS = 4  # runs of each held task a replication
PROBLEMS = 2  # problems to choose on
HELD_OUT = 1  # held-out problems
CONFIRMATIONS = 4
LIFT = 0.2  # what a kept lesson adds to every held task's pass probability
GOAL = 0.05
KEEPS = (0.3, 0.5, 0.8)
BETTER = (0.8, 0.3)  # the better change's keep probability, and the improver's as it is

Afters = list[dict[str, Tally]]  # one problem: per replication, the held tasks' tallies


@dataclass(frozen=True)
class World:
    """One problem: its held tasks' probabilities and the agent's runs before any change."""

    agent: NDArray[np.float64]
    before: dict[str, Tally]

    @classmethod
    def draw(cls, rng: np.random.Generator) -> World:
        agent = rng.beta(0.5, 0.5, size=TASKS)
        runs = BASELINE_FACTOR * RUNS
        return cls(agent, tallies(rng.binomial(runs, agent), runs))

    def replications(self, keep: float, count: int, rng: np.random.Generator) -> Afters:
        """`count` replications of a grading loop that keeps its lesson with chance `keep`."""
        out = []
        for kept in rng.random(count) < keep:
            out.append(tallies(rng.binomial(RUNS, np.minimum(self.agent + LIFT, 1.0)), RUNS) if kept else self.before)
        return out


def tallies(passed: NDArray[np.int64], runs: int) -> dict[str, Tally]:
    return {f"t{i}": Tally(int(p), runs) for i, p in enumerate(passed)}


async def part(
    name: str, worlds: Sequence[World], keeps: tuple[float, float], rng: np.random.Generator, replications: int
) -> tuple[Outcome, int]:
    """One part of one comparison, judged as the meta-loop judges it; and the grading loops it took."""
    names = [f"p{i}" for i in range(len(worlds))]
    change = [w.replications(keeps[0], replications, rng) for w in worlds]
    current = [w.replications(keeps[1], replications, rng) for w in worlds]
    loops = [2 * replications * len(worlds)]

    async def more(problem: str, count: int) -> Sequence[Mapping[str, Tally]]:
        loops[0] += count
        return worlds[names.index(problem)].replications(keeps[0], count, rng)

    rule = part_rule(name, DEFAULT_TEST, CONFIRMATIONS, replications)
    said = await judged(rule, names, change, current, more)
    return said.outcome, loops[0]


async def comparisons(
    keeps: tuple[float, float], n: int, rng: np.random.Generator, held_out: int, replications: int
) -> tuple[float, float]:
    """The share of `n` comparisons kept end to end, and the grading loops each took on average."""
    kept, loops = 0, 0
    for _ in range(n):
        screened, cost = await part(CHOOSE, [World.draw(rng) for _ in range(PROBLEMS)], keeps, rng, replications)
        loops += cost
        if screened is Outcome.GOES_ON:
            confirmed, cost = await part(SEALED, [World.draw(rng) for _ in range(held_out)], keeps, rng, replications)
            kept += confirmed is Outcome.KEPT
            loops += cost
    return kept / n, loops / n


async def family(keep: float, n: int, rng: np.random.Generator, replications: int) -> float:
    """The share of `n` sets of held-out problems whose every confirmation, each spent on a
    no-better change, keeps any: the worst case the Bonferroni level bounds."""
    sets_keeping = 0
    for _ in range(n):
        worlds = [World.draw(rng) for _ in range(HELD_OUT)]
        outcomes = [(await part(SEALED, worlds, (keep, keep), rng, replications))[0] for _ in range(CONFIRMATIONS)]
        sets_keeping += Outcome.KEPT in outcomes
    return sets_keeping / n


def figure(scenario: str, keeps: tuple[float, float], rate: float, n: int, held_out: int, replications: int) -> dict:
    return {
        "what": "improver_kept",
        "tasks": TASKS,
        "runs": RUNS,
        "prior": PRIOR,
        "test": DEFAULT_TEST,
        "scenario": scenario,
        "effect": round(100 * keeps[0]),  # the change's keep probability, in percent
        "rate": round(rate, 5),
        "n": n,
        "current_keeps": round(100 * keeps[1]),  # the improver's as it is
        "lift": round(100 * LIFT),
        "replications": replications,
        "problems": PROBLEMS,
        "held_out": held_out,
        "confirmations": CONFIRMATIONS,
    }


def improver_kept(keep_probability: float, changes: int, seed: int, replications: int = REPLICATIONS) -> dict:
    """`changes` comparisons of a no-better improver with the one as it is, both keeping
    their lesson with chance `keep_probability`: the share kept, and the worst case for a
    set of held-out problems (`family`). Goal: both at most 0.05."""
    rng = np.random.default_rng([seed, round(1000 * keep_probability), replications])
    keeps = (keep_probability, keep_probability)
    rate, loops = asyncio.run(comparisons(keeps, changes, rng, HELD_OUT, replications))
    worst = asyncio.run(family(keep_probability, changes, rng, replications))
    line = figure("no-better", keeps, rate, changes, HELD_OUT, replications)
    met = rate <= GOAL and worst <= GOAL
    return {**line, "family": round(worst, 5), "loops_per_change": round(loops, 1), "goal": f"<= {GOAL}", "met": met}


def better_kept(changes: int, seed: int, held_out: int, replications: int = REPLICATIONS) -> dict:
    """`changes` comparisons of an improver that keeps its lesson 80% of the time with one
    that keeps it 30%: the share kept."""
    rng = np.random.default_rng([seed, 1, held_out, replications])
    rate, loops = asyncio.run(comparisons(BETTER, changes, rng, held_out, replications))
    return {**figure("better", BETTER, rate, changes, held_out, replications), "loops_per_change": round(loops, 1)}


def better_figures(changes: int, seed: int) -> list[dict]:
    """The better improver kept, with one held-out problem and with three."""
    return [better_kept(changes, seed, held_out) for held_out in (1, 3)]


def positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number of at least 1, not {text!r}")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="200 comparisons a figure instead of 1,000")
    parser.add_argument("--changes", type=positive, help="comparisons simulated a figure")
    parser.add_argument("--replications", type=positive, default=REPLICATIONS, help="of each problem's loop")
    parser.add_argument("--seed", type=int, default=18, help="seed of the simulation")
    args = parser.parse_args(argv)
    changes = args.changes or (200 if args.quick else 1_000)
    started = time.monotonic()
    for keep in KEEPS:
        print(json.dumps(improver_kept(keep, changes, args.seed, args.replications)), flush=True)
    for held_out in (1, 3):
        print(json.dumps(better_kept(changes, args.seed, held_out, args.replications)), flush=True)
    print(f"{time.monotonic() - started:.0f}s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
