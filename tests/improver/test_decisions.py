"""improver.decide.decision: the pure decision, and bench/decisions.py deciding through it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from improver.base.errors import ImproverError
from improver.decide import stats
from improver.decide.decision import (
    CHOOSE,
    SCREEN_LEVEL,
    SEALED,
    Evidence,
    Outcome,
    Rule,
    clearly_worse,
    decide,
    judge_many,
    settle,
)
from improver.decide.stats import Tally

BENCH = Path(__file__).resolve().parents[2] / "bench" / "decisions.py"


def tallies(row, runs: int) -> dict[str, Tally]:
    return {f"task {i:02d}": Tally(int(passed), runs) for i, passed in enumerate(row)}


def test_levels_are_one_sided_screening_and_alpha_over_k_confirming() -> None:
    assert Rule.for_part(CHOOSE, "stratified", 4, 4).level == SCREEN_LEVEL
    sealed = Rule.for_part(SEALED, "stratified", 4, 4)
    assert sealed.level == 0.05 / 4 and sealed.contest_runs == 24
    assert Rule.for_part(SEALED, "stratified", 4, 8).contest_runs == 32
    # One-sided at 0.0125: the decision is the exact p-value at or under 0.0125 (not 0.00625).
    rng = np.random.default_rng(1)
    p = rng.beta(0.5, 0.5, size=(400, 30))
    change, current = rng.binomial(4, np.minimum(p + 0.12, 1)), rng.binomial(16, p)
    pvalues = stats.stratified_pvalues(change, 4, current, 16)
    judged = judge_many(sealed, change, 4, current, 16)
    assert judged.better.tolist() == (pvalues <= 0.0125).tolist()
    assert ((pvalues > 0.00625) & (pvalues <= 0.0125)).any()


@pytest.mark.parametrize("test", ["stratified", "newcombe", "paired"])
def test_decide_is_the_vectorised_core_for_one_change(test: str) -> None:
    rng = np.random.default_rng(2)
    rule = Rule.for_part(SEALED, test, 4, 4)
    p = rng.beta(0.5, 0.5, size=(60, 12))
    change, current = rng.binomial(4, np.minimum(p + 0.3, 1)), rng.binomial(16, p)
    fresh_runs = np.where(rng.random(p.shape) < 0.3, 8, 0)
    fresh = rng.binomial(fresh_runs, p)
    many = judge_many(rule, change, 4, current, 16, fresh, fresh_runs).outcome
    for row in range(len(p)):
        got = {
            f"task {i:02d}": Tally(int(fresh[row, i]), int(fresh_runs[row, i])) for i in range(12) if fresh_runs[row, i]
        }
        one = decide(rule, Evidence(tallies(change[row], 4), tallies(current[row], 16), got))
        assert one.outcome is many[row]
        assert one.comparison is not None and one.comparison.better == (many[row] is not Outcome.NOT_BETTER)
    assert {Outcome.KEPT, Outcome.NOT_BETTER} <= set(many)


def test_a_task_that_looks_lost_is_run_again_before_it_counts() -> None:
    rule = Rule.for_part(SEALED, "paired", 1, 4)
    change = {f"t{i:02d}": Tally(4, 4) for i in range(30)} | {"t00": Tally(1, 4)}
    current = {f"t{i:02d}": Tally(4, 16) for i in range(30)} | {"t00": Tally(15, 16)}
    said = decide(rule, Evidence(change, current))
    assert said.outcome is Outcome.MORE_RUNS and said.contested == ("t00",) and said.more == {"t00": 4}
    # Fresh runs that fail it again: lost beyond chance, named.
    lost = decide(rule, Evidence(change, current, {"t00": Tally(0, 4)}))
    assert lost.outcome is Outcome.LOSES_TASKS and lost.lost == ("t00",)
    # Fresh runs that pass it as the agent does: cleared, kept.
    assert decide(rule, Evidence(change, current, {"t00": Tally(4, 4)})).outcome is Outcome.KEPT
    # Undecided after one batch: another; after the most fresh runs allowed, cleared.
    assert decide(rule, Evidence(change, current, {"t00": Tally(3, 4)})).outcome is Outcome.MORE_RUNS
    assert decide(rule, Evidence(change, current, {"t00": Tally(12, 16)})).outcome is Outcome.MORE_RUNS
    assert decide(rule, Evidence(change, current, {"t00": Tally(18, 24)})).outcome is Outcome.KEPT


def test_at_two_runs_a_task_always_passed_that_falls_to_a_fifth_is_lost() -> None:
    # 80 tasks x 2 runs, a dozen contested by chance beside the broken one: 8 fresh runs
    # (the old cap) at 2 of 8 could not tell it lost at 0.05 / 13; 24 can, and 2 of 2
    # fresh passes no longer clear it.
    rule = Rule.for_part(SEALED, "stratified", 4, 2)
    change = {f"t{i:02d}": Tally(2, 2) for i in range(80)} | {f"t{i:02d}": Tally(1, 2) for i in range(13)}
    current = {f"t{i:02d}": Tally(7 if i < 13 else 3, 8) for i in range(80)} | {"t00": Tally(8, 8)}
    assert len(decide(rule, Evidence(change, current)).contested) == 13
    assert decide(rule, Evidence(change, current, {"t00": Tally(2, 2)})).outcome is Outcome.MORE_RUNS
    assert decide(rule, Evidence(change, current, {"t00": Tally(2, 8)})).outcome is Outcome.MORE_RUNS
    cleared = {f"t{i:02d}": Tally(4, 4) for i in range(1, 13)}  # the others' fresh runs pass as the agent does
    lost = decide(rule, Evidence(change, current, cleared | {"t00": Tally(5, 24)}))
    assert lost.outcome is Outcome.LOSES_TASKS and lost.lost == ("t00",)


def test_a_challenge_calls_a_shortcut_only_when_the_variants_gain_beyond_chance_less() -> None:
    rule = Rule.challenge(4)
    variants = {f"v{i}": Tally(3, 4) for i in range(8)}
    agent = {f"v{i}": Tally(2, 4) for i in range(8)}
    # A real gain: +25 points on the variants, +25 on the tasks run afresh. Not better
    # beyond chance on 8 variants alone, which the old rule called a shortcut.
    real = decide(rule, Evidence(variants, agent, varied=(Tally(24, 32), Tally(16, 32))))
    assert real.outcome is Outcome.GOES_ON and real.gap is not None and real.gap[0] < 0 < real.gap[1]
    # A shortcut: every run of the tasks passes, the variants no better than the agent.
    fits = decide(rule, Evidence(agent, agent, varied=(Tally(32, 32), Tally(8, 32))))
    assert fits.outcome is Outcome.NOT_BETTER and fits.gap is not None and fits.gap[1] < 0
    with pytest.raises(ImproverError, match="fresh runs of the tasks it varies"):
        decide(rule, Evidence(variants, agent))


def test_one_noisy_tally_against_another_is_not_a_lost_task() -> None:
    # The old rule: the agent passed it (3 of 4), the change did not (2 of 4): lost. Now the
    # fresh runs say 2 of 4 again, which is no evidence of worse: cleared after the cap.
    rule = Rule.for_part(CHOOSE, "paired", 4, 4)
    change = {f"t{i:02d}": Tally(4, 4) for i in range(30)} | {"t00": Tally(2, 4)}
    current = {f"t{i:02d}": Tally(6, 16) for i in range(30)} | {"t00": Tally(12, 16)}
    fresh = {"t00": Tally(12, 24)}
    said = decide(rule, Evidence(change, current, fresh))
    assert said.outcome is Outcome.GOES_ON and said.lost == () and said.contested == ("t00",)


def test_a_change_not_better_spends_no_runs_on_contests() -> None:
    rule = Rule.for_part(CHOOSE, "newcombe", 4, 4)
    change = {"a": Tally(0, 4), "b": Tally(2, 4)}
    current = {"a": Tally(16, 16), "b": Tally(8, 16)}
    said = decide(rule, Evidence(change, current))
    assert said.outcome is Outcome.NOT_BETTER and said.more == {}


def test_a_task_without_a_judged_run_leaves_the_change_not_judged() -> None:
    rule = Rule.for_part(SEALED, "paired", 4, 4)
    said = decide(rule, Evidence({"a": Tally(4, 4)}, {"a": Tally(4, 16), "b": Tally(1, 16)}), ("a", "b"))
    assert said.outcome is Outcome.NOT_JUDGED and said.thin == ("b",)


def test_settling_a_contest_whose_runs_never_came_clears_it() -> None:
    rule = Rule.for_part(SEALED, "paired", 1, 4)
    change = {f"t{i:02d}": Tally(4, 4) for i in range(30)} | {"t00": Tally(1, 4)}
    current = {f"t{i:02d}": Tally(4, 16) for i in range(30)} | {"t00": Tally(15, 16)}
    assert settle(decide(rule, Evidence(change, current))).outcome is Outcome.KEPT


def test_clearly_worse_drops_only_beyond_chance() -> None:
    parent = {f"t{i}": Tally(4, 4) for i in range(12)}
    assert clearly_worse({f"t{i}": Tally(0, 1) for i in range(12)}, parent).outcome is Outcome.DROPPED
    assert clearly_worse({f"t{i}": Tally(1, 1) for i in range(12)}, parent) is None


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_decisions", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def test_the_bench_steps_through_the_decision_as_the_loop_does(bench) -> None:
    """A broken task is contested, run again batch by batch, and refused, as decide says."""
    rng = np.random.default_rng(4)
    part = bench.broken(bench.world(rng, 300, 20, (0.5, 0.5), 0.3, 16), rng, 16)
    outcome, runs, _ = bench.judge_part(Rule.for_part(SEALED, "stratified", 4, 4), part, 16, rng)
    better = outcome != Outcome.NOT_BETTER  # a change not better is turned down without a contest
    assert better.mean() > 0.3 and (outcome[better] == Outcome.LOSES_TASKS).mean() > 0.9
    assert (runs[~better] == 20 * 4).all()
    assert (runs[better] > 20 * 4).mean() > 0.9  # the broken task was run again


@pytest.mark.slow
def test_the_bench_prints_a_json_line_a_figure() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--changes", "20", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    keys = {"tasks", "runs", "prior", "test", "effect", "scenario", "what", "rate", "n"}
    assert all(keys <= set(line) for line in lines)
    assert all("runs_per_change" in line for line in lines if line["what"] == "kept")
    no_better = [line for line in lines if line["what"] == "improver_kept" and line["scenario"] == "no-better"]
    assert {line["effect"] for line in no_better} == {30, 50, 80}
    assert {line["prior"] for line in lines} == {"beta(0.5,0.5)", "beta(1,1)", "mostly-easy", "mostly-hard"}
    assert {line["scenario"] for line in lines} >= {"uniform", "fixes-4", "breaks-one", "shortcut"}
    assert {line["what"] for line in lines} >= {"family_false_keep", "kept", "challenger_flagged"}
    sizes = {(line["tasks"], line["runs"]) for line in lines if line["what"] == "family_false_keep"}
    assert sizes == {(12, 4), (40, 4), (80, 2)}
    assert {line["test"] for line in lines if line.get("default")} == {"stratified"}
    assert {line.get("holdout_tasks") for line in lines} >= {40, 80, 400}
