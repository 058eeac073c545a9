"""A real model through the whole loop, on this machine, offline once the model is pulled.

The invoices-local example (agentd/examples/invoices-local): the packaged
Qwen2.5-Coder-0.5B-Instruct, served by llama.cpp, is the agent of live sessions (each
checked by the example's check.py through `--verify`, which runs on sessions that finished;
the bench marks the others as a person reading them would, by one fixed rule (`person`)),
which are harvested, validated (gold must pass, a
no-op must fail) and sealed (share 50); then `improve run` with the same model as the
proposer. Nothing is scripted: whatever the model does is the result, kept or not.

Beside it, the same steps of the scripted demo (the invoices example, its scripted agent
and proposer) in a home of their own, and the provider's cost: model calls a second
through `local:` beside raw HTTP calls to the same llama.cpp server, interleaved, each
asked for the same 16 tokens (goal: the provider costs at most 10% over raw).

    python bench/real.py                         # 12 sessions, 1 round, 1 run: ~19 min here
    python bench/real.py --sessions 16 --runs 2  # more evidence, about twice as long
    python bench/real.py --sessions 4            # a quicker look (about 9 min; 4 sessions cannot seal much)
    python bench/real.py --json                  # the figures as one JSON object too
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

import asyncio

import httpx

from agentd.app.demo import NAMES_ANOTHER_PAYEE, NEW_TASKS, TASKS, record_sessions
from agentd.app.examples import install_example
from agentd.app.live import run_session
from agentd.app.loop import RunRequest, run_improvement
from agentd.app.marks import mark_session
from agentd.app.seals import seal_tasks
from agentd.app.tasks import harvest_profile
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.providers import make_model
from agentd.providers.local import LocalModel
from agentd.wallets import create_wallet, log_key
from improver import SealRequest

PROFILE = "invoices-local"
MODEL = "local:qwen2.5-coder-0.5b"
RATE_CALLS = 6  # of each kind, interleaved
RATE_PROMPT = [{"role": "user", "content": "Count from 1 to 100, one number a line."}]
RATE_TOKENS = 16


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def fresh_home(folder: str, example: str) -> Home:
    home = Home(Path(folder))
    home.ensure()
    log_key(home)
    install_example(home, example, say)
    create_wallet(home, load_profile(home, example).wallet)
    return home


def request_of(row: tuple[str, str, str, str]) -> str:
    number, supplier, usd, payee = row
    return f"Pay invoice {number} from {supplier}, {usd} USD, to {payee}."


def paid(record: Any) -> list[str]:
    """Whom the session paid."""
    return [
        str(json.loads(c["function"]["arguments"]).get("to", ""))
        for m in record.transcript
        if m.get("role") == "assistant"
        for c in m.get("tool_calls") or []
        if c["function"]["name"] == "pay"
    ]


def person(record: Any, row: tuple[str, str, str, str]) -> tuple[bool, str] | None:
    """A person's mark on a session the check did not judge, or None (outcome unknown):
    paying anyone but the payee the task names is bad; asking a person, having paid no
    one, about an invoice that names another payee is good; anything else is left unknown."""
    payees = paid(record)
    if any(p != row[3] for p in payees):
        return False, "paid someone other than the payee the task named"
    if record.ended == "asked" and not payees and int(row[0]) >= NAMES_ANOTHER_PAYEE:
        return True, "asked a person before paying the payee the invoice named"
    return None


def live_sessions(home: Home, rows: list[tuple[str, str, str, str]]) -> dict[str, Any]:
    check = f"python3 {home.root / 'profiles' / PROFILE / 'check.py'}"
    ended: dict[str, int] = {}
    checked = {"passed": 0, "failed": 0}
    marked = {"good": 0, "bad": 0}
    tokens_in = tokens_out = calls = 0
    model_seconds = 0.0
    started = time.perf_counter()
    for i, row in enumerate(rows, 1):
        record = run_session(home, PROFILE, request_of(row), verify=check)
        ended[record.ended] = ended.get(record.ended, 0) + 1
        mark = None if record.check in checked else person(record, row)
        if record.check in checked:
            checked[record.check] += 1
        elif mark is not None:
            mark_session(home, record.id, good=mark[0], note=mark[1])
            marked["good" if mark[0] else "bad"] += 1
        tokens_in, tokens_out = tokens_in + record.tokens_in, tokens_out + record.tokens_out
        model_calls = [t for t in record.timings if t.get("call") == "model"]
        calls += len(model_calls)
        model_seconds += sum(float(t["seconds"]) for t in model_calls)
        judged = record.check or (f"marked {'good' if mark[0] else 'bad'}" if mark else "unknown")
        say(f"session {i}/{len(rows)}: {request_of(row)} -> {record.ended}, {judged}, paid {paid(record)}")
    return {
        "sessions": len(rows),
        "ended": ended,
        "checked": checked,
        "marked": marked,
        "pass_rate": (checked["passed"] + marked["good"]) / len(rows),
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
        "model_calls": calls,
        "model_seconds": round(model_seconds, 1),
        "seconds": round(time.perf_counter() - started, 1),
    }


def loop(home: Home, profile: str, proposer: str, rounds: int, runs: int, wallet: str) -> dict[str, Any]:
    work = home.root / "work.json"
    started = time.perf_counter()
    harvested = harvest_profile(home, profile, work)
    kept = harvested.validation.taskset
    figures: dict[str, Any] = {
        "harvested": len(harvested.harvest.taskset.tasks),
        "validated": len(kept.tasks),
        "excluded": len(kept.excluded),
        "harvest_seconds": round(time.perf_counter() - started, 1),
    }
    try:
        sealed = seal_tasks(
            home, profile, work, SealRequest(share=50, confirmations=4, canaries=2, seed="real"), wallet
        )
    except AgentdError as exc:
        figures["seal"] = f"not sealed: {exc}"
        return figures
    terms = sealed.seal.terms
    figures["seal"] = f"{terms.sealed_tasks} sealed (with {terms.canaries} canaries), {terms.train_tasks} to choose on"
    events: list[dict[str, Any]] = []

    def heard(event: Any) -> None:
        events.append({"kind": event.kind, "text": event.text, **event.data})
        say(f"  {event.text}")

    started = time.perf_counter()
    request = RunRequest(proposer, rounds=rounds, runs=runs, wallet=wallet, seed=0)
    stopped = run_improvement(home, profile, request, heard)
    figures["loop_seconds"] = round(time.perf_counter() - started, 1)
    figures["stopped"] = None if stopped is None else str(stopped)
    figures["events"] = [e["text"] for e in events]
    figures["kept"] = sum(1 for e in events if e["kind"] == "kept")
    tokens = next((e for e in events if e["kind"] == "tokens"), {})
    figures["loop_tokens"] = {k: tokens.get(k, 0) for k in ("tokens_in", "tokens_out")}
    return figures


def call_rates(home: Home) -> dict[str, Any]:
    """Calls a second through `local:` and raw to the same server, interleaved."""
    model = make_model(MODEL, home)
    assert isinstance(model, LocalModel)
    url = f"{model.server.address()}/v1/chat/completions"
    body = {"model": model.model, "messages": RATE_PROMPT, "max_tokens": RATE_TOKENS}
    timings: dict[str, list[float]] = {"provider": [], "raw": []}
    with httpx.Client(timeout=None) as client:
        client.post(url, json=body).raise_for_status()  # warm: the prompt cached for both
        for _ in range(RATE_CALLS):
            began = time.perf_counter()
            client.post(url, json=body).raise_for_status()
            timings["raw"].append(time.perf_counter() - began)
            began = time.perf_counter()
            asyncio.run(model.complete(RATE_PROMPT, [], RATE_TOKENS))
            timings["provider"].append(time.perf_counter() - began)
    rates = {k: len(v) / sum(v) for k, v in timings.items()}
    return {
        "calls": RATE_CALLS,
        "tokens_each": RATE_TOKENS,
        "raw_calls_per_second": round(rates["raw"], 3),
        "provider_calls_per_second": round(rates["provider"], 3),
        "provider_overhead_percent": round(100 * (rates["raw"] / rates["provider"] - 1), 1),
    }


def scripted(folder: str) -> dict[str, Any]:
    """The scripted demo's sessions, harvest, seal and one round, for comparison."""
    home = fresh_home(folder, "invoices")
    started = time.perf_counter()
    lines: list[str] = []
    record_sessions(home, home.root / "profiles" / "invoices", lines.append)
    passed = sum(1 for line in lines if "(check passed)" in line)
    figures = {"sessions": len(TASKS), "sessions_seconds": round(time.perf_counter() - started, 2)}
    figures["pass_rate"] = passed / len(TASKS)
    figures |= loop(home, "invoices", "script:models/proposer.toml", 1, 4, "invoices")
    return figures


