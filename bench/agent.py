"""What the agent runtime adds to a model's own latency, and how many sessions it runs at once.

A session here is three model turns and two tool calls: the model (a loopback
OpenAI-compatible server, tests/fakeservers.py, in a process of its own so its threads
do not share this process's interpreter lock) answers each turn after a fixed delay,
asking for read_invoice, then pay, then answering; the tools are the real Python tools
of a small profile the bench writes into a temporary home. Sessions run through the
library: `agentd.runtime.run_case` against `agentd.app.live.LiveEpisode`, with the real
`openai:` provider and the profile's `Toolbox`, as asyncio tasks.

Printed, in one run:
1. the overhead per turn, one session at a time, beside the delay: what a session takes
   beyond turns x delay, divided by its turns; beside it the same for a bare HTTP
   request of one turn (httpx: what the loopback server and the network cost, which is
   not the runtime's) and for a model that only sleeps (the runtime and the tools with
   no provider). The runtime's own overhead is the first less the second. Then the
   provider alone: the first turn through `Model.complete`, this process's CPU a call
   beside the bare request's (the goal: within 1.5x);
2. sessions/s at 1, 8 and 64 sessions at once beside the ideal, concurrency / (turns x
   delay), with this process's CPU a session; the same at 64 for the model that only
   sleeps, and what the loopback server allows at 64 at once (bare HTTP requests, three
   a session), since it runs on the same CPUs as this process, beside the provider's own
   calls at 64 at once;
3. where this process's CPU goes, at 1 and at 64 at once (cProfile, split by package,
   built-ins and the standard library's helpers charged to whoever called them);
4. the recorded path, `agentd.app.live.run_session` one at a time (the transcript to
   agentd.db, agent.session/v1 on the ledger), split by step, on a fresh ledger and on
   one already holding many entries; and what a passphrase-sealed wallet would add.

Other processes on the machine lower every figure; compare the ratios, and rerun on a
quiet machine.

    python bench/agent.py            # under two minutes
    python bench/agent.py --quick    # fewer sessions and a smaller ledger, under a minute
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import pstats
import re
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from fakeservers import ModelServer, Received, Reply
from loopback import loopback_server
from timing import Stopwatch

import agentd.app.live
from agentd.app.ledger import open_ledger
from agentd.app.live import LiveEpisode, run_session
from agentd.home import Home
from agentd.profiles import Profile, load_profile
from agentd.providers import connections, make_model
from agentd.providers.chat import assistant, tool_call
from agentd.runtime import ASK_PERSON_SCHEMA, run_case, system_prompt
from agentd.sessions import SessionStore
from agentd.tools import Toolbox
from agentd.wallets import load_wallet, wallet_path
from improver.base.protocol import Completion, Model, TokenUsage
from ledger import Wallet, open_key_file, write_key_file
from ledger.log import Ledger

PROFILE = "bench"
TURNS = 3  # read_invoice, pay, the answer
INVOICES = 100
PREFILL_BATCH = 1000
# What the bench unsets: a key would be sent to the loopback server (and flagged in
# transcripts), a ledger URL would take the ledger out of the temporary home, and a
# wallet passphrase would make every session pay scrypt (measured on its own, in 4).
UNSET = ("OPENAI_API_KEY", "AGENTD_LEDGER_URL", "AGENTD_WALLET_PASSPHRASE")

PROFILE_TOML = '''\
operator = """
You pay our suppliers' invoices. Read the invoice first, then pay it.
"""
models = ["openai:bench"]
wallet = "bench"

[limits]
max_turns = 8
max_tokens = 20000

[[tools]]
name = "read_invoice"
description = "Reads an invoice from the book by its number."
changes = false
run = "tools:read_invoice"
[tools.parameters]
type = "object"
properties = { number = { type = "string" } }
required = ["number"]

[[tools]]
name = "pay"
description = "Pays an amount in USD to a payee, for an invoice."
changes = true
run = "tools:pay"
[tools.parameters]
type = "object"
properties = { to = { type = "string" }, amount = { type = "string" }, invoice = { type = "string" } }
required = ["to", "amount", "invoice"]
'''

TOOLS_PY = '''\
"""The bench profile's tools: a book of invoices to read, a file of payments to add to."""

import json
from pathlib import Path


def read_invoice(arguments, folder: Path) -> str:
    book = json.loads((folder / "book.json").read_text())
    return book[str(arguments["number"])]


