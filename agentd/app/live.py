"""Live sessions: the runtime against real providers and real tools, recorded.

The transcript goes to `agentd.db`; an `agent.session/v1` entry with its digest (and
the check's result when `--verify` ran) goes on the ledger, signed by the profile's
wallet. While the session runs, each message is written down as it joins the
transcript (`agentd.sessions.Journal`): a tool call is on disk before it runs. Ctrl-C or
SIGTERM ends the session as interrupted, recorded with every call it made; a session
whose process is killed outright is recorded so by the next command that opens the
sessions store (`agentd.app.sessions.recover`).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import tempfile
import threading
import time
from collections.abc import Coroutine
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
from agentd.sessions import Journal, SessionRecord, interruption, keep, new_id, now, person_messages, protect
from agentd.tools import Toolbox, allowed_environment
from agentd.wallets import load_wallet
from improver import Budget, Completion, Ending, EpisodeLimits, LimitReached, Model, ModelMisconfigured, ProviderError
from sandbox import run_shell

VERIFY_TIMEOUT = 600.0


@dataclass
class LiveEpisode:
    """Answers the runtime from a real model and the profile's real tools.

    A live session's wall time counts the model's time: each model call must answer
    within its own deadline (`call_seconds`) and within what is left of `wall_seconds`,
    and one that does not is cut off. That, and whatever else goes wrong inside the
    model, is a ProviderError: the session is recorded as errored (a provider's fault,
    never the agent's) rather than lost to a crash. The agent's own time reaching
    `wall_seconds` is a limit, as in trials. Every call's time is in `timings`, a call
    cut off too.

    With a `journal`, each message is written down as it joins the transcript (`said`).
    """

    llm: Model
    toolbox: Toolbox
    limits: EpisodeLimits
    journal: Journal | None = None
    timings: list[dict[str, Any]] = field(default_factory=list)
    transcript: list[dict[str, Any]] = field(default_factory=list)  # every message said so far
    _written: int = field(default=0, init=False)  # how many of the timings the journal has

    def __post_init__(self) -> None:
        self.budget = Budget(self.limits)

    def said(self, message: dict[str, Any]) -> None:
        """The runtime's `said`: keeps the message, and writes it down with the timings
        of the calls that led to it."""
        self.transcript.append(message)
        if self.journal is not None:
            self.journal.add(message, self.timings[self._written :])
            self._written = len(self.timings)

    async def model(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        self.budget.start_turn()
        started = time.monotonic()
        try:
            completion = await self._answer(messages, tools, max_tokens)
        except ProviderError as exc:
            self._timed(started, model=self.llm.name, tokens_in=0, tokens_out=0, error=str(exc))
            raise
        except asyncio.CancelledError:
            self._timed(started, model=self.llm.name, tokens_in=0, tokens_out=0, error="interrupted")
            raise
        self.budget.spend(completion.usage)
        usage = completion.usage
        self._timed(
            started, model=completion.model or self.llm.name, tokens_in=usage.tokens_in, tokens_out=usage.tokens_out
        )
        return completion

    async def _answer(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        """The model's answer, within the call's deadline (the budget's) and the session's,
        whichever comes first (the call's, when they come together)."""
        wall = self.limits.wall_seconds
        left = wall - (time.monotonic() - self.budget.started)
        session = asyncio.timeout(left if left < self.limits.call_seconds else None)
        try:
            async with session:
                return await self.budget.wait_for_model(
                    self.llm.complete(messages, tools, self.budget.allowance(max_tokens))
                )
        except (ProviderError, LimitReached):
            raise
        except Exception as exc:  # the model's own fault (a scripted model set up wrong, a bug)
            if isinstance(exc, TimeoutError) and session.expired():
                raise ProviderError(
                    f"the session's wall time of {wall:g} seconds (wall_seconds) ran out while the model was answering"
                ) from None
            raise ProviderError(_failure(self.llm.name, exc)) from None

    def _timed(self, started: float, **call: Any) -> None:
        self.timings.append({"call": "model", **call, "seconds": round(time.monotonic() - started, 6)})

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


class SessionInterrupted(KeyboardInterrupt):
    """A session stopped by Ctrl-C or SIGTERM, recorded as interrupted: `record`."""

    def __init__(self, record: SessionRecord) -> None:
        super().__init__(record.error)
        self.record = record


def run_session(
    home: Home,
    profile_name: str,
    task: str,
    *,
    model: str | None = None,
    verify: str | None = None,
    wallet: str | None = None,
) -> SessionRecord:
    """Runs one live session and records it; returns the stored record. Raises
    SessionInterrupted, once it is recorded, for a session Ctrl-C or SIGTERM stopped."""
    killswitch.refuse_if_on(home, "session")
    store = open_sessions(home, write=True)  # a read-only home is refused before the session runs
    profile = load_profile(home, profile_name)
    spec = choose_model(profile, model)
    llm = make_model(spec, home, base_dir=profile.dir)
    toolbox = Toolbox(profile)
    signer_name = wallet or profile.wallet
    signer = load_wallet(home, signer_name)
    with open_ledger(home) as ledger:  # opened first: a ledger that does not open is said before the session runs
        record = _started(profile, task, spec)
        with store.start(record, signer_name) as journal:
            episode = LiveEpisode(llm, toolbox, profile.limits, journal)
            ending = asyncio.run(_until_stopped(run_case(profile.case(task), episode, episode.said), episode))
        record = protect(home, _ended(record, ending, episode))
        if verify and ending.ended == "done":
            record.check = "passed" if run_check(verify, record) else "failed"
        kept = keep(store, [record], signer, ledger)[0]
    if kept.interrupted:
        raise SessionInterrupted(kept)
    return kept


async def _until_stopped(session: Coroutine[Any, Any, Ending], episode: LiveEpisode) -> Ending:
    """Runs `session`; Ctrl-C or SIGTERM (heard on the main thread) stops it, and it ends
    as interrupted with every message said so far."""
    running, task = asyncio.get_running_loop(), asyncio.current_task()
    assert task is not None
    signals = (signal.SIGINT, signal.SIGTERM) if threading.current_thread() is threading.main_thread() else ()
    heard: list[signal.Signals] = []

    def stop(sig: signal.Signals) -> None:
        heard.append(sig)
        task.cancel()

    for sig in signals:
        running.add_signal_handler(sig, stop, sig)
    try:
        return await session
    except asyncio.CancelledError:
        if not heard:
            raise
        task.uncancel()
        error = interruption(f"stopped by {heard[0].name}", episode.transcript)
        return Ending("limit", messages=episode.transcript, error=error)
    finally:
        for sig in signals:
            running.remove_signal_handler(sig)


def _started(profile: Profile, task: str, spec: str) -> SessionRecord:
    """The record of a session as it starts: what it is asked, on what, with what tools."""
    return SessionRecord(
        id=new_id(),
        profile=profile.name,
        task=task,
        source="live",
        started_at=now(),
        ended_at="",
        ended="",
        models=[spec],
        tools=[t.info() for t in profile.tools],
        confidential=profile.confidential,
    )


def _ended(record: SessionRecord, ending: Ending, episode: LiveEpisode) -> SessionRecord:
    record.ended_at = now()
    record.ended = ending.ended
    record.answer = ending.answer
    record.error = ending.error
    record.tokens_in = episode.budget.usage.tokens_in
    record.tokens_out = episode.budget.usage.tokens_out
    record.turns = episode.budget.turns
    record.person_messages = person_messages(ending.messages)
    record.transcript = ending.messages
    record.timings = episode.timings
    return record


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
