"""How fast the harness runs episodes, and how close it stays to the model's own latency.

Three figures:
1. In-process episodes/s: the agent runtime on a task of the invoices example, a
   scripted model (the `script:` provider, rules below) answering at once; three model
   turns and two tool calls an episode. Run one at a time, then 64 at once.
2. agentd's own candidate over the stdio protocol, `python3 -m agentd case --stdio`, a
   process each, as a code round runs it: from a tree of agentd's packages built with
   the code loop's BUILD in the sandbox (bench/candidate.py). Episodes/s in bubblewrap;
   then the candidate's CPU an episode beside `python3 -c pass` run the same way
   (goal: at most 2x), with --instructions also valgrind's count of both; and what a
   process taking several cases in turn would cost a case (bench/serialcase.py: the
   protocol has no such candidate; measured, to see what one would save).
3. 640 episodes, 64 at once, each one model turn answered after 50 ms, so the ideal
   wall time is 640 x 50 ms / 64 = 0.5 s (goal: within 10%): through the real `openai:`
   provider against a loopback OpenAI-compatible server (tests/fakeservers.py, run in a
   process of its own), beside 640 bare httpx requests to the same server, 64 at once
   (what the server, sharing this machine's CPUs, allows any client), and against a
   model that only waits 50 ms, which shows what the harness costs by itself. This
   process's CPU time is printed beside each: when it approaches the ideal wall time,
   the client, not the harness, is what is slow.

    python bench/episodes.py                  # the full bench, about a minute
    python bench/episodes.py --quick          # fewer episodes, for a look
    python bench/episodes.py --instructions   # and count instructions (valgrind; +30 s)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from candidate import built_tree, candidate, cases_in_turn, cpu_beside_floor, instructions_beside_floor
from fakeservers import ModelServer
from loopback import loopback_server

from agentd.app.agent import AGENT, model_factory
from agentd.app.examples import install_example
from agentd.home import Home
from agentd.profiles import load_profile
from improver.base.protocol import Completion, TokenUsage
from improver.base.variant import Variant
from improver.episodes.harness import Candidate, Command
from improver.episodes.trials import TrialResult, run_trials
from improver.tasks.harvest import Session, task_from
from improver.tasks.task import Task
from sandbox.choose import make_runner

TASK = "Pay invoice 23 from Acme, 7 USD, to acme-ltd."
DELAY = 0.05
STDIO_GOAL = 2.0  # a stdio episode's candidate at most this many times `python3 -c pass` by CPU
RULES = """
[[rule]]
turn = 1
[[rule.calls]]
name = "read_invoice"
arguments = { number = "23" }

[[rule]]
turn = 2
[[rule.calls]]
name = "pay"
arguments = { to = "acme-ltd", amount = "7", invoice = "23" }

