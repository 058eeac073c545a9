"""Live sessions: the runtime against real providers and real tools, recorded.

The transcript goes to `agentd.db`; an `agent.session/v1` entry with its digest (and
the check's result when `--verify` ran) goes on the ledger, signed by the profile's
wallet.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from agentd.app import killswitch
from agentd.app.ledger import open_ledger
from agentd.app.sessions import open_sessions
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import Profile, load_profile
from agentd.providers import make_model
from agentd.runtime import run_case
from agentd.sessions import SessionRecord, keep, new_id, now, person_messages, protect
from agentd.tools import Toolbox, allowed_environment
from agentd.wallets import load_wallet
from improver import Budget, Completion, Ending, EpisodeLimits, LimitReached, Model, ModelMisconfigured, ProviderError
from sandbox import run_shell

VERIFY_TIMEOUT = 600.0


@dataclass
class LiveEpisode:
    """Answers the runtime from a real model and the profile's real tools.

    As in trials, the wall time is the agent's own (the model's time is not counted), and
    whatever goes wrong inside the model becomes ProviderError: the session is recorded
    as errored rather than lost to a crash.
    """

    llm: Model
    toolbox: Toolbox
    limits: EpisodeLimits
    timings: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.budget = Budget(self.limits)

    async def model(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        self.budget.start_turn()
        started = time.monotonic()
        try:
            completion = await self.budget.wait_for_model(
                self.llm.complete(messages, tools, self.budget.allowance(max_tokens))
            )
        except (ProviderError, LimitReached):
            raise
        except Exception as exc:  # the model's own fault (a scripted model set up wrong, a bug)
            raise ProviderError(_failure(self.llm.name, exc)) from None
        self.budget.spend(completion.usage)
        self.timings.append(
            {
                "call": "model",
                "model": completion.model or self.llm.name,
                "tokens_in": completion.usage.tokens_in,
                "tokens_out": completion.usage.tokens_out,
                "seconds": round(time.monotonic() - started, 6),
            }
        )
        return completion

    async def tool(self, call_id: str, name: str, arguments: str) -> str:
        self.budget.check_time()
        started = time.monotonic()
        answer = await self.toolbox.call(name, arguments)
        self.timings.append(
            {"call": "tool", "tool": name, "id": call_id, "seconds": round(time.monotonic() - started, 6)}
        )
        return answer


def _failure(name: str, exc: Exception) -> str:
    if isinstance(exc, ModelMisconfigured):
        return str(exc)  # written for the model's author already, naming what to fix
    return f"{name} failed: {type(exc).__name__}: {exc}"


def choose_model(profile: Profile, model: str | None) -> str:
    allowed = profile.run_models + [m for m in profile.models if m not in profile.run_models]
    if model is None:
        return profile.run_models[0]
    if model not in allowed:
        raise AgentdError(f"{model} is not among the models profile {profile.name!r} may run on: {', '.join(allowed)}")
    return model


def run_session(
    home: Home,
    profile_name: str,
    task: str,
    *,
    model: str | None = None,
    verify: str | None = None,
    wallet: str | None = None,
) -> SessionRecord:
    """Runs one live session and records it; returns the stored record."""
    killswitch.refuse_if_on(home, "session")
    store = open_sessions(home, write=True)  # a read-only home is refused before the session runs
    profile = load_profile(home, profile_name)
    spec = choose_model(profile, model)
    llm = make_model(spec, home, base_dir=profile.dir)
    toolbox = Toolbox(profile)
    signer = load_wallet(home, wallet or profile.wallet)
    with open_ledger(home) as ledger:  # opened first: a ledger that does not open is said before the session runs
        episode = LiveEpisode(llm, toolbox, profile.limits)
        started = now()
        ending = asyncio.run(run_case(profile.case(task), episode))
        record = protect(home, _record(profile, task, spec, ending, episode, started))
        if verify and ending.ended == "done":
            record.check = "passed" if run_check(verify, record) else "failed"
        return keep(store, [record], signer, ledger)[0]


def _record(
    profile: Profile, task: str, spec: str, ending: Ending, episode: LiveEpisode, started: str
) -> SessionRecord:
    return SessionRecord(
        id=new_id(),
        profile=profile.name,
        task=task,
        source="live",
        started_at=started,
        ended_at=now(),
        ended=ending.ended,
        answer=ending.answer,
        error=ending.error,
        models=[spec],
        tokens_in=episode.budget.usage.tokens_in,
        tokens_out=episode.budget.usage.tokens_out,
        turns=episode.budget.turns,
        person_messages=person_messages(ending.messages),
        compacted=False,
        transcript=ending.messages,
        tools=[t.info() for t in profile.tools],
        timings=episode.timings,
        confidential=profile.confidential,
    )


def run_check(command: str, record: SessionRecord) -> bool:
    """Runs the operator's check; exit 0 means the session passed it. It gets the
    allowed part of agentd's environment (agentd.tools.ALLOWED_ENV), the session's id
    and its transcript's path, and no key or passphrase."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(record.transcript, f, ensure_ascii=False)
        path = f.name
    env = allowed_environment(AGENTD_SESSION_ID=record.id, AGENTD_TRANSCRIPT=path)
    try:
        return run_shell(command, env=env, timeout=VERIFY_TIMEOUT).returncode == 0
    finally:
        os.unlink(path)
