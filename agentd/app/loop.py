"""The glue between a home and the improver's loop: files, wallets, the ledger, the kill
switch, signals and the profile's learned.json."""

from __future__ import annotations

import asyncio
import signal
import threading
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from agentd.app import killswitch
from agentd.app.adopt import holding_loop_lock, lineage_of, make_current
from agentd.app.agent import AGENT, model_factory, variant_of
from agentd.app.examining import CodeHandedOver, RemoteExamination
from agentd.app.ledger import open_ledger, publisher
from agentd.app.practice import load_practice
from agentd.app.queued import QueueExecutor, queue_executor, through
from agentd.app.seals import check_claimant, settle_seals
from agentd.errors import AgentdError, WrongValue
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.providers import make_model
from agentd.wallets import load_wallet
from improver import (
    Archive,
    BudgetTooSmall,
    Challenger,
    Event,
    Examination,
    Lineage,
    Loop,
    Model,
    Seal,
    Stop,
    Trials,
    Variant,
    current_seal,
    load_settings,
    with_practice,
)
from ledger import Ledger


class Stopper:
    """Asks a loop running on another thread (a scheduled job in the daemon) to stop at
    its next step boundary, as SIGTERM does for `improve run`; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._target: tuple[asyncio.AbstractEventLoop, Stoppable] | None = None
        self.requested = False

    def attach(self, running: asyncio.AbstractEventLoop, loop: Stoppable) -> None:
        with self._lock:
            self._target = (running, loop)
            if self.requested:
                loop.request_stop()

    def detach(self) -> None:
        with self._lock:
            self._target = None

    def halted(self, home: Home) -> str | None:
        """Why the loop's next step must not start: a stop asked for, or the kill switch.
        Steps that never wait (a scripted proposer) give the event loop no turn to hear
        the stop, so it is also asked before every proposal and trial."""
        if self.requested:
            return "asked to stop (the daemon is shutting down); the archive and the seal are as the last finished step left them"
        return killswitch.halted(home)

    def request(self) -> None:
        with self._lock:
            self.requested = True
            if self._target is not None:
                running, loop = self._target
                running.call_soon_threadsafe(loop.request_stop)


@dataclass(frozen=True)
class RunRequest:
    proposer: str
    rounds: int = 1
    runs: int = 4
    baseline_runs: int | None = None  # default: improver's BASELINE_FACTOR x runs
    apply: bool = False
    wallet: str | None = None
    models: tuple[str, ...] = ()
    max_tokens: int | None = None
    concurrency: int = 8
    seed: int | None = None
    practice: Path | None = None  # practice tasks to choose on beside the seal's
    challenger: str | None = None  # the model that writes variants of the tasks a change newly passes
    challenger_tasks: int = Challenger.tasks
    challenger_variants: int = Challenger.variants
    challenger_turns: int = Challenger.turns  # its answers: the first and those mending what was refused
    queue: str | None = None  # the trial queue (agentd worker) the runs go to; default the home's [trials] queue


def run_improvement(
    home: Home,
    profile_name: str,
    request: RunRequest,
    on_event: Callable[[Event], None],
    proposer: Model | None = None,
    progress: Callable[[str], None] | None = None,
    stopper: Stopper | None = None,
    challenger: Model | None = None,
) -> Stop | None:
    """Runs the loop on the profile's current seal, one at a time per profile; returns why
    it stopped early, if it did. `proposer` and `challenger` stand in for those the request names;
    `progress` hears how far each trial is, at most once a second; `stopper` stops it
    from another thread."""
    killswitch.refuse_if_on(home, "loop step")
    home.ensure()
    settle_seals(home)
    with holding_loop_lock(home, profile_name), ExitStack() as stack:
        ledger = stack.enter_context(open_ledger(home)) if request.wallet else None
        stopper = stopper or Stopper()
        loop = _loop(home, profile_name, request, on_event, proposer, progress, ledger, stopper, challenger)
        asyncio.run(through(loop.executor, lambda: run_with_signals(loop, request.rounds, stopper)))
        return loop.stopped


def _loop(
    home: Home,
    profile_name: str,
    request: RunRequest,
    on_event: Callable[[Event], None],
    proposer: Model | None,
    progress: Callable[[str], None] | None,
    ledger: Ledger | None,
    stopper: Stopper | None = None,
    challenger: Model | None = None,
) -> Loop:
    if min(request.rounds, request.runs, request.concurrency) < 1:
        raise AgentdError("--rounds, --runs and --concurrency must be at least 1")
    if min(request.challenger_tasks, request.challenger_variants, request.challenger_turns) < 1:
        raise WrongValue("--challenger-tasks, --challenger-variants and --challenger-turns must be at least 1")
    if request.baseline_runs is not None and request.baseline_runs < request.runs:
        raise AgentdError(f"--baseline-runs ({request.baseline_runs}) must be at least --runs ({request.runs})")
    profile = load_profile(home, profile_name)
    seal = current_seal(home.routes, profile_name)
    practice = load_practice(request.practice, profile_name) if request.practice else None
    train = with_practice(seal, practice)
    signer = load_wallet(home, request.wallet) if request.wallet else None
    check_claimant(home, ledger, signer, seal)
    stop = stopper or Stopper()

    def apply(variant: Variant, step: str) -> None:
        make_current(load_profile(home, profile_name), variant, step)

    executor = trials_executor(home, request.queue, profile.dir, seal, lambda: stop.halted(home), on_event)

    lineage = recovered_lineage(home, profile_name, ledger, on_event)
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
            lineage=lineage,
            runs=request.runs,
            baseline_runs=request.baseline_runs,
            limits=profile.limits,
            concurrency=request.concurrency,
            publish=publisher(ledger, signer),
            apply=apply if request.apply else None,
            halted=lambda: stop.halted(home),
            max_tokens=request.max_tokens,
            rng=np.random.default_rng(request.seed),
            on_event=on_event,
            progress=progress,
            practice=practice,
            challenge=_challenge(home, profile.dir, request, challenger),
            examiner=examiner_of(seal, ledger),
            executor=executor,
        )
    except BudgetTooSmall as exc:
        raise WrongValue(str(exc)) from None
    except Stop as exc:
        raise AgentdError(str(exc)) from None


def trials_executor(
    home: Home,
    queue: str | None,
    models_dir: Path,
    seal: Seal,
    halted: Callable[[], str | None],
    on_event: Callable[[Event], None],
) -> QueueExecutor | None:
    """The trial queue a loop on `seal` sends its runs to (agentd/app/queued.py), or None:
    they run here. Its sealed tasks are run only by workers the home trusts, or here."""
    sealed = frozenset(t.digest for t in seal.sealed.tasks) if seal.held_here else frozenset()

    def refused(line: str) -> None:
        on_event(Event("refused", line))

    return queue_executor(home, queue, models_dir, sealed, halted, refused)


def examiner_of(
    seal: Seal, ledger: Ledger | None, code: CodeHandedOver | None = None
) -> Callable[[Trials, int], Examination] | None:
    """The examiner that holds the seal's sealed tasks, asked through the ledger (handed a
    code change's patches and commands by `code`); None when they are held here."""
    if seal.held_here:
        return None
    if ledger is None:
        raise WrongValue(f"seal {seal.id} is held by an examiner, whose confirmations go on the ledger: give --wallet")
    return lambda trials, baseline_runs: RemoteExamination(seal, ledger, baseline_runs, code=code)


