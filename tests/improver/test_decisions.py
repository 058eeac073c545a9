"""bench/decisions.py decides as the library does, and prints its table."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from improver.stats import Tally, compare_newcombe, compare_paired

BENCH = Path(__file__).resolve().parents[2] / "bench" / "decisions.py"


@pytest.fixture(scope="module")
def decisions():
    spec = importlib.util.spec_from_file_location("bench_decisions", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


@pytest.mark.parametrize("runs", [1, 2, 4])
def test_the_bench_decides_each_row_as_the_library_does(decisions, runs: int) -> None:
    rng = np.random.default_rng(runs)
    p = rng.beta(0.5, 0.5, size=(300, 12))
    current = rng.binomial(runs, p)
    change = rng.binomial(runs, np.minimum(p + 0.3, 1))
    for test, compare in (("newcombe", compare_newcombe), ("paired", compare_paired)):
        for level in (0.05, 0.0125):
            fast = decisions.better(test, change, current, runs, level)
            slow = [
                compare(
                    {str(i): Tally(int(a), runs) for i, a in enumerate(row_change)},
                    {str(i): Tally(int(b), runs) for i, b in enumerate(row_current)},
                    level,
                ).better
                for row_change, row_current in zip(change, current)
            ]
            assert fast.tolist() == slow
            assert any(slow) and not all(slow)


def test_a_logit_change_raises_the_mean_by_the_gain_asked(decisions) -> None:
    rng = np.random.default_rng(0)
    for prior in ((0.5, 0.5), (1.0, 1.0)):
        assert decisions.mean_gain(0.2, "logit", prior, rng) == pytest.approx(0.2, abs=0.002)
        assert decisions.mean_gain(0.2, "add", prior, rng) < 0.2


@pytest.mark.slow
def test_the_bench_prints_both_tests_side_by_side() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH), "--changes", "200"], capture_output=True, text=True, timeout=300, check=True
    )
    lines = done.stdout.splitlines()
    assert lines[0].startswith("The decision rule: better at 95% on the tasks to choose on, better at 1.25% (0.05/4)")
    header = next(line for line in lines if line.startswith("prior"))
    assert header.split()[:3] == ["prior", "N", "R"]
    assert "newcombe null" in header and "paired +30" in header
    rows = [line for line in lines if line.startswith(("Beta(0.5,0.5)", "Beta(1,1)"))]
    assert len(rows) == 3 * 18
    assert any(line.startswith("paired test at or under its nominal level in every cell:") for line in lines)
    assert "tasks x 4 runs done" in done.stderr