def pay(arguments, folder: Path) -> str:
    line = json.dumps({k: str(arguments[k]) for k in ("to", "amount", "invoice")})
    with open(folder / "payments.jsonl", "a") as f:  # one short append: atomic under O_APPEND
        f.write(line + "\\n")
    return f"paid {arguments['amount']} USD to {arguments['to']}"
'''

TASK = re.compile(r"invoice (?P<number>\d+) from \w+, (?P<amount>\d+) USD, to (?P<to>\w+)\.")


def task_text(i: int) -> str:
    number = 100 + i % INVOICES
    return f"Pay invoice {number} from Acme, {number % 17 + 1} USD, to acme."


def answer(messages: list[dict[str, Any]]) -> tuple[str, list[tuple[str, dict[str, str]]]]:
    """The model's script, shared by the loopback server and the model that only sleeps:
    read the invoice, pay it, say so."""
    task = TASK.search(next(m["content"] for m in messages if m["role"] == "user"))
    assert task is not None, "a bench task names an invoice, an amount and a payee"
    done = sum(1 for m in messages if m["role"] == "tool")
    if done == 0:
        return "", [("read_invoice", {"number": task["number"]})]
    if done == 1:
        return "", [("pay", {"to": task["to"], "amount": task["amount"], "invoice": task["number"]})]
    return f"Paid {task['amount']} USD to {task['to']}.", []


# -- the loopback server, in a process of its own -------------------------------------


def serve(delay: float) -> None:
    with ModelServer("openai", delay=delay) as server:

        def respond(request: Received) -> Reply:
            text, calls = answer(request.body["messages"])
            return server.tool_calls(*calls, text=text)

        server.answer_with(respond)
        print(server.base_url, flush=True)
        sys.stdin.read()  # until the bench closes our stdin or kills us


# -- the home ------------------------------------------------------------------------


def make_home(root: Path) -> Home:
    """A home with the bench profile and its wallet (unsealed, as with no terminal)."""
    home = Home(root).ensure()
    folder = home.profiles_dir / PROFILE
    folder.mkdir()
    (folder / "profile.toml").write_text(PROFILE_TOML)
    (folder / "tools.py").write_text(TOOLS_PY)
    book = {str(100 + i): f"Invoice {100 + i} from Acme: toner, {(100 + i) % 17 + 1} USD." for i in range(INVOICES)}
    (folder / "book.json").write_text(json.dumps(book))
    write_key_file(wallet_path(home, PROFILE), Wallet.generate(PROFILE), None)
    return home


class Sleeps:
    """A model that answers from the script after the delay, with no network: what the
    runtime and the tools cost by themselves."""

    name = "sleeps"

    def __init__(self, delay: float) -> None:
        self.delay = delay

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        await asyncio.sleep(self.delay)
        text, calls = answer(messages)
        message = assistant(text or None, [tool_call(f"call_{i}", n, json.dumps(a)) for i, (n, a) in enumerate(calls)])
        return Completion(message, TokenUsage(11, 7), self.name)


# -- sessions through the library -----------------------------------------------------


@dataclass(frozen=True)
class Batch:
    count: int  # sessions, or bare requests
    concurrency: int
    wall: float
    cpu: float
    each: list[float]  # each session's own wall time

    @property
    def rate(self) -> float:
        return self.count / self.wall

    def overhead_per_turn(self, delay: float) -> float:
        return statistics.mean(self.each) / TURNS - delay


def run_sessions(profile: Profile, llm: Model, count: int, concurrency: int) -> Batch:
    """`count` sessions, `concurrency` at once, in one event loop; the first `concurrency`
    are a warm-up (connections, lazy imports) and are not timed."""
    toolbox = Toolbox(profile)

    async def all_of(n: int) -> list[float]:
        numbers = iter(range(n))
        each: list[float] = []

        async def worker() -> None:
            for i in numbers:
                started = time.perf_counter()
                episode = LiveEpisode(llm, toolbox, profile.limits)
                ending = await run_case(profile.case(task_text(i)), episode)
                if ending.ended != "done" or episode.budget.turns != TURNS:
                    raise SystemExit(
                        f"bench: a session ended {ending.ended} after {episode.budget.turns} turns: {ending.error}"
                    )
                each.append(time.perf_counter() - started)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return each

    return timed(all_of, count, concurrency)


def timed(all_of: Callable[[int], Awaitable[list[float]]], count: int, concurrency: int) -> Batch:
    """`count` calls of `all_of`'s kind, timed (wall and CPU) after a warm-up of one per
    worker, so every worker's connection is open before the clock starts."""

    async def measured() -> Batch:
        await all_of(concurrency)
        cpu, started = time.process_time(), time.perf_counter()
        each = await all_of(count)
        return Batch(count, concurrency, time.perf_counter() - started, time.process_time() - cpu, each)

    return asyncio.run(measured())


def first_turn(profile: Profile) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The messages and tools of a session's first model call."""
    messages = [
        {"role": "system", "content": system_prompt(profile.operator, "")},
        {"role": "user", "content": task_text(0)},
    ]
    return messages, [*(t.schema() for t in profile.tools), ASK_PERSON_SCHEMA]


def bare_http(base_url: str, profile: Profile, requests: int, concurrency: int) -> Batch:
    """The first turn's request, posted with httpx and its answer parsed: the floor under
    any client of this server. Each worker has a client of its own holding one
    connection, so no pool's bookkeeping is measured: only the request, the loopback
    and the server."""
    messages, tools = first_turn(profile)
    body = {"model": "bench", "messages": messages, "tools": tools}

    async def all_of(clients: list[httpx.AsyncClient], n: int) -> list[float]:
        left = iter(range(n))
        each: list[float] = []

        async def worker(client: httpx.AsyncClient) -> None:
            for _ in left:
                started = time.perf_counter()
                response = await client.post(f"{base_url}/chat/completions", json=body)
                response.raise_for_status()
                response.json()
                each.append(time.perf_counter() - started)

        await asyncio.gather(*(worker(client) for client in clients))
        return each

    async def measured() -> Batch:
        limits = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        clients = [httpx.AsyncClient(limits=limits, timeout=60) for _ in range(concurrency)]
        try:
            await all_of(clients, concurrency)
            cpu, started = time.process_time(), time.perf_counter()
            each = await all_of(clients, requests)
            return Batch(requests, concurrency, time.perf_counter() - started, time.process_time() - cpu, each)
        finally:
            await asyncio.gather(*(client.aclose() for client in clients))

    return asyncio.run(measured())


def provider_calls(llm: Model, profile: Profile, calls: int, concurrency: int) -> Batch:
    """The same first turn through the provider, `llm.complete`, `concurrency` at once:
    what bare_http does, plus the provider's own work (the request in its wire format,
    the shared client's pool, the answer checked and turned into a Completion)."""
    messages, tools = first_turn(profile)

    async def all_of(n: int) -> list[float]:
        left = iter(range(n))
        each: list[float] = []

        async def worker() -> None:
            for _ in left:
                started = time.perf_counter()
                await llm.complete(messages, tools, None)
                each.append(time.perf_counter() - started)

        await asyncio.gather(*(worker() for _ in range(concurrency)))
        return each

    return timed(all_of, calls, concurrency)


def cpu_beside(what: str, provider: Batch, bare: Batch) -> None:
    ratio = (provider.cpu / provider.count) / (bare.cpu / bare.count)
    print(
        f"   {what}: this process's CPU {provider.cpu * 1e3 / provider.count:.2f} ms a call against "
        f"{bare.cpu * 1e3 / bare.count:.2f} ms for the bare httpx request: {ratio:.2f}x "
        f"({'within' if ratio <= 1.5 else 'beyond'} the 1.5x goal)"
    )


# -- 1 and 2 -------------------------------------------------------------------------


def overhead(profile: Profile, llm: Model, base_url: str, delay: float, sessions: int) -> Batch:
    ms = delay * 1e3
    print(
        f"1. overhead per turn, one session at a time ({sessions} sessions a line): time a turn takes beyond the model's {ms:.0f} ms"
    )
    floor = bare_http(base_url, profile, sessions * TURNS, 1)
    alone = run_sessions(profile, Sleeps(delay), sessions, 1)
    full = run_sessions(profile, llm, sessions, 1)
    beyond = {
        "floor": (statistics.mean(floor.each) - delay) * 1e3,
        "alone": alone.overhead_per_turn(delay) * 1e3,
        "full": full.overhead_per_turn(delay) * 1e3,
    }
    rows = (
        ("full", "the runtime, the tools and the openai: provider", full.cpu / (full.count * TURNS)),
        ("floor", "a bare HTTP request of the same turn (httpx)", floor.cpu / floor.count),
        ("alone", "the runtime and the tools, a model that only sleeps", alone.cpu / (alone.count * TURNS)),
    )
    for key, what, cpu in rows:
        print(
            f"   {what:<52} +{beyond[key]:5.2f} ms ({beyond[key] / ms:5.1%} of {ms:.0f} ms); "
            f"this process's CPU {cpu * 1e3:.2f} ms a turn"
        )
    own = beyond["full"] - beyond["floor"]
    print(
        f"   the runtime's own overhead: {own:.2f} ms a turn ({own / ms:.1%} of the delay), what the bare request does not pay; "
        f"of it {beyond['alone']:.2f} ms the runtime and tools, {own - beyond['alone']:.2f} ms the openai: provider over bare httpx"
    )
    cpu_beside(
        "the openai: provider alone, the same turn, one call at a time",
        provider_calls(llm, profile, sessions * TURNS, 1),
        floor,
    )
    return full


def throughput(profile: Profile, llm: Model, base_url: str, delay: float, counts: dict[int, int]) -> dict[int, Batch]:
    print(f"2. sessions/s against the ideal, concurrency / ({TURNS} turns x {delay * 1e3:.0f} ms)")
    batches: dict[int, Batch] = {}
    for concurrency, count in counts.items():
        batch = batches[concurrency] = run_sessions(profile, llm, count, concurrency)
        ideal = concurrency / (TURNS * delay)
        print(
            f"   {concurrency:>2} at once, {count:>5} sessions: {batch.rate:7.1f} sessions/s = {batch.rate / ideal:5.1%} of the ideal "
            f"{ideal:6.1f}; CPU {batch.cpu * 1e3 / count:5.2f} ms a session, {batch.cpu / batch.wall:4.0%} of the wall time"
        )
    top = max(counts)
    sleeps = run_sessions(profile, Sleeps(delay), counts[top], top)
    ideal = top / (TURNS * delay)
    print(
        f"   {top} at once, a model that only sleeps: {sleeps.rate:7.1f} sessions/s = {sleeps.rate / ideal:5.1%} of the ideal; "
        f"CPU {sleeps.cpu * 1e3 / counts[top]:.2f} ms a session"
    )
    http = bare_http(base_url, profile, counts[top] * TURNS, top)
    print(
        f"   {top} at once, bare HTTP requests: {http.rate:7.0f} requests/s = {http.rate / TURNS:6.1f} sessions/s "
        f"({http.rate / TURNS / ideal:.1%} of the ideal): what the server, on the same {os.cpu_count()} CPUs, allows"
    )
    calls = provider_calls(llm, profile, counts[top] * TURNS, top)
    print(
        f"   {top} at once, the openai: provider's calls alone: {calls.rate:7.0f} requests/s = {calls.rate / http.rate:.0%} of the bare requests'"
    )
    cpu_beside(f"the openai: provider alone, {top} calls at once", calls, http)
    return batches


# -- 3 -------------------------------------------------------------------------------

# Where a file's time is charged, first match wins. Built-ins and the helpers of the
# standard library (typing, abc, functools, ...) match none: their time is charged to
# whoever called them, so "agentd" includes the typing calls it makes.
PACKAGES = (
    ("/httpx", "HTTP client: httpx, httpcore, h11, anyio"),
    ("/httpcore", "HTTP client: httpx, httpcore, h11, anyio"),
    ("/h11/", "HTTP client: httpx, httpcore, h11, anyio"),
    ("/anyio/", "HTTP client: httpx, httpcore, h11, anyio"),
    ("/sniffio/", "HTTP client: httpx, httpcore, h11, anyio"),
    ("/agentd/", "agentd: runtime, episode, tools, provider"),
    ("/improver/", "agentd: runtime, episode, tools, provider"),
    ("/asyncio/", "event loop, sockets, threads"),
    ("selectors.py", "event loop, sockets, threads"),
    ("socket.py", "event loop, sockets, threads"),
    ("ssl.py", "event loop, sockets, threads"),
    ("threading.py", "event loop, sockets, threads"),
    ("/concurrent/", "event loop, sockets, threads"),
    ("/json/", "json"),
    ("/bench/", "the bench's own loop"),
)
IDLE = "idle"
Where = tuple[str, int, str]


def profile_shares(profile: Profile, llm: Model, concurrency: int, count: int) -> dict[str, float]:
    """Share of this thread's busy time by package, from cProfile over `count` sessions."""
    profiler = cProfile.Profile()
    profiler.enable()
    run_sessions(profile, llm, count, concurrency)
    profiler.disable()
    raw: dict[Where, tuple] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    charged: dict[Where, dict[str, float]] = {}

    def owners(where: Where, seen: frozenset[Where]) -> dict[str, float]:
        """Which packages `where`'s own time belongs to, as shares adding up to 1."""
        if where in charged:
            return charged[where]
        filename, _, name = where
        if filename == "~" and "poll" in name and ("epoll" in name or "select" in name):
            return {IDLE: 1.0}  # waiting for the network
        label = next((label for part, label in PACKAGES if part in filename), None)
        if label is not None:
            return {label: 1.0}
        callers = raw[where][4] if where in raw else {}
        total = sum(timing[2] for timing in callers.values())
        if where in seen or not total:
            return {"other": 1.0}
        shares: dict[str, float] = {}
        for caller, timing in callers.items():
            for owner, share in owners(caller, seen | {where}).items():
                shares[owner] = shares.get(owner, 0.0) + share * timing[2] / total
        charged[where] = shares
        return shares

    by_package: dict[str, float] = {}
    for where, stats in raw.items():
        for owner, share in owners(where, frozenset()).items():
            by_package[owner] = by_package.get(owner, 0.0) + share * stats[2]
    by_package.pop(IDLE, None)
    busy = sum(by_package.values())
    return {label: seconds / busy for label, seconds in by_package.items()}


def where_cpu_goes(profile: Profile, llm: Model, batches: dict[int, Batch], least: int) -> None:
    """Profiles the openai: sessions at the lowest and highest concurrency: two sessions
    a worker, and at least `least` sessions."""
    ends = (min(batches), max(batches))
    counts = {c: max(least, 2 * c) for c in ends}
    print(
        f"3. where this process's CPU goes with the openai: provider (cProfile of {' and '.join(map(str, counts.values()))} "
        f"sessions; it slows them, so its shares are scaled to the CPU a turn measured without it in 2)"
    )
    per_turn = {c: batches[c].cpu / (batches[c].count * TURNS) for c in ends}
    shares = {c: profile_shares(profile, llm, c, counts[c]) for c in ends}
    labels = sorted(
        {label for s in shares.values() for label in s}, key=lambda label: -shares[ends[-1]].get(label, 0.0)
    )
    head = "".join(f"{f'{c} at once':>22}" for c in ends)
    print(f"   {'':<44}{head}")
    for label in labels:
        cells = "".join(
            f"{shares[c].get(label, 0.0):8.1%} {shares[c].get(label, 0.0) * per_turn[c] * 1e3:5.2f} ms/turn"
            for c in ends
        )
        print(f"   {label:<44}{cells}")
    total = "".join(f"{'100.0%':>8} {per_turn[c] * 1e3:5.2f} ms/turn" for c in ends)
    print(f"   {'all of it':<44}{total}")
    print(
        "   (cProfile sees this thread only; the CPU of the tools' worker threads, small beside the rest, is in the "
        "total, so scaling spreads it over the rows)"
    )


# -- 4 -------------------------------------------------------------------------------

STEPS = (  # what run_session calls, each wrapped where agentd.app.live looks it up
    ("load_profile", "load the profile"),
    ("make_model", "make the model"),
    ("toolbox", "resolve the tools"),
    ("load_wallet", "open the wallet"),
    ("open_ledger", "open the ledger"),
    ("session", "the session itself"),
    ("protect", "look for secrets"),
    ("keep", "keep it"),
)
INNER = (  # (label, the step it is part of, what it is)
    ("client", "session", "take a connection"),
    ("check", "open_ledger", "the ledger's start-up check"),
    ("open db", "keep", "open agentd.db"),
    ("write db", "keep", "write the transcript"),
    ("append", "keep", "append agent.session/v1"),
    ("catch up", "append", "fold the entries this ledger object has not yet"),
)


def recorded(home: Home, sessions: int, library_each: float, prefill: int) -> None:
    print(f"4. the recorded path, agentd.app.live.run_session one at a time ({sessions} sessions a line)")
    with Stopwatch() as watch:
        for name in ("load_profile", "make_model", "load_wallet", "open_ledger", "protect", "keep"):
            watch.wrap(agentd.app.live, name, name)
        watch.wrap(agentd.app.live, "run_case", "session")
        watch.wrap(Toolbox, "__init__", "toolbox")
        watch.wrap(connections.Pool, "take", "client")
        watch.wrap(Ledger, "check", "check")
        watch.wrap(SessionStore, "__init__", "open db")
        for step in ("begin", "finish"):  # the pending row, then its claim (see agentd/app/sessions.py)
            watch.wrap(SessionStore, step, "write db")
        watch.wrap(Ledger, "append", "append")
        watch.wrap(Ledger, "_catch_up", "catch up")
        run_session(home, PROFILE, task_text(0))  # warm-up: imports, the ledger's genesis
        for fill in (0, prefill):
            fill_ledger(home, fill)
            watch.spent.clear()
            watch.within.clear()
            started = time.perf_counter()
            for i in range(sessions):
                record = run_session(home, PROFILE, task_text(i))
                if record.ended != "done" or record.claim_id is None:
                    raise SystemExit(f"bench: a recorded session ended {record.ended}: {record.error}")
            each = (time.perf_counter() - started) / sessions
            print(
                f"   ledger at {record.pulse:,} entries: {each * 1e3:6.1f} ms a session, against {library_each * 1e3:.1f} ms "
                f"for the library's session: recording adds {(each - library_each) * 1e3:.1f} ms"
            )
            ms = {label: watch.seconds(label) * 1e3 / sessions for label, _ in STEPS}
            print("     ms a session: " + "; ".join(f"{text} {ms[label]:.1f}" for label, text in STEPS))
            inner = {(label, outer): watch.seconds(label, outer) * 1e3 / sessions for label, outer, _ in INNER}
            print("     of which: " + "; ".join(f"{text} {inner[label, outer]:.1f}" for label, outer, text in INNER))
    print(
        f"   a wallet sealed with a passphrase would add {sealed_wallet_ms():.0f} ms to each session (scrypt, to open it)"
    )


def fill_ledger(home: Home, entries: int) -> None:
    """Adds `entries` agent.session/v1 entries, as if that many sessions had been recorded."""
    if not entries:
        return
    signer = load_wallet(home, PROFILE)
    ledger = open_ledger(home)
    for start in range(0, entries, PREFILL_BATCH):
        n = min(PREFILL_BATCH, entries - start)
        ledger.append_many([(signer, "agent.session/v1", _session_body()) for _ in range(n)])
    print(f"   (added {entries:,} agent.session/v1 entries to the ledger)", file=sys.stderr)


def _session_body() -> dict[str, Any]:
    return {
        "session": secrets.token_hex(16),
        "profile": PROFILE,
        "digest": secrets.token_hex(32),
        "ended": "done",
        "check": None,
    }


def sealed_wallet_ms() -> float:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "sealed.json"
        write_key_file(path, Wallet.generate("sealed"), "a passphrase")
        times = []
        for _ in range(3):
            started = time.perf_counter()
            open_key_file(path, "a passphrase")
            times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e3


# -- main ----------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Fewer sessions, for a look.")
    parser.add_argument(
        "--delay", type=float, default=0.05, help="Seconds the model server waits before each answer (default 0.05)."
    )
    parser.add_argument("--serve", type=float, help=argparse.SUPPRESS)  # the loopback server's own process
    args = parser.parse_args()
    if args.serve is not None:
        return serve(args.serve)
    if args.delay <= 0:
        parser.error("--delay must be above 0 seconds")
    quick, delay = args.quick, args.delay
    for name in UNSET:
        os.environ.pop(name, None)
    sys.stdout.reconfigure(line_buffering=True)  # type: ignore[union-attr]  # in step with the progress on stderr
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.2f}; a session: {TURNS} model turns "
        f"(answered after {delay * 1e3:.0f} ms by a loopback server in its own process) and 2 tool calls"
    )
    with tempfile.TemporaryDirectory() as tmp, loopback_server(__file__, delay) as base_url:
        os.environ["OPENAI_BASE_URL"] = base_url
        home = make_home(Path(tmp) / "home")
        profile = load_profile(home, PROFILE)
        llm = make_model(profile.models[0], home)
        one = overhead(profile, llm, base_url, delay, 10 if quick else 40)
        counts = {1: 10, 8: 64, 64: 256} if quick else {1: 40, 8: 320, 64: 1280}
        batches = throughput(profile, llm, base_url, delay, counts)
        where_cpu_goes(profile, llm, batches, 10 if quick else 30)
        recorded(home, 10 if quick else 40, statistics.mean(one.each), 5_000 if quick else 20_000)


if __name__ == "__main__":
    main()
