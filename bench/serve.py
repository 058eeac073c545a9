"""What the daemon's HTTP API serves a second, beside the same operation in-process.

A fresh home's ledger is grown to --size entries (transfers between funded wallets),
`agentd serve` is started on it as a process of its own on loopback, and for each of
three operations the bench runs --requests requests at 1, 16 and 64 concurrent clients
(asyncio tasks over httpx, one keep-alive connection each) and prints requests a second
with the p50 and p99 latency, beside the rate of the same operation called on a
`Ledger` in this process:

- checkpoint: GET /v1/checkpoint (in-process: the latest signed checkpoint's note);
- inclusion proof: GET /v1/proofs/inclusion?claim= of a random entry (in-process:
  `find` and `inclusion_proof`);
- append: POST /v1/entries of a transfer signed beforehand, one wallet per client so
  the sequence numbers never clash (in-process: `append_raw` of one such entry).

The clients share the machine's cores with the server, so the HTTP figures carry the
clients' cost too. Then the server's own CPU for a page of entries: GET /v1/entries of
100 and of 1,000 rows, as the JSON document and as JSON lines of the stored bytes
(?as=jsonl), each beside the same bytes served as a constant by the same server (the
daemon's app with bench/beside.py's constant route, in a process of its own; goal: at
most 3x for JSON lines), each the lower of two turns. JSON lines are read from the kept
bundles (agentd/server/pages.py: the first request of a bundle keeps it); they are then
measured again with nothing kept (the file made unusable), as a bundle asked for before
it is kept is served. Nothing is kept after: the home lives in a temporary folder.

    python bench/serve.py                  # about a minute and a half
    python bench/serve.py --requests 400   # a quicker look
    python bench/serve.py --pages          # the pages of entries alone
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]  # before bench/, whose ledger.py would shadow the package

from beside import beside, with_constant

from agentd.app.ledger import open_ledger
from agentd.home import Home
from agentd.server.pages import PAGES_FILE
from agentd.wallets import log_key
from ledger import MINT, TRANSFER, Entry, Ledger, Wallet

CLIENTS = (1, 16, 64)
PAGES = (100, 1000)  # rows a page of GET /v1/entries, beside a constant
FORMS = {"JSON document": {}, "JSON lines": {"as": "jsonl"}}  # the page's forms, by what ?as= asks
PAGE_GOAL = 3.0  # a page's server CPU at most this many times the constant's (the goal of JSON lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000, help="entries on the ledger before measuring")
    parser.add_argument("--requests", type=int, default=2_000, help="requests per operation and client count")
    parser.add_argument("--pages", action="store_true", help="only the pages of entries beside the constant")
    parser.add_argument(
        "--beside", nargs=2, help=argparse.SUPPRESS
    )  # HOME PORT: the pages' server, a process of its own
    args = parser.parse_args()
    if args.beside:
        return serve_beside(Home(Path(args.beside[0])), int(args.beside[1]))
    with tempfile.TemporaryDirectory(prefix="agentd-bench-serve-") as folder:
        home = Home(Path(folder) / "home")
        subprocess.run(
            [sys.executable, "-m", "agentd", "--home", str(home.root), "init"], check=True, capture_output=True
        )
        # The append path at full speed: no wallet's rate of posted entries holds it back.
        kept = home.config_path.read_text() if home.config_path.exists() else ""
        home.config_path.write_text(kept + "\n[serve]\nentries_per_second = 1e9\nentries_burst = 1000000000\n")
        claims = grow(home, args.size)
        load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
        print(
            f"ledger of {args.size} entries; {args.requests} requests per operation and client count; load average {load}",
            flush=True,
        )
        if args.pages:
            return pages(home)
        port = _free_port()
        server = subprocess.Popen(
            [sys.executable, "-m", "agentd", "--home", str(home.root), "serve", "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            base = f"http://127.0.0.1:{port}"
            _wait(base)
            report(home, base, claims, args.requests)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(60)
        pages(home)


def pages(home: Home) -> None:
    """A page of entries: the server's CPU a request beside the same bytes as a constant;
    then JSON lines again with no bundle kept."""
    for kept in (True, False):
        if not kept:
            (home.root / PAGES_FILE).unlink(missing_ok=True)
            (home.root / PAGES_FILE).mkdir()  # the server cannot keep a bundle: each page is read from the rows
        port = _free_port()
        argv = [sys.executable, __file__, "--beside", str(home.root), str(port)]
        server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{port}"
            _wait(base)
            with httpx.Client(base_url=base, timeout=120) as client:
                for rows in PAGES:
                    for form, asked in FORMS.items() if kept else [("JSON lines, nothing kept", {"as": "jsonl"})]:
                        found = beside(client, server.pid, "GET", "/v1/entries", params={"limit": rows, **asked})
                        print(f"GET /v1/entries, {rows:,} rows, {form}: {found.line(PAGE_GOAL)}", flush=True)
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(60)


def serve_beside(home: Home, port: int) -> None:
    """The daemon's app with the constant's route, held to the home's HTTP limits as the daemon is."""
    import uvicorn

    from agentd.app.httplimits import http_limits
    from agentd.server.api import SESSIONS_CAP, app
    from improver import ServerConfig

    config = ServerConfig(with_constant(app(home)), http_limits(home, SESSIONS_CAP), host="127.0.0.1", port=port)
    uvicorn.Server(config).run()


