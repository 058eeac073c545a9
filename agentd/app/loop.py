"""The glue between a home and the improver's seal and loop: files, wallets, the ledger,
the kill switch, signals and the profile's learned.json."""

from __future__ import annotations

import asyncio
import signal
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

from agentd.app import killswitch
from agentd.app.adopt import holding_loop_lock, lineage_of, make_current
from agentd.app.agent import AGENT, model_factory, variant_of
from agentd.app.ledger import open_ledger
from agentd.app.tasks import exported
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.providers import make_model
from agentd.wallets import load_wallet
from improver import (
    Archive,
    Event,
    LineageReport,
    Loop,
    Model,
    Seal,
    SealRequest,
    Stop,
    Variant,
    claim_body,
    current_seal,
    load_settings,
    load_tasks,
    make_seal,
    open_seal,
    seals_of,
)
from improver import (
    check_lineage as check_kept,
)


@dataclass(frozen=True)
class Sealed:
    seal: Seal
    claim: str | None
    pulse: int | None


def seal_tasks(home: Home, profile: str, tasks: Path, request: SealRequest, wallet: str | None) -> Sealed:
    """Seals a validated task set of PROFILE; with a wallet, publishes it before anything is tried."""
    load_profile(home, profile)
    taskset = load_tasks(tasks)
    if taskset.profile != profile:
        raise AgentdError(f"{tasks} holds tasks of profile {taskset.profile}, not {profile}")
    signer = load_wallet(home, wallet) if wallet else None  # a wrong passphrase fails before anything is written
    home.ensure()
    seal = make_seal(taskset, home.routes, request, exported(home, profile))
    if signer is None:
        return Sealed(seal, None, None)
    entry = open_ledger(home).append(signer, "agent.seal/v1", claim_body(seal))
    seal.record_claim(entry.claim_id, entry.pulse)
    return Sealed(seal, entry.claim_id, entry.pulse)


@dataclass(frozen=True)
class RunRequest:
    proposer: str
    rounds: int = 1
    runs: int = 4
    apply: bool = False
    wallet: str | None = None
    models: tuple[str, ...] = ()
    max_tokens: int | None = None
    concurrency: int = 8
    seed: int | None = None


def run_improvement(
    home: Home,
    profile_name: str,
    request: RunRequest,
    on_event: Callable[[Event], None],
    proposer: Model | None = None,
    progress: Callable[[str], None] | None = None,
) -> Stop | None:
    """Runs the loop on the profile's current seal, one at a time per profile; returns why
    it stopped early, if it did. `proposer` stands in for the one the request names;
    `progress` hears how far each trial is, at most once a second."""
    killswitch.refuse_if_on(home, "loop step")
    home.ensure()
    with holding_loop_lock(home, profile_name):
        loop = _loop(home, profile_name, request, on_event, proposer, progress)
        asyncio.run(_run(loop, request.rounds))
        return loop.stopped


def _loop(
    home: Home,
    profile_name: str,
    request: RunRequest,
    on_event: Callable[[Event], None],
    proposer: Model | None,
    progress: Callable[[str], None] | None,
) -> Loop:
    if min(request.rounds, request.runs, request.concurrency) < 1:
        raise AgentdError("--rounds, --runs and --concurrency must be at least 1")
    profile = load_profile(home, profile_name)
    seal = current_seal(home.routes, profile_name)
    train = seal.train()
    signer = load_wallet(home, request.wallet) if request.wallet else None
    ledger = open_ledger(home) if signer else None

    def publish(kind: str, body: dict) -> tuple[str, int]:
        assert ledger is not None and signer is not None
        entry = ledger.append(signer, kind, body)
        return entry.claim_id, entry.pulse

    def apply(variant: Variant, step: str) -> None:
        make_current(load_profile(home, profile_name), variant, step)

    def halted() -> str | None:
        return f"the kill switch is on (since {killswitch.since(home)})" if killswitch.is_on(home) else None

    allowed = list(dict.fromkeys([*profile.models, *profile.run_models, *request.models]))
    try:
        return Loop(
            profile=profile_name,
            current=variant_of(profile),
            allowed_models=allowed,
            seal=seal,
            agent=AGENT,
            models=model_factory(home, profile.dir),
            proposer=proposer or make_model(request.proposer, home, base_dir=profile.dir),
            settings=load_settings(profile.dir / "improver.json"),
            archive=Archive.load(home.routes.archive(profile_name, train.digest), train.digest),
            lineage=lineage_of(home, profile_name),
            runs=request.runs,
            limits=profile.limits,
            concurrency=request.concurrency,
            publish=publish if signer else None,
            apply=apply if request.apply else None,
            halted=halted,
            max_tokens=request.max_tokens,
            rng=np.random.default_rng(request.seed),
            on_event=on_event,
            progress=progress,
        )
    except Stop as exc:
        raise AgentdError(str(exc)) from None


async def _run(loop: Loop, rounds: int) -> None:
    """Runs the loop with SIGTERM and Ctrl-C turned into a clean stop."""
    running = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        running.add_signal_handler(sig, loop.request_stop)
    try:
        await loop.run(rounds)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            running.remove_signal_handler(sig)


def check_lineage(home: Home, profile: str) -> LineageReport:
    seals = {s.id: s for s in (open_seal(p) for p in seals_of(home.routes, profile))}
    return check_kept(lineage_of(home, profile), profile, open_ledger(home, check=False), seals)
