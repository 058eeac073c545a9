"""`agentd improve improver`: the improver of a profile improved on problems, and shown.

Problems are checked whole before anything runs (one line, exit 2, nothing written). A
kept improver made the profile's (`--apply`) is written to its improver.json with a line
in the profile's change history first, so `agentd improve undo` takes it back exactly,
like a kept lesson.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentd.app import killswitch
from agentd.app.adopt import holding_loop_lock, record_change
from agentd.app.agent import AGENT, model_factory, variant_of
from agentd.app.ledger import open_ledger, publisher
from agentd.app.loop import run_with_signals
from agentd.errors import AgentdError, WrongValue
from agentd.home import Home
from agentd.profiles import Profile, load_profile
from agentd.providers import make_model
from agentd.wallets import load_wallet
from improver import (
    REPLICATIONS,
    SETTINGS_FILE,
    BudgetTooSmall,
    Event,
    ImproverError,
    Lineage,
    MetaLoop,
    Model,
    Settings,
    Stop,
    check_problems,
    load_problem,
    load_settings,
    save_settings,
    settings_text,
)


@dataclass(frozen=True)
class ImproverRequest:
    proposer: str
    problems: tuple[str, ...]  # each TRAIN,HELD
    held_out: tuple[str, ...]
    runs: int = 4
    rounds: int = 1
    loop_rounds: int = 1  # rounds of the lesson loop on each problem's TRAIN tasks
    confirmations: int = 4
    apply: bool = False
    wallet: str | None = None
    seed: int | None = None
    replications: int = REPLICATIONS  # of each problem's grading loop, for each improver compared
    max_tokens: int | None = None  # grading loops, trials and proposals together


def improver_of(home: Home, name: str) -> tuple[Settings, Path]:
    """The profile's improver as it is (`--show`), and the file it lives in."""
    path = load_profile(home, name).dir / SETTINGS_FILE
    try:
        return load_settings(path), path
    except ImproverError as exc:
        raise AgentdError(str(exc)) from None


def improve_improver(
    home: Home,
    name: str,
    request: ImproverRequest,
    on_event: Callable[[Event], None],
    proposer: Model | None = None,
    progress: Callable[[str], None] | None = None,
) -> Stop | None:
    """Runs the improver's rounds on the problems; returns why it stopped early, if it did.
    `proposer` stands in for the model the request names; `progress` hears the lines of
    each loop that grades an improver."""
    profile = load_profile(home, name)
    if min(request.runs, request.rounds, request.loop_rounds, request.confirmations, request.replications) < 1:
        raise WrongValue("--runs, --rounds, --loop-rounds, --confirmations and --replications must be at least 1")
    try:
        problems = [load_problem(p, name) for p in request.problems]
        held_out = [load_problem(p, name) for p in request.held_out]
        check_problems(problems, held_out)
        improver = load_settings(profile.dir / SETTINGS_FILE)
    except ImproverError as exc:
        raise WrongValue(str(exc)) from None
    killswitch.refuse_if_on(home, "improver step")
    home.ensure()
    with holding_loop_lock(home, name), ExitStack() as stack:
        ledger = stack.enter_context(open_ledger(home)) if request.wallet else None
        signer = load_wallet(home, request.wallet) if request.wallet else None

        def apply(settings: Settings, step: str) -> None:
            make_improver_current(load_profile(home, name), settings, step)

        loop = _metaloop(
            profile=name,
            improver=improver,
            agent_variant=variant_of(profile),
            allowed_models=list(dict.fromkeys([*profile.models, *profile.run_models])),
            agent=AGENT,
            models=model_factory(home, profile.dir),
            proposer=proposer or make_model(request.proposer, home, base_dir=profile.dir),
            problems=problems,
            held_out=held_out,
            lineage=Lineage(home.routes.improvers(name)),
            runs=request.runs,
            loop_rounds=request.loop_rounds,
            confirmations=request.confirmations,
            replications=request.replications,
            max_tokens=request.max_tokens,
            limits=profile.limits,
            publish=publisher(ledger, signer),
            apply=apply if request.apply else None,
            halted=lambda: killswitch.halted(home),
            seed=request.seed,
            on_event=on_event,
            progress=progress,
        )
        asyncio.run(run_with_signals(loop, request.rounds))
        return loop.stopped


def _metaloop(**given: Any) -> MetaLoop:
    """The meta-loop, or a wrong value (exit 2) when --max-tokens is less than one run may cost."""
    try:
        return MetaLoop(**given)
    except BudgetTooSmall as exc:
        raise WrongValue(str(exc)) from None


def make_improver_current(profile: Profile, settings: Settings, step: str) -> None:
    """Writes `settings` as the profile's improver.json, its old text (or its absence)
    recorded first so that undo restores exactly that."""
    path = profile.dir / SETTINGS_FILE
    before = path.read_text() if path.exists() else None
    record_change(profile, {"step": step, "file": SETTINGS_FILE, "before": before, "after": settings_text(settings)})
    save_settings(path, settings)