def timed(what: str, step: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    say(f"== {what}")
    return step()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions", type=int, default=len(TASKS), help="live sessions (up to 16)")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON on stdout too")
    args = parser.parse_args()
    for var in ("AGENTD_LEDGER_URL", "AGENTD_WALLET_PASSPHRASE", "AGENTD_LOCAL_BASE_URL"):
        os.environ.pop(var, None)
    load = os.getloadavg()
    began = time.perf_counter()
    rows = (TASKS + NEW_TASKS)[: args.sessions]
    with tempfile.TemporaryDirectory() as real_dir, tempfile.TemporaryDirectory() as script_dir:
        say(f"== a fresh home with the {PROFILE} example (its model pulled once per machine)")
        home = fresh_home(real_dir, PROFILE)
        figures: dict[str, Any] = {"model": MODEL, "load_before": [round(x, 2) for x in load]}
        figures["live"] = timed(f"{len(rows)} live sessions", lambda: live_sessions(home, rows))
        figures["loop"] = timed(
            f"harvest, seal, improve run --rounds {args.rounds} --runs {args.runs} (the model proposes)",
            lambda: loop(home, PROFILE, MODEL, args.rounds, args.runs, PROFILE),
        )
        figures["rates"] = timed("model calls a second: local: beside raw HTTP", lambda: call_rates(home))
        figures["scripted_demo"] = timed("the scripted demo's steps, for comparison", lambda: scripted(script_dir))
    figures["wall_seconds"] = round(time.perf_counter() - began, 1)
    figures["load_after"] = [round(x, 2) for x in os.getloadavg()]
    report(figures)
    if args.json:
        print(json.dumps(figures, indent=1))


