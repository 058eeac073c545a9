"""How fast `agentd improve env --serve` runs episodes for a trainer over WebSocket.

A task of the invoices example (three model turns, two tool calls an episode), a policy
that answers each request at once. Three figures, each in episodes/s:
1. in-process: the harness running the agent runtime with a scripted model (the
   `script:` provider), one at a time and 64 at once: the rate with no policy outside;
2. in-process sessions: the server's own sessions (improver.episodes.openenv.Session) stepped
   directly, no network: what the episode machinery costs before any frame is sent;
3. over WebSocket: the real server (`python -m agentd improve env --serve`, a process of
   its own) and 1, 16 and 64 clients at once, each running episodes back to back
   (reset, three steps) with the `websockets` library. The server's CPU seconds per
   episode are printed beside: on this machine's cores, the server and the clients
   share the CPU, so the figure is bounded by both.
4. over HTTP: the server's CPU a request of each HTTP endpoint beside the same bytes
   served as a constant by the same server (bench/beside.py; goal: at most 3x). The
   fixed ones (/health, /metadata, /schema, /state) answer bytes made once; /reset and
   /step (stateless: the history replayed) run an episode to answer.

    python bench/env_server.py            # the full bench, about a minute
    python bench/env_server.py --quick    # fewer episodes, for a look
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import websockets
from starlette.applications import Starlette

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]

from beside import beside, cpu_seconds, with_constant
from episodes import example_task, trial

from agentd.app.agent import AGENT, model_factory
from agentd.home import Home
from improver.episodes.openenv import EnvServer, EnvSetup, Session, address, listen
from improver.tasks.task import TaskSet, load_tasks

HTTP_GOAL = 3.0  # an endpoint's server CPU at most this many times the constant's


def _call(call_id: str, name: str, arguments: dict[str, str]) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
        ],
    }


# The policy: the turns of the session the task came from, answered at once.
POLICY = [
    _call("p1", "read_invoice", {"number": "23"}),
    _call("p2", "pay", {"to": "acme-ltd", "amount": "7", "invoice": "23"}),
    {"role": "assistant", "content": "Paid 7 USD to acme-ltd."},
]


async def sessions_in_process(setup: EnvSetup, episodes: int) -> float:
    started = time.perf_counter()
    for _ in range(episodes):
        session = Session(setup, setup.taskset.tasks[0], "bench")
        result = await session.first()
        for message in POLICY:
            result = await session.step(message)
        if result["reward"] != 1.0:
            raise SystemExit(f"bench: an in-process session ended with {result}")
    return time.perf_counter() - started


async def over_websocket(url: str, clients: int, episodes: int) -> float:
    left = iter(range(episodes))

    async def client() -> None:
        async with websockets.connect(url) as ws:
            for _ in left:
                await ws.send(json.dumps({"type": "reset", "data": {"task_id": "work-1"}}))
                reply = json.loads(await ws.recv())
                for message in POLICY:
                    await ws.send(json.dumps({"type": "step", "data": {"message": message}}))
                    reply = json.loads(await ws.recv())
                if reply["type"] != "observation" or reply["data"]["reward"] != 1.0:
                    raise SystemExit(f"bench: an episode over WebSocket ended with {reply}")

    started = time.perf_counter()
    await asyncio.gather(*(client() for _ in range(clients)))
    return time.perf_counter() - started


def over_http(tasks_file: Path) -> None:
    """Each HTTP endpoint's server CPU a request beside its answer's bytes as a constant."""
    server = subprocess.Popen(
        [sys.executable, __file__, "--beside", str(tasks_file)], stderr=subprocess.PIPE, text=True
    )
    try:
        base = server.stderr.readline().strip() if server.stderr else ""
        if not base.startswith("http://"):
            raise SystemExit(f"bench: the server did not start: {base}")
        history = POLICY[:-1]
        step = {"action": {"task_id": "work-1", "history": history, "message": POLICY[-1]}}
        asked: dict[str, tuple[str, str, dict[str, Any]]] = {
            "GET /health": ("GET", "/health", {}),
            "GET /metadata": ("GET", "/metadata", {}),
            "GET /schema": ("GET", "/schema", {}),
            "GET /state": ("GET", "/state", {}),
            "POST /reset": ("POST", "/reset", {"json": {"task_id": "work-1"}}),
            f"POST /step (a history of {len(history)})": ("POST", "/step", {"json": step}),
        }
        with httpx.Client(base_url=base, timeout=120) as client:
            for name, (method, path, given) in asked.items():
                found = beside(client, server.pid, method, path, budget=0.5, **given)
                print(f"   {name}: {found.line(HTTP_GOAL)}", flush=True)
    finally:
        server.terminate()
        server.wait(timeout=30)


class Beside(EnvServer):
    """The server with the constant's route (bench/beside.py)."""

    def app(self) -> Starlette:
        return with_constant(super().app())


