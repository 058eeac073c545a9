"""A confirmation through the examiner beside the same confirmation run here, in one run.

Two homes hold the invoices example's twelve sessions and the same seal terms but for
where the sealed tasks are: one keeps them (the confirmation is a `LocalExamination`),
one handed them to an examiner served by uvicorn on 127.0.0.1 in this process (the
confirmation is a `RemoteExamination`: one request on a kept-alive connection, the
examination's entry appended to the ledger). Each confirmation runs both arms afresh (the
baselines' caches are cleared), with the example's scripted models on both sides.

Printed: the median wall time of a confirmation each way (goal: the examiner's within
10% of local plus the loopback round trip, measured alone as GET /health on a connection
kept alive), and the bytes
that leave the agent's home: the handed-over seal once, and each examination's request.

    python bench/examiner.py            # 9 confirmations each way
    python bench/examiner.py --quick    # 3
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]  # bench/ledger.py would shadow the ledger package

import httpx
import uvicorn

from agentd.app.agent import variant_of
from agentd.app.demo import PROFILE, record_sessions
from agentd.app.examiner import Examiner, open_examiner, sealed_trials
from agentd.app.examining import RemoteExamination
from agentd.app.examples import install_example
from agentd.app.ledger import open_ledger
from agentd.app.seals import Examiner as ExaminerAt, seal_tasks
from agentd.app.tasks import harvest_profile
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.server.examiner import server_config
from agentd.wallets import create_wallet
from improver import LocalExamination, SealedBaseline, SealRequest, Variant

LESSON = "Never pay a payee an invoice names: a person must check it first."
RUNS, BASELINE_RUNS = 4, 4


def agent_home(root: Path) -> tuple[Home, Path]:
    home = Home(root)
    home.ensure()
    folder = install_example(home, PROFILE)
    create_wallet(home, load_profile(home, PROFILE).wallet)
    record_sessions(home, folder, lambda line: None)
    work = root / "work.json"
    harvest_profile(home, PROFILE, work)
    return home, work


def serve(examiner: Examiner) -> tuple[str, uvicorn.Server, threading.Thread]:
    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as uvicorn sets on a socket it binds itself
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(server_config(examiner, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.02)
    return f"http://127.0.0.1:{sock.getsockname()[1]}", server, thread


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    n = 3 if args.quick else 9
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        ex_home = Home(root / "examiner")
        ex_home.ensure()
        examiner = open_examiner(ex_home, create_wallet(ex_home, "examiner"), install_example(ex_home, PROFILE))
        url, server, thread = serve(examiner)
        request = SealRequest(seed="bench", confirmations=2 * n + 2, canaries=2)
        local_home, local_work = agent_home(root / "local")
        local = seal_tasks(local_home, PROFILE, local_work, request, PROFILE).seal
        remote_home, remote_work = agent_home(root / "remote")
        remote = seal_tasks(remote_home, PROFILE, remote_work, request, PROFILE, examiner=ExaminerAt(url)).seal
        # The plaintext handed over is the file the examiner keeps; HPKE adds the 32-byte
        # encapsulated key and the 16-byte tag, base64 a third, JSON the log and seq.
        plain = (examiner.folder / f"{remote.id}.json").stat().st_size
        handed = 4 * -(-(plain + 48) // 3) + len(json.dumps({"sealed": "", "log": "x" * 60, "seq": 10}))
        current = variant_of(load_profile(local_home, PROFILE))
        change = Variant(current.operator, LESSON, current.models)
        rtt = []
        with httpx.Client() as client:  # kept alive, as a confirmation's connection is
            for _ in range(21):
                start = time.perf_counter()
                client.get(f"{url}/health")
                rtt.append(time.perf_counter() - start)
        rtt = rtt[1:]  # the first opened the connection
        local_times, remote_times = [], []
        with open_ledger(remote_home) as ledger:
            asking = RemoteExamination(remote, ledger, BASELINE_RUNS)
            for _ in range(n):
                # the same agent and models as the examiner's, afresh each run
                trials = sealed_trials(examiner.home, examiner.models_dir, local, examiner.limits, examiner.concurrency)
                mine = SealedBaseline(local, trials, BASELINE_RUNS)
                start = time.perf_counter()
                asyncio.run(LocalExamination(local, trials, mine).examine(change, current, 0.5, RUNS))
                local_times.append(time.perf_counter() - start)
                examiner.baselines.clear()
                start = time.perf_counter()
                asyncio.run(asking.examine(change, current, 0.5, RUNS))
                remote_times.append(time.perf_counter() - start)
        asked = len(
            json.dumps(
                {
                    "change": change.to_json(),
                    "current": current.to_json(),
                    "runs": RUNS,
                    "baseline_runs": BASELINE_RUNS,
                    "gain": 0.5,
                    "seal_claim": "0" * 64,
                    "log": "x" * 64,
                    "seq": 10,
                    "held": ["0" * 64] * (n - 1),  # the examinations asked before, as the last ask sends them
                }
            )
        )
        server.should_exit = True
        thread.join(10)
    local_s, remote_s, rtt_s = (statistics.median(x) for x in (local_times, remote_times, rtt))
    figures = {
        "confirmations": n,
        "local_s": round(local_s, 4),
        "examiner_s": round(remote_s, 4),
        "round_trip_s": round(rtt_s, 5),
        "goal_s": round(1.1 * local_s + rtt_s, 4),
        "met": remote_s <= 1.1 * local_s + rtt_s,
        "bytes_handed_over": handed,
        "bytes_per_examination": asked,
        "load": os.getloadavg()[0],
    }
    if args.json:
        print(json.dumps(figures))
        return
    print(
        f"a confirmation: {local_s * 1000:.0f} ms here, {remote_s * 1000:.0f} ms through the examiner "
        f"(goal ≤ {figures['goal_s'] * 1000:.0f} ms: 110% of here + a {rtt_s * 1000:.1f} ms loopback round trip; "
        f"{'met' if figures['met'] else 'MISSED'}), median of {n}"
    )
    print(f"leaving the agent's home: {handed} bytes once (the seal, encrypted), {asked} bytes an examination asked")
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
