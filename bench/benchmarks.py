"""Public benchmarks as tasks: how fast they import, what an episode on them costs beside
the invoices tasks, how far agentd's scores agree with the authors' own, and a real
local model on BFCL simple scored both ways.

1. Import: BFCL simple_python (400 tasks) made and validated, tasks/s, beside parsing the
   set's files alone (the floor); τ² retail (114 tasks), each run through its world once
   at import and twice more at validation, beside one world's start-up.
2. Episode overhead: a task's solution replayed through the harness (no model), one
   episode at a time, on an invoices task (recorded stand-ins), a BFCL simple task
   (calls answered `ok`) and a τ² retail task (a world from the pool, reset each run).
3. Agreement: every task of BFCL's five core sets, its solution and the wrong and
   right-but-different runs of improver.benchmarks.agreement, scored by agentd's checks
   and by BFCL's own AST checker; and τ² retail tasks through the harness and worlds,
   scored by τ²'s own evaluators (DB and COMMUNICATE, its default reward).
4. With agentd[local]: a packaged model (Qwen2.5-Coder-0.5B unless --model says),
   as the agent, on BFCL simple_python tasks; each run scored by agentd and by BFCL's
   own checker.

    python bench/benchmarks.py                # the whole bench, a few minutes
    python bench/benchmarks.py --quick        # fewer tasks
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "bench")]

from episodes import example_task

from agentd.app.agent import AGENT, model_factory
from agentd.home import Home
from improver.base.variant import Variant
from improver.benchmarks import agreement, bfcl, tau2
from improver.episodes.harness import run_task
from improver.episodes.validate import replay, validate
from improver.tasks import checks
from improver.tasks.task import Task, TaskSet
from improver.tasks.worlds import WorldPool

CORE = ("simple_python", "multiple", "parallel", "parallel_multiple", "irrelevance")


def no_model(spec: str):
    raise SystemExit(f"bench: a replay asked for model {spec}")


def rows_of(name: str) -> tuple[dict, dict]:
    folder = bfcl.data_dir()
    rows = {r["id"]: r for r in map(json.loads, (folder / f"BFCL_v4_{name}.json").read_text().splitlines())}
    if bfcl.SETS[name]:
        return rows, {}
    answers = (folder / "possible_answer" / f"BFCL_v4_{name}.json").read_text().splitlines()
    return rows, {r["id"]: r["ground_truth"] for r in map(json.loads, answers)}


def timed(work):
    started = time.perf_counter()
    value = work()
    return time.perf_counter() - started, value


def import_speed(retail: int) -> list[Task]:
    print("1. import")
    made, imported = timed(lambda: bfcl.import_set("simple_python", "bfcl"))
    parse, _ = timed(lambda: rows_of("simple_python"))
    n = len(imported.tasks)
    checked, done = timed(lambda: asyncio.run(validate(TaskSet("bfcl", "", tuple(imported.tasks)))))
    print(
        f"   BFCL simple_python: {n} tasks made in {made:.2f} s ({n / made:,.0f} tasks/s; parsing its files alone "
        f"{parse * 1e3:.0f} ms), validated in {checked:.2f} s ({n / checked:,.0f} tasks/s), "
        f"{len(done.newly_excluded)} excluded"
    )

    async def one_world() -> float:
        pool = WorldPool()
        started = time.perf_counter()
        world = await pool.take({"kind": "tau2", "domain": "retail"})
        await world.state()
        seconds = time.perf_counter() - started
        await pool.discard(world)
        return seconds

    start = asyncio.run(one_world())
    made, (found, _) = timed(lambda: asyncio.run(tau2.import_domain("retail", "tau2-retail", limit=retail)))
    m = len(found.tasks)
    checked, done = timed(lambda: asyncio.run(validate(TaskSet("tau2-retail", "", tuple(found.tasks)))))
    print(
        f"   τ² retail: {m} tasks made in {made:.1f} s ({m / made:.1f} tasks/s; one world starts in {start:.2f} s), "
        f"validated in {checked:.1f} s ({m / checked:.1f} tasks/s, {os.cpu_count()} worlds at most), "
        f"{len(done.newly_excluded)} excluded"
    )
    return found.tasks


def overhead(home: Home, retail: list[Task], episodes: int) -> None:
    print("2. episode overhead: a solution replayed through the harness, one episode at a time")
    invoices, _ = example_task(home)
    simple = bfcl.import_set("simple_python", "bfcl", limit=1).tasks[0]
    kept = next(t for t in retail if t.solution.calls)

    async def replays(task: Task, n: int) -> float:
        await run_task(task, Variant("", "", ()), replay(task.solution), no_model, retries=0)  # a world warmed
        started = time.perf_counter()
        for _ in range(n):
            result = await run_task(task, Variant("", "", ()), replay(task.solution), no_model, retries=0)
            assert result.passed, result.failures
        return (time.perf_counter() - started) / n

    for label, task, n in (
        ("invoices (stand-ins)", invoices, episodes),
        ("BFCL simple", simple, episodes),
        ("τ² retail (world)", kept, max(episodes // 50, 5)),
    ):
        each = asyncio.run(replays(task, n))
        print(f"   {label:<22} {len(task.solution.calls)} call(s): {each * 1e3:8.2f} ms an episode ({n} episodes)")
    n = max(episodes // 50, 5)
    print(
        f"   τ² itself, in this process (no sandbox): {tau2_raw(kept, n) * 1e3:.2f} ms for the same (fresh database, calls, hash)"
    )


def tau2_raw(task: Task, n: int) -> float:
    """What τ²'s own code takes for one episode's worth of the world's work, unsandboxed:
    the floor under a world's episode."""
    from loguru import logger
    from tau2.data_model.message import ToolCall
    from tau2.domains.retail.environment import get_environment

    logger.disable("tau2")
    pristine = get_environment().tools.db
    started = time.perf_counter()
    for _ in range(n):
        env = get_environment(db=pristine.model_copy(deep=True))
        for call in task.solution.calls:
            env.get_response(ToolCall(id="c", name=call.tool, arguments=call.arguments))
        env.get_db_hash()
    return (time.perf_counter() - started) / n


