"""What `agentd demo` costs, step by step: the CPU of its own process in each step.

The demo runs here in-process (`agentd.app.demo.run_demo`, as `agentd demo` runs it, on
a fresh home in a temporary folder). Each step's library call is wrapped where the demo
looks it up, and charged the process's CPU (every thread) spent in it, less what the
steps inside it spent: the sessions recorded (the invoices agent's 12, the invoices-code
example's 12, the examiner's 6), harvest, the seals, the lesson loops (the invoices
agent's and the examined one's), the code loop, the release's third parties and the
examiner's round. Imports are measured first, apart: the demo's modules, and the
statistics (improver.decide.stats with numpy, which the first decision imports). Beside: the wall time, and the CPU of the children
this process reaped (the checks, git; a sandboxed run's CPU never reaches it, see
bench/bare.py). Load averages are printed before and after each run.

    python bench/demo.py             # 3 runs
    python bench/demo.py --runs 1
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

STEPS = {  # the name the demo calls, its label
    "record_sessions": "sessions recorded",
    "harvest_profile": "harvest",
    "seal_tasks": "seals",
    "run_improvement": "lesson loops",
    "run_code": "code loop",
    "third_parties": "third parties",
    "examined_round": "the examiner's round",
}


class Steps:
    """Each wrapped call's CPU, less that of the wrapped calls inside it."""

    def __init__(self) -> None:
        self.spent: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._inner: list[float] = []

    def wrap(self, owner: Any, name: str, label: str) -> None:
        call = getattr(owner, name)

        @functools.wraps(call)
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.process_time()
            self._inner.append(0.0)
            try:
                return call(*args, **kwargs)
            finally:
                spent = time.process_time() - started
                self.spent[label] += spent - self._inner.pop()
                self.calls[label] += 1
                if self._inner:
                    self._inner[-1] += spent

        setattr(owner, name, timed)


def _cpu(call: Callable[[], object]) -> float:
    started = time.process_time()
    call()
    return time.process_time() - started


def _children() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs, each a process of its own")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # one run, in this process
    args = parser.parse_args()
    if args.one:
        return one_run()
    for _ in range(args.runs):
        os.spawnv(os.P_WAIT, sys.executable, [sys.executable, __file__, "--one"])


def one_run() -> None:
    load = os.getloadavg()[0]
    imports = {
        "the statistics": _cpu(lambda: __import__("improver.decide.stats")),  # first: the demo's modules import it
        "agentd.app.demo": _cpu(lambda: __import__("agentd.app.demo")),
    }
    import agentd.app.demo as demo

    steps = Steps()
    for name, label in STEPS.items():
        steps.wrap(demo, name, label)
    with tempfile.TemporaryDirectory() as folder:
        children, wall, cpu = _children(), time.perf_counter(), time.process_time()
        ok = demo.run_demo(demo.Home(Path(folder) / "home"), lambda line: None, lambda line: None)
        cpu, wall, children = time.process_time() - cpu, time.perf_counter() - wall, _children() - children
    total = cpu + sum(imports.values())
    print(f"load average {load:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; the checks passed: {ok}")
    print(f"  {total:6.2f} s of this process's CPU ({wall:.1f} s wall; reaped children {children:.2f} s)")
    for name, spent in imports.items():
        print(f"  {spent:6.2f} s  {spent / total:4.0%}  importing {name}")
    for label, spent in sorted(steps.spent.items(), key=lambda item: -item[1]):
        print(f"  {spent:6.2f} s  {spent / total:4.0%}  {label} ({steps.calls[label]} calls)")
    rest = cpu - sum(steps.spent.values())
    print(f"  {rest:6.2f} s  {rest / total:4.0%}  the rest (lineage checks, ledger verify, installs, ...)")


if __name__ == "__main__":
    os.environ.pop("AGENTD_HOME", None)
    main()
