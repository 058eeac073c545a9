"""`agentd improve code` and `improve releases` on a home: the code loop with the home's
wallet, ledger, sandbox, kill switch and lock, and the releases it kept.

By default the code is agentd's own: built with its interpreter, tested on its
runtime's tests, and run as `agentd case --stdio` from the built tree; a change may
touch only the agent runtime (agentd/runtime.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from agentd.app import killswitch
from agentd.app.adopt import holding_loop_lock
from agentd.app.agent import AGENT, model_factory, variant_of
from agentd.app.ledger import open_ledger, publisher
from agentd.app.loop import Stopper, examiner_of, recovered_lineage, run_with_signals, trials_executor
from agentd.app.queued import through
from agentd.app.rebuilt import code_asked
from agentd.app.runners import sandbox_extras, sandbox_runner
from agentd.app.seals import check_claimant, settle_seals
from agentd.errors import AgentdError, WrongValue
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.providers import make_model
from agentd.wallets import load_wallet
from improver import (
    DEFAULT_ALLOW,
    MAX_FILES,
    MAX_LINES,
    Archive,
    CodeLoop,
    Commands,
    Event,
    ImproverError,
    Model,
    PatchLimits,
    Stop,
    Variant,
    Workshop,
    apply_to,
    current_seal,
    load_settings,
    releases_of,
)
from ledger import Ledger

BUILD = "python3 -m compileall -q agentd"
TEST = "python3 -m pytest -q -p no:cacheprovider -p no:xdist tests/agentd/test_runtime.py"
CANDIDATE = "python3 -m agentd case --stdio"


@dataclass(frozen=True)
class CodeRequest:
    coder: str
    source: Path
    build: str = BUILD
    test: str = TEST
    candidate: str = CANDIDATE
    allow: tuple[str, ...] = DEFAULT_ALLOW
    readable: tuple[Path, ...] = ()
    env: tuple[str, ...] = ()  # VAR=VALUE
    rounds: int = 1
    runs: int = 4
    baseline_runs: int | None = None  # default: improver's BASELINE_FACTOR x runs
    apply: bool = False
    wallet: str | None = None
    max_tokens: int | None = None
    concurrency: int = 8
    max_files: int = MAX_FILES
    max_lines: int = MAX_LINES
    seed: int | None = None
    queue: str | None = None  # the trial queue (agentd worker) the runs go to; default the home's [trials] queue


def run_code(
    home: Home,
    profile_name: str,
    request: CodeRequest,
    on_event: Callable[[Event], None],
    coder: Model | None = None,
    progress: Callable[[str], None] | None = None,
    stopper: Stopper | None = None,
) -> Stop | None:
    """Runs the code loop on the profile's current seal; returns why it stopped early, if
    it did. `coder` stands in for the model the request names; `stopper` stops it from
    another thread (the daemon's scheduled code job)."""
    killswitch.refuse_if_on(home, "loop step")
    _check(request)
    home.ensure()
    settle_seals(home)
    with holding_loop_lock(home, profile_name), ExitStack() as stack:
        ledger = stack.enter_context(open_ledger(home)) if request.wallet else None
        workshop = _workshop(home, profile_name, request)
        stack.callback(workshop.close)
        stopper = stopper or Stopper()
        loop = _loop(home, profile_name, request, workshop, on_event, coder, progress, ledger, stopper)
        asyncio.run(through(loop.executor, lambda: run_with_signals(loop, request.rounds, stopper)))
        return loop.stopped


def _check(request: CodeRequest) -> None:
    if min(request.rounds, request.runs, request.concurrency, request.max_files, request.max_lines) < 1:
        raise WrongValue("--rounds, --runs, --concurrency, --max-files and --max-lines must be at least 1")
    if not request.candidate.strip():
        raise WrongValue("--candidate must be a command")
    sandbox_extras(request.readable, request.env)
    if not request.allow or any(a.startswith("/") or ".." in Path(a).parts for a in request.allow):
        raise WrongValue("--allow takes paths inside the source, relative to its top")


def _workshop(home: Home, profile: str, request: CodeRequest) -> Workshop:
    readable, env = sandbox_extras(request.readable, request.env)
    try:
        return Workshop(
            source=request.source.resolve(),
            root=home.routes.code_work(profile),
            commands=Commands(request.build, request.test, request.candidate),
            runner=sandbox_runner(home),
            readable=readable,
            env=env,
        )
    except ImproverError as exc:
        raise AgentdError(str(exc)) from None


def _loop(
    home: Home,
    profile_name: str,
    request: CodeRequest,
    workshop: Workshop,
    on_event: Callable[[Event], None],
    coder: Model | None,
    progress: Callable[[str], None] | None,
    ledger: Ledger | None,
    stopper: Stopper,
) -> CodeLoop:
    profile = load_profile(home, profile_name)
    seal = current_seal(home.routes, profile_name)
    train = seal.train()
    signer = load_wallet(home, request.wallet) if request.wallet else None
    check_claimant(home, ledger, signer, seal)

    def apply_patch(patch: bytes) -> None:
        apply_to(workshop.source, patch)

    current = variant_of(profile)
    executor = trials_executor(home, request.queue, profile.dir, seal, lambda: stopper.halted(home), on_event)
    if executor is not None and request.readable:
        raise WrongValue(
            "--readable names paths on this machine, which a worker elsewhere may not have: drop --readable or --queue"
        )
    try:
        return CodeLoop(
            workshop=workshop,
            routes=home.routes,
            limits_of_patch=PatchLimits(request.allow, request.max_files, request.max_lines),
            apply_patch=apply_patch if request.apply else None,
            profile=profile_name,
            current=replace(current, commit=workshop.commit),
            allowed_models=list(current.models),
            seal=seal,
            agent=AGENT,
            models=model_factory(home, profile.dir),
            proposer=coder or make_model(request.coder, home, base_dir=profile.dir),
            settings=load_settings(profile.dir / "improver.json"),
            archive=Archive.load(home.routes.code_archive(profile_name, train.digest), train.digest),
            lineage=recovered_lineage(home, profile_name, ledger, on_event),
            runs=request.runs,
            baseline_runs=request.baseline_runs,
            limits=profile.limits,
            concurrency=request.concurrency,
            publish=publisher(ledger, signer),
            halted=lambda: stopper.halted(home),
            max_tokens=request.max_tokens,
            rng=np.random.default_rng(request.seed),
            on_event=on_event,
            progress=progress,
            executor=executor,
            examiner=examiner_of(seal, ledger, lambda change, current: handed_over(workshop, change, current)),
        )
    except Stop as exc:
        raise AgentdError(str(exc)) from None


def handed_over(workshop: Workshop, change: Variant, current: Variant) -> dict[str, Any]:
    """What an examiner is handed to rebuild both arms: their patches and the commands."""
    patches = {v.patch: workshop.patches[v.patch] for v in (change, current) if v.patch}
    return code_asked(patches, workshop.commands)


def releases(home: Home, profile: str) -> list[dict[str, Any]]:
    """The profile's releases, each with where its patch is."""
    return [
        {**r, "patch_file": str(home.routes.release_patch(r["release"]))} for r in releases_of(home.routes, profile)
    ]