def grow(home: Home, size: int) -> list[str]:
    """Grows the log with transfers between 100 funded wallets; their claim ids."""
    wallets = [Wallet.generate() for _ in range(100)]
    with open_ledger(home) as ledger:
        ledger.append_many([(log_key(home), MINT, {"to": w.id, "cents": 10**9}) for w in wallets])
        claims: list[str] = []
        while ledger.size < size:
            batch = [(w, TRANSFER, {"to": wallets[(i + 1) % 100].id, "cents": 1}) for i, w in enumerate(wallets)]
            claims += [e.claim_id for e in ledger.append_many(batch[: max(1, size - ledger.size)])]
        ledger.checkpoint()
    return claims


def signed_transfers(ledger: Ledger, key: Wallet, clients: int, each: int) -> list[list[bytes]]:
    """`each` transfers for each of `clients` new wallets, funded first, signed now."""
    wallets = [Wallet.generate() for _ in range(clients)]
    ledger.append_many([(key, MINT, {"to": w.id, "cents": 10**9}) for w in wallets])
    origin = ledger.origin
    return [
        [
            Entry.create(
                w,
                TRANSFER,
                {"to": wallets[(i + 1) % clients].id if clients > 1 else key.id, "cents": 1},
                log=origin,
                seq=n,
            ).raw
            for n in range(1, each + 1)
        ]
        for i, w in enumerate(wallets)
    ]


def report(home: Home, base: str, claims: list[str], requests: int) -> None:
    key = log_key(home)
    print(f"{'operation':<16} {'clients':>7} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'in-process/s':>13}")
    with open_ledger(home) as ledger:
        inproc = {
            "checkpoint": _rate(lambda: ledger.latest_checkpoint(), requests),
            "inclusion proof": _rate(
                lambda: ledger.inclusion_proof(ledger.find(random.choice(claims)).pulse or 0), requests
            ),
        }
        own = iter(signed_transfers(ledger, key, 1, requests)[0])
        inproc["append"] = _rate(lambda: ledger.append_raw([next(own)]), requests)
    for clients in CLIENTS:
        with open_ledger(home) as ledger:
            raws = signed_transfers(ledger, key, clients, max(1, requests // clients))
        operations: dict[str, Callable[[httpx.AsyncClient, int], object]] = {
            "checkpoint": lambda c, i: c.get("/v1/checkpoint"),
            "inclusion proof": lambda c, i: c.get("/v1/proofs/inclusion", params={"claim": random.choice(claims)}),
            "append": lambda c, i, raws=raws: c.post("/v1/entries", content=raws[i].pop(0)),
        }
        for name, call in operations.items():
            rate, p50, p99 = asyncio.run(_load(base, clients, max(1, requests // clients), call))
            print(
                f"{name:<16} {clients:>7} {rate:>9.0f} {p50 * 1000:>8.2f} {p99 * 1000:>8.2f} {inproc[name]:>13.0f}",
                flush=True,
            )


def _rate(call: Callable[[], object], count: int) -> float:
    started = time.perf_counter()
    for _ in range(count):
        call()
    return count / (time.perf_counter() - started)


async def _load(
    base: str, clients: int, each: int, call: Callable[[httpx.AsyncClient, int], object]
) -> tuple[float, float, float]:
    latencies: list[float] = []

    async def client(i: int) -> None:
        async with httpx.AsyncClient(base_url=base, timeout=120) as c:
            for _ in range(each):
                started = time.perf_counter()
                answer = await call(c, i)  # type: ignore[misc]
                if answer.status_code >= 300:
                    raise SystemExit(f"the daemon answered {answer.status_code}: {answer.text}")
                latencies.append(time.perf_counter() - started)

    started = time.perf_counter()
    await asyncio.gather(*(client(i) for i in range(clients)))
    elapsed = time.perf_counter() - started
    cuts = statistics.quantiles(latencies, n=100)
    return len(latencies) / elapsed, statistics.median(latencies), cuts[98]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(base: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{base}/health").status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise SystemExit("the daemon did not start")


if __name__ == "__main__":
    os.environ.pop("AGENTD_HOME", None)
    main()