def _challenge(home: Home, folder: Path, request: RunRequest, model: Model | None) -> Challenger | None:
    """The challenger the request names (`model` stands in for it), or None without one."""
    if request.challenger is None:
        return None
    made = model or make_model(request.challenger, home, base_dir=folder)
    return Challenger(made, request.challenger_tasks, request.challenger_variants, request.challenger_turns)


def recovered_lineage(home: Home, profile: str, ledger: Ledger | None, on_event: Callable[[Event], None]) -> Lineage:
    """The profile's lineage, first given a line for each change the ledger says was kept
    that a loop killed between publishing and recording left out (with a wallet only:
    without one nothing is published)."""
    lineage = lineage_of(home, profile)
    if ledger is not None:
        for line in lineage.recover(profile, ledger, home.routes.seal_ids(profile)):
            text = f"step {line['step']}: published as claim {line['claim']} but not recorded (the loop was stopped in between); recorded now"
            on_event(Event("recovered", text))
    return lineage


class Stoppable(Protocol):
    """A run of rounds that a stop request ends at its next step: the loop, the improver loop."""

    def request_stop(self) -> None: ...

    async def run(self, rounds: int) -> None: ...


async def run_with_signals(loop: Stoppable, rounds: int, stopper: Stopper | None = None) -> None:
    """Runs the loop with SIGTERM and Ctrl-C turned into a clean stop (on the main thread:
    elsewhere the process's own handler stops it through `stopper`)."""
    stopper = stopper or Stopper()
    running = asyncio.get_running_loop()
    signals = (signal.SIGTERM, signal.SIGINT) if threading.current_thread() is threading.main_thread() else ()
    for sig in signals:
        running.add_signal_handler(sig, loop.request_stop)
    stopper.attach(running, loop)
    try:
        await loop.run(rounds)
    finally:
        stopper.detach()
        for sig in signals:
            running.remove_signal_handler(sig)