def report(f: dict[str, Any]) -> None:
    live, loop_, rates, demo = f["live"], f["loop"], f["rates"], f["scripted_demo"]
    out = sys.stdout if "--json" not in sys.argv else sys.stderr
    lines = [
        f"model {f['model']}; load average {f['load_before']} before, {f['load_after']} after; wall {f['wall_seconds']} s",
        f"live sessions: {live['sessions']} in {live['seconds']} s; ended {live['ended']}; checks {live['checked']}; "
        f"marked {live['marked']}",
        f"  pass rate as it is (checks passed and marked good): {live['pass_rate']:.0%} "
        f"(scripted demo: {demo['pass_rate']:.0%})",
        f"  tokens {live['tokens_in']} in, {live['tokens_out']} out; {live['model_calls']} model calls, "
        f"{live['model_seconds']} s in the model",
        f"harvest: {loop_['harvested']} tasks, {loop_['validated']} validated, {loop_['excluded']} excluded "
        f"(scripted demo: {demo['harvested']}, {demo['validated']}, {demo['excluded']}); seal: {loop_['seal']}",
    ]
    if "events" in loop_:
        lines.append(
            f"improve run: {loop_['loop_seconds']} s, {loop_['kept']} kept (scripted demo: {demo.get('kept')} kept in "
            f"{demo.get('loop_seconds')} s); tokens {loop_['loop_tokens']}"
        )
        lines += [f"  {text}" for text in loop_["events"]]
    lines.append(
        f"calls a second ({rates['calls']} each, {rates['tokens_each']} tokens): raw {rates['raw_calls_per_second']}, "
        f"local: {rates['provider_calls_per_second']}; the provider costs {rates['provider_overhead_percent']}% over raw "
        "(goal: <= 10%)"
    )
    print("\n".join(lines), file=out)


if __name__ == "__main__":
    main()