def serve_beside(tasks_file: Path) -> None:
    """The server a process of its own, its address the first line on stderr."""
    taskset = load_tasks(tasks_file)
    sock = listen("127.0.0.1", 0)
    print(address(sock), file=sys.stderr, flush=True)
    asyncio.run(Beside(EnvSetup(taskset, AGENT)).serve(sock))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Fewer episodes, for a look.")
    parser.add_argument("--beside", type=Path, help=argparse.SUPPRESS)  # TASKS: the HTTP figures' server
    args = parser.parse_args()
    if args.beside:
        return serve_beside(args.beside)
    quick = args.quick
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp) / "home")
        os.environ["AGENTD_HOME"] = str(home.root)
        task, variant = example_task(home)
        tasks_file = Path(tmp) / "work.json"
        taskset = TaskSet("invoices", variant.operator, (task,), (), True)
        taskset.save(tasks_file)

        n = 300 if quick else 2000
        print("1. in-process harness, scripted model (3 model turns, 2 tool calls an episode)")
        for concurrency in (1, 64):
            seconds, _ = trial(task, variant, AGENT, model_factory(home), n, concurrency)
            print(
                f"   {n} episodes, {concurrency:>2} at once: {n / seconds:8.0f} episodes/s ({seconds * 1e3 / n:.2f} ms each)"
            )

        seconds = asyncio.run(sessions_in_process(EnvSetup(taskset, AGENT), n))
        print("2. in-process server sessions, stepped directly (no network)")
        print(f"   {n} episodes, one at a time: {n / seconds:8.0f} episodes/s ({seconds * 1e3 / n:.2f} ms each)")

        argv = [sys.executable, "-m", "agentd", "improve", "env", "--serve", "--port", "0", "--tasks", str(tasks_file)]
        server = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
        try:
            line = server.stderr.readline() if server.stderr else ""
            if "http://" not in line:
                raise SystemExit(f"bench: the server did not start: {line}")
            url = line.rsplit(" ", 1)[1].strip().replace("http://", "ws://") + "/ws"
            print("3. over WebSocket to `agentd improve env --serve` (its own process), episodes back to back")
            asyncio.run(over_websocket(url, 4, 40))  # warm up
            for clients in (1, 16, 64):
                n = (200 if clients == 1 else 1000) // (4 if quick else 1)
                cpu = cpu_seconds(server.pid)
                seconds = asyncio.run(over_websocket(url, clients, n))
                cpu = cpu_seconds(server.pid) - cpu
                print(
                    f"   {n} episodes, {clients:>2} clients: {n / seconds:8.0f} episodes/s "
                    f"({seconds * 1e3 / n:.2f} ms each; the server's CPU {cpu * 1e3 / n:.2f} ms an episode)"
                )
        finally:
            server.terminate()
            server.wait(timeout=30)
        print("4. over HTTP: the server's CPU a request beside the same bytes as a constant")
        over_http(tasks_file)


if __name__ == "__main__":
    main()