[[rule]]
text = "Paid 7 USD to acme-ltd."
"""


def example_task(home: Home) -> tuple[Task, Variant]:
    """A task as harvest makes it from a session of the invoices example that went well."""
    install_example(home, "invoices")
    profile = load_profile(home, "invoices")
    transcript = [
        {"role": "system", "content": profile.operator},
        {"role": "user", "content": TASK},
        _call("c1", "read_invoice", '{"number":"23"}'),
        {"role": "tool", "tool_call_id": "c1", "content": "Invoice 23 from Acme: toner, 7 USD."},
        _call("c2", "pay", '{"to":"acme-ltd","amount":"7","invoice":"23"}'),
        {"role": "tool", "tool_call_id": "c2", "content": "paid 7 USD to acme-ltd"},
        {"role": "assistant", "content": "Paid 7 USD to acme-ltd."},
    ]
    tools = [t.info() for t in profile.tools]
    session = Session("bench", TASK, transcript, tools, "done", "Paid 7 USD to acme-ltd.", "good")
    (home.root / "bench.toml").write_text(RULES)
    variant = Variant(profile.operator, "", (f"script:{home.root / 'bench.toml'}",))
    return task_from(session, "work-1", "invoices"), variant


def _call(call_id: str, name: str, arguments: str) -> dict:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}],
    }


def trial(
    task: Task, variant: Variant, candidate: Candidate, factory, episodes: int, concurrency: int
) -> tuple[float, TrialResult]:
    started = time.perf_counter()
    result = asyncio.run(
        run_trials(variant, [task], candidate, factory, runs=episodes, concurrency=concurrency, retries=0)
    )
    seconds = time.perf_counter() - started
    if result.passed != episodes:
        raise SystemExit(
            f"bench: only {result.passed} of {episodes} episodes passed ({result.errors or result.per_task})"
        )
    return seconds, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Fewer episodes, for a look.")
    parser.add_argument("--instructions", action="store_true", help="Count the candidate's instructions too.")
    parser.add_argument("--serve", type=float, help=argparse.SUPPRESS)  # the loopback server's own process
    args = parser.parse_args()
    if args.serve is not None:
        return serve(args.serve)
    quick = args.quick
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp) / "home")
        os.environ["AGENTD_HOME"] = str(home.root)
        task, variant = example_task(home)
        scripted = model_factory(home)

        n = 500 if quick else 3000
        print("1. in-process, scripted model (3 model turns, 2 tool calls an episode)")
        for concurrency in (1, 64):
            seconds, _ = trial(task, variant, AGENT, scripted, n, concurrency)
            print(
                f"   {n} episodes, {concurrency:>2} at once: {n / seconds:8.0f} episodes/s ({seconds * 1e3 / n:.2f} ms each)"
            )

        print(
            "2. agentd's own candidate over stdio, a process each, from a built tree (python3 -m agentd case --stdio)"
        )
        stdio_figures(task, variant, scripted, Path(tmp), quick, args.instructions)

        print(f"3. 640 episodes, 64 at once, each one model turn answered after {DELAY * 1e3:.0f} ms")
        one_turn = _answered_in_one_turn(task)
        with loopback_server(__file__, DELAY) as base_url:
            os.environ["OPENAI_BASE_URL"] = base_url
            answers = Variant(variant.operator, "", ("openai:bench",))
            _latency_line(
                "a loopback OpenAI-compatible server, through the openai: provider",
                one_turn,
                answers,
                model_factory(home),
            )
            _bare_line(base_url, variant.operator)
        waits = Variant(variant.operator, "", ("waits",))
        _latency_line(
            "a model that only waits (asyncio.sleep), the harness alone", one_turn, waits, lambda spec: Waits()
        )


def stdio_figures(task: Task, variant: Variant, factory, folder: Path, quick: bool, instructions: bool) -> None:
    tree = built_tree(folder)
    n = 8 if quick else 32
    for concurrency in (1, os.cpu_count() or 1):
        seconds, _ = trial(task, variant, candidate(make_runner("bwrap"), tree), factory, n, concurrency)
        print(
            f"   in bwrap, {n} episodes, {concurrency:>2} at once: {n / seconds:8.1f} episodes/s ({seconds * 1e3 / n:.0f} ms each)"
        )

    def episode(command: Command) -> None:
        trial(task, variant, command, factory, 1, 1)

    program, floor = cpu_beside_floor(episode, tree, 10 if quick else 40)
    verdict = "meets" if program <= STDIO_GOAL * floor else "misses"
    print(
        f"   CPU an episode: {program * 1e3:.1f} ms beside {floor * 1e3:.1f} ms for python3 -c pass: "
        f"{program / floor:.2f}x (goal {STDIO_GOAL:g}x: {verdict}); load average {os.getloadavg()[0]:.2f}"
    )
    if instructions:
        program_ir, floor_ir = instructions_beside_floor(episode, tree)
        print(
            f"   instructions an episode: {program_ir / 1e6:.0f} M beside {floor_ir / 1e6:.0f} M for python3 -c pass: "
            f"{program_ir / floor_ir:.2f}x"
        )
    each = cases_in_turn(episode, tree, (1, 10, 100))
    print(
        "   one process taking cases in turn (not in the protocol), CPU a case: "
        + ", ".join(f"{count} cases {seconds * 1e3:.1f} ms" for count, seconds in each.items())
        + f"; load average {os.getloadavg()[0]:.2f}"
    )


def _latency_line(what: str, task: Task, variant: Variant, factory) -> None:
    episodes, concurrency = 640, 64
    ideal = episodes * DELAY / concurrency
    trial(task, variant, AGENT, factory, concurrency, concurrency)  # warm up: connections, imports
    cpu = time.process_time()
    seconds, result = trial(task, variant, AGENT, factory, episodes, concurrency)
    cpu = time.process_time() - cpu
    verdict = "within" if seconds <= ideal * 1.1 else "beyond"
    print(f"   {what}:")
    print(
        f"     wall {seconds:.3f} s against the ideal {ideal:.3f} s: {seconds / ideal:.2f}x ({verdict} 10%); "
        f"this process's CPU {cpu:.3f} s ({cpu * 1e3 / episodes:.2f} ms an episode); {result.usage.total} tokens counted"
    )


def _bare_line(base_url: str, operator: str) -> None:
    """The same 640 calls as bare httpx requests, 64 at once, each worker with a client
    of its own: the floor under any client of this server."""
    requests, concurrency = 640, 64
    ideal = requests * DELAY / concurrency
    body = {"model": "bench", "messages": [{"role": "system", "content": operator}, {"role": "user", "content": TASK}]}

    async def all_of(clients: list[httpx.AsyncClient], n: int) -> None:
        left = iter(range(n))

        async def worker(client: httpx.AsyncClient) -> None:
            for _ in left:
                response = await client.post(f"{base_url}/chat/completions", json=body)
                response.raise_for_status()
                response.json()

        await asyncio.gather(*(worker(client) for client in clients))

    async def measured() -> tuple[float, float]:
        clients = [httpx.AsyncClient(timeout=60) for _ in range(concurrency)]
        try:
            await all_of(clients, concurrency)  # warm up: connections
            cpu, started = time.process_time(), time.perf_counter()
            await all_of(clients, requests)
            return time.perf_counter() - started, time.process_time() - cpu
        finally:
            await asyncio.gather(*(client.aclose() for client in clients))

    seconds, cpu = asyncio.run(measured())
    print("   the same server, bare httpx requests (no harness, no provider):")
    print(
        f"     wall {seconds:.3f} s against the ideal {ideal:.3f} s: {seconds / ideal:.2f}x; "
        f"this process's CPU {cpu:.3f} s ({cpu * 1e3 / requests:.2f} ms a request)"
    )


class Waits:
    """A model that answers after DELAY, with no network: what the harness costs by itself."""

    name = "waits"

    async def complete(self, messages, tools, max_tokens) -> Completion:
        await asyncio.sleep(DELAY)
        return Completion({"role": "assistant", "content": "Paid."}, TokenUsage(10, 2), self.name)


def serve(delay: float) -> None:
    with ModelServer("openai", delay=delay) as server:
        server.answer_with(lambda request: server.text("Paid 7 USD to acme-ltd."))
        print(server.base_url, flush=True)
        sys.stdin.read()  # until the bench closes our stdin or kills us


def _answered_in_one_turn(task: Task) -> Task:
    """The same task with checks a one-turn answer passes: it finishes and changes nothing."""
    return replace(task, checks=[{"check": "finishes"}, {"check": "no_other_changes"}])


if __name__ == "__main__":
    main()