def bfcl_agreement() -> None:
    print("3. agreement with the authors' scorers")
    for name in CORE:
        rows, truths = rows_of(name)
        imported = bfcl.import_set(name, "bfcl")
        runs = agree = 0
        for task in imported.tasks:
            ident = task.source["id"]
            for variant in agreement.variants(task):
                ours = checks.score(task.checks, task.tools, variant.run).passed
                runs += 1
                agree += ours == agreement.bfcl_verdict(rows[ident], truths.get(ident), name, variant.run.calls)
        print(f"   BFCL {name:<18} {len(imported.tasks)} tasks, {runs:>5} runs: {agree / runs:7.2%} agree")


def tau2_agreement(tasks: list[Task]) -> None:
    rows = {r["id"]: r for r in json.loads((tau2.domain_dir("retail") / "tasks.json").read_text())}

    async def verdicts() -> tuple[int, int, list[str]]:
        runs = agree = 0
        differ = []
        for task in tasks:
            for variant in agreement.variants(task):
                result = await run_task(task, Variant("", "", ()), replay(variant.run), no_model, retries=0)
                theirs = agreement.tau2_verdict("retail", rows[task.source["id"]], variant.run)
                runs += 1
                agree += result.passed == theirs
                if result.passed != theirs:
                    differ.append(f"{task.name}: {variant.why} (agentd {result.passed}, τ² {theirs})")
        return runs, agree, differ

    runs, agree, differ = asyncio.run(verdicts())
    print(f"   τ² retail {len(tasks)} tasks, {runs} runs through worlds: {agree / runs:.2%} agree")
    for line in differ:
        print(f"     differs: {line}")


def local_model(home: Home, spec: str, count: int) -> None:
    if importlib.util.find_spec("xllamacpp") is None:
        print("4. local model: skipped (pip install 'agentd[local]')")
        return
    print(f"4. {spec} on the first {count} BFCL simple_python tasks (one run each)")
    rows, truths = rows_of("simple_python")
    tasks = bfcl.import_set("simple_python", "bfcl", limit=count).tasks
    models = model_factory(home)
    variant = Variant("You answer by calling the tool that does what is asked.", "", (spec,))

    async def runs() -> list:
        return [await run_task(t, variant, AGENT, models) for t in tasks]

    seconds, results = timed(lambda: asyncio.run(runs()))
    ours = sum(r.passed for r in results)
    errored = sum(r.outcome == "errored" for r in results)
    theirs = sum(
        agreement.bfcl_verdict(rows[t.source["id"]], truths[t.source["id"]], "simple_python", r.run.calls)
        for t, r in zip(tasks, results, strict=True)
        if r.outcome != "errored"
    )
    called = sum(bool(r.run.calls) for r in results)
    print(
        f"   agentd passes {ours} of {count}, BFCL's checker {theirs} of {count} ({errored} errored; "
        f"{called} made a call), {seconds / count:.1f} s a task"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Fewer tasks, for a look.")
    parser.add_argument("--local", type=int, default=20, help="BFCL simple tasks for the local model (0: none).")
    parser.add_argument("--model", default="local:qwen2.5-coder-0.5b", help="The local model (agentd local list).")
    args = parser.parse_args()
    print(f"load average before: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp) / "home")
        os.environ["AGENTD_HOME"] = str(home.root)
        retail = import_speed(20 if args.quick else 114)
        overhead(home, retail, 200 if args.quick else 1000)
        bfcl_agreement()
        tau2_agreement(retail[: 3 if args.quick else 12])
        if args.local:
            local_model(home, args.model, min(args.local, 5) if args.quick else args.local)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
