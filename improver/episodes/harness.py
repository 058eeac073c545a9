"""The harness: runs one candidate on one task and scores the run.

A candidate is the agent runtime in-process (an `Agent`, injected by agentd/) or a
command speaking the JSON-lines protocol of improver.base.protocol on its stdin and stdout.
The harness answers its model requests from the variant's model (made by an injected
`ModelFactory`, tokens counted against the run's budget), answers its tool calls from
the task's stand-ins (keeping every call), enforces the limits (turns, tokens, wall
time, output size) and scores what it answered with the task's checks: a candidate
cannot claim a pass, it can only behave well.

A run comes out as one of three outcomes:
- passed: every check held;
- failed: the candidate's doing: a check did not hold, or it broke the run (a line that
  is not the protocol, a crash, an exit before saying it was done, flooding its output,
  not finishing within the wall time, a model request it shaped wrong). A broken run
  scores reward 0: there is no ending left to trust, and nothing should ever be paid
  for breaking the protocol;
- errored: not the candidate's doing: a model that failed through every retry or did
  not answer within the wall time, or a fault of the harness's own (a command that
  cannot be started, a model that cannot be made). Such a run is tried again a bounded
  number of times, then reported as an error: it is never scored as a failure. A model
  set up wrong (`ModelMisconfigured`: a scripted model with no rule for the
  conversation) fails the same way on every try, so its run is reported at once.

Were a request the candidate shaped an error when a provider refused it, a candidate
could hide every task it would fail behind one malformed request: errored runs are left
out of the counts. So a command's model requests are checked before they are sent
(`request_fault`: messages and tools in the chat format, `max_tokens` a positive count
within the run's limit), and a provider's refusal of a request as it was shaped
(`RequestRefused`: HTTP 400, 413, 422) is the candidate's failure too, its reason in the
run. Only a network, a provider that fails (5xx, 429, a time-out) or the harness and
sandbox themselves error a run. The in-process `Agent` is agentd's own runtime, which
shapes its requests itself: where a policy stands in for the model (improver.episodes.
openenv), a request of its that cannot go out is the environment's fault, not the
policy's, and errors the episode.

The wall time is the candidate's own: the time the harness spends waiting for the
model is not counted against it (see `improver.base.protocol.Budget`).

A conversation's simulated user (improver.tasks.simuser) is the harness's side too: its
tokens are not charged to the run's token limit, which covers the models the candidate
calls, but held to a limit of their own, as large, over the run's attempts together; a
simulated user that reaches it ends the run as errored. So one run of a task costs at
most `run_cost` tokens, what a token budget over many runs relies on. Its replies, each
with the agent's answer it replied to, and its tokens are kept in the run's result.

The case a candidate is sent is named opaquely, by the start of the task's digest: a
name like `canary-0` would tell a candidate that games its scoring which tasks are
traps. Results keep the task's own name.

A candidate program runs only in a sandbox (`sandbox.Runner`, injected with the
`Command`): its own uid, namespaces, limits and environment, nothing of the home, the
checkout or the task files; the case and the harness's answers on stdin are all it
sees of the task. What the sandbox ends it for (a limit, its output past the cap) is
its own doing, and its run fails; a sandbox that cannot be made is the harness's fault.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal

from improver.base.errors import ImproverError
from improver.base.protocol import (
    Agent,
    Budget,
    Case,
    Completion,
    EpisodeLimits,
    LimitReached,
    Model,
    ModelMisconfigured,
    ProviderError,
    RequestRefused,
    TokenUsage,
    completion_to_json,
    decode_line,
    encode_line,
)
from improver.base.variant import Variant
from improver.tasks import worlds
from improver.tasks.rubric import score_run
from improver.tasks.runs import Call, Run
from improver.tasks.simuser import USER_TURNS, continued, leaked, reply_of, user_view
from improver.tasks.task import Task
from improver.tasks.worlds import World, WorldFailed
from sandbox import OutputLimit, Process, Request, Result, Runner, SandboxError

ModelFactory = Callable[[str], Model]
RunOutcome = Literal["passed", "failed", "errored"]
RETRIES = 2  # an errored run is tried this many more times before it is reported
EXIT_GRACE = 5.0  # seconds a command has to exit after it said it was done
CASE_NAME_HEX = 16  # how much of the task's digest names the case a candidate is sent


@dataclass(frozen=True)
class Command:
    """A candidate program: started once per run in `runner`'s sandbox as `request`
    says (its argv, read-only paths, environment and limits), the case its first line
    on stdin. The harness sets the output cap and the wall time from the run's limits."""

    runner: Runner
    request: Request


Candidate = Agent | Command


class EpisodeAborted(ImproverError):
    """The side answering the candidate cannot go on (e.g. a trainer's policy sent a
    malformed line): the episode ends at once, unscored, and is not retried."""


@dataclass(frozen=True)
class RunResult:
    task: str
    outcome: RunOutcome
    reward: float
    failures: list[str]  # what went wrong: the checks that did not hold, how it broke
    run: Run  # its calls, answer and ending: done, asked, limit, errored or broken
    reason: str = ""  # why it ended so: the limit, the fault or the error
    usage: TokenUsage = TokenUsage()
    turns: int = 0
    attempts: int = 1
    retryable: bool = True  # for an errored run: whether another try could go otherwise
    leaked: bool = False  # errored because the simulated user gave the hidden part away
    # The conversation with the simulated user: each (the agent's answer, the person's
    # reply), in order; after a leak the last reply is the one that leaked, which the
    # agent never got. Its tokens are apart from `usage` (see the module's text).
    user: tuple[tuple[str, str], ...] = ()
    user_usage: TokenUsage = TokenUsage()

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    def to_json(self) -> dict[str, Any]:
        return {
            "task": self.task,
            "outcome": self.outcome,
            "reward": self.reward,
            "failures": self.failures,
            "calls": [c.to_json() for c in self.run.calls],
            "ended": {"how": self.run.ended, "answer": self.run.answer, "reason": self.reason},
            "tokens": {"in": self.usage.tokens_in, "out": self.usage.tokens_out},
            "turns": self.turns,
            "attempts": self.attempts,
            **({"leaked": True} if self.leaked else {}),
            **self.conversation_json(),
        }

    def conversation_json(self) -> dict[str, Any]:
        """What the simulated user said, to which answer, and the tokens it used."""
        return {
            "user": [{"answer": answer, "reply": reply} for answer, reply in self.user],
            "user_tokens": {"in": self.user_usage.tokens_in, "out": self.user_usage.tokens_out},
        }


def run_cost(task: Task, limits: EpisodeLimits) -> int:
    """The most tokens one run of `task` may cost, all its attempts together: the run's
    limit, and for a conversation as much again for its simulated user."""
    return limits.max_tokens * (2 if task.user is not None else 1)


ROLES = ("system", "developer", "user", "assistant", "tool")
SHOWN = 40  # characters of a wrong value a fault quotes


def request_fault(messages: Any, tools: Any, max_tokens: Any, limit: int) -> str | None:
    """What is wrong with a model request as a candidate shaped it, or None: messages and
    tools in the chat format (OpenAI's, which every provider here takes), `max_tokens` a
    whole number from 1 to the run's token `limit`, or null for the default."""
    if not isinstance(messages, list) or not messages:
        return f"messages must be a list of chat messages, at least one, not {_shown(messages)}"
    if not isinstance(tools, list):
        return f"tools must be a list of function tools, not {_shown(tools)}"
    faults = [(f"message {n}", _message_fault(m)) for n, m in enumerate(messages, 1)]
    faults += [(f"tool {n}", _tool_fault(t)) for n, t in enumerate(tools, 1)]
    where, fault = next(((w, f) for w, f in faults if f), ("", None))
    if fault:
        return f"{where}: {fault}"
    if max_tokens is not None and not (_whole(max_tokens) and 1 <= max_tokens <= limit):
        return (
            f"max_tokens must be a whole number from 1 to the run's limit of {limit}, or null, not {_shown(max_tokens)}"
        )
    return None


def _message_fault(message: Any) -> str | None:
    if not isinstance(message, dict):
        return f"not an object but {_shown(message)}"
    role, content, calls = message.get("role"), message.get("content"), message.get("tool_calls")
    if role not in ROLES:
        return f"role must be one of {', '.join(ROLES)}, not {_shown(role)}"
    if calls is not None and role != "assistant":
        return "only an assistant message has tool_calls"
    if calls is not None and (why := _calls_fault(calls)):
        return why
    if role == "assistant" and content is None:
        return None if calls else "an assistant message needs its content or its tool_calls"
    if not _text(content):
        return f"content must be text, or a list of text parts, not {_shown(content)}"
    if role == "tool" and not isinstance(message.get("tool_call_id"), str):
        return "a tool message needs the tool_call_id it answers, as text"
    return None


def _calls_fault(calls: Any) -> str | None:
    if not isinstance(calls, list):
        return f"tool_calls must be a list, not {_shown(calls)}"
    for n, call in enumerate(calls, 1):
        function = call.get("function") if isinstance(call, dict) else None
        if (
            not isinstance(function, dict)
            or not isinstance(call.get("id"), str)
            or call.get("type", "function") != "function"
            or not _name(function.get("name"))
            or not isinstance(function.get("arguments"), str)
        ):
            return f"tool call {n} must be {{id, type: function, function: {{name, arguments as text}}}}"
    return None


def _tool_fault(tool: Any) -> str | None:
    function = tool.get("function") if isinstance(tool, dict) else None
    if (
        not isinstance(function, dict)
        or tool.get("type") != "function"
        or not _name(function.get("name"))
        or not isinstance(function.get("description", ""), str)
        or not isinstance(function.get("parameters", {}), dict)
    ):
        return "must be {type: function, function: {name, description as text, parameters as an object}}"
    return None


def _text(content: Any) -> bool:
    """Text, or a list of text parts ({type: text, text}): what every provider here takes."""
    if isinstance(content, str):
        return True
    return isinstance(content, list) and all(
        isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content
    )


def _name(value: Any) -> bool:
    return isinstance(value, str) and bool(value)


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 1] + "…"


class TaskEpisode:
    """The episode side of one run: the variant's model and the task's stand-ins."""

    def __init__(
        self,
        task: Task,
        spec: str | None,
        models: ModelFactory,
        limits: EpisodeLimits,
        over_stdio: bool,
        user_tokens: int,
    ) -> None:
        self.task = task
        self.standins = task.stand_ins
        self.spec = spec
        self.models = models
        self.limits = limits
        self.budget = Budget(limits)
        self.calls: list[Call] = []
        self.output = 0
        # Over stdio every line the candidate writes is counted as it is read; in-process,
        # its tool calls' arguments and its answer are what it sends.
        self.counts_calls = not over_stdio
        self.error = ""  # a provider's or the harness's fault: the run errored
        self.final = False  # the error is one no retry mends
        self.limit = ""  # the limit the run reached
        self.fault = ""  # how the candidate broke the run
        self.leak = ""  # how the simulated user gave the hidden part away: the run errored
        self.turns_with_user: list[tuple[str, str]] = []  # (the agent's answer, the person's reply)
        self.user_tokens = user_tokens  # what the simulated user may spend in this attempt
        self.user_usage = TokenUsage()
        self._model: Model | None = None
        self.world: World | None = None  # the task's world, while the run has it (improver.tasks.worlds)

    async def model(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        if self.error or self.fault:  # a run already broken asks no model more
            raise ProviderError(self.error or self.fault)
        try:
            self.budget.start_turn()
        except LimitReached as exc:
            self.limit = str(exc)
            raise
        model = self._made()
        try:
            completion = await self.budget.wait_for_model(
                model.complete(messages, tools, self.budget.allowance(max_tokens))
            )
        except RequestRefused as exc:  # refused as the candidate shaped it: its doing, no infrastructure's
            self.fault = f"sent a model request the provider refused ({exc})"
            raise
        except ProviderError as exc:
            self.error = f"{self.spec}: {exc}"
            raise
        except LimitReached as exc:
            self.limit = str(exc)
            raise
        except EpisodeAborted:
            raise
        except ModelMisconfigured as exc:
            self.error, self.final = str(exc), True
            raise ProviderError(self.error) from None
        except Exception as exc:  # the injected model's own fault, never the candidate's
            self.error = f"{self.spec} failed: {type(exc).__name__}: {exc}"
            raise ProviderError(self.error) from None
        self.budget.spend(completion.usage)
        return completion

    def _made(self) -> Model:
        if self._model is None:
            try:
                if self.spec is None:
                    raise ImproverError("the variant has no model to run on")
                self._model = self.models(self.spec)
            except Exception as exc:  # a model that cannot be made is the harness's fault
                self.error = f"cannot make the model {self.spec}: {exc}"
                raise ProviderError(self.error) from None
        return self._model

    async def tool(self, call_id: str, name: str, arguments: str) -> str:
        try:
            self.budget.check_time()
        except LimitReached as exc:
            self.limit = str(exc)
            raise
        call = Call.from_text(name, arguments)
        self.calls.append(call)
        if self.counts_calls:
            self.count_output(len(arguments.encode()))
        if self.world is None:
            return self.standins.answer(call)
        try:
            return await self.world.answer(call.tool, call.arguments)
        except WorldFailed as exc:  # the harness's side failed: the run errors, never the candidate's
            self.error = str(exc)
            raise ProviderError(self.error) from None

    async def person(self, answer: str) -> str | None:
        """The simulated user's reply to the agent's `answer`, or None when the task has
        none, it has nothing more to say, it had its turns, or it failed (the run errored)
        or leaked. Its time is the model's, not the candidate's; its tokens are not the
        candidate's either, but held to the simulated user's own limit."""
        user = self.task.user
        if user is None or self.error or len(self.turns_with_user) >= USER_TURNS:
            return None
        left = self.user_tokens - self.user_usage.total
        if left <= 0:
            self.error, self.final = (
                "the simulated user used up the tokens it may spend in a run before the conversation ended",
                True,
            )
            return None
        view = user_view(user, self.task.task, [*self.turns_with_user, (answer, None)])
        try:
            model = self.models(user.model)
            completion = await self.budget.wait_for_model(
                model.complete(view, [], min(self.budget.limits.call_tokens, left))
            )
        except ModelMisconfigured as exc:
            self.error, self.final = f"the simulated user: {exc}", True
            return None
        except Exception as exc:  # the simulated user is the harness's side: never the candidate's fault
            self.error = f"the simulated user ({user.model}) failed: {type(exc).__name__}: {exc}"
            return None
        self.user_usage = self.user_usage + completion.usage
        reply = reply_of(completion)
        if reply is None:
            return None
        if leaked(user, [said for _, said in self.turns_with_user], reply):
            which = "its first reply" if not self.turns_with_user else f"reply {len(self.turns_with_user) + 1}"
            self.leak = (
                f"the simulated user gave away all of the hidden part of the task it had yet to say at once, in {which}"
            )
            self.turns_with_user.append((answer, reply))  # kept for the record; the agent never gets it
            return None
        self.turns_with_user.append((answer, reply))
        return reply

    def count_output(self, size: int) -> None:
        """Output is what the candidate sends the harness; a flood breaks the run."""
        self.output += size
        if self.output > self.limits.max_output_bytes and not self.fault:
            self.fault = f"flooded its output: more than {self.limits.max_output_bytes} bytes"
            raise LimitReached(self.fault)


@dataclass
class CandidateEnd:
    """How the candidate's side ended, before scoring."""

    how: str = "done"
    answer: str = ""
    reason: str = ""


def case_for(task: Task, variant: Variant, limits: EpisodeLimits) -> Case:
    return Case(
        name=task.digest[:CASE_NAME_HEX],
        task=task.task,
        tools=task.schemas(),
        operator=variant.operator,
        lessons=variant.lessons,
        limits=limits,
    )


async def run_task(
    task: Task,
    variant: Variant,
    candidate: Candidate,
    models: ModelFactory,
    limits: EpisodeLimits = EpisodeLimits(),
    retries: int = RETRIES,
) -> RunResult:
    """Runs `candidate` on `task` as `variant` configures it; an errored run is tried
    again up to `retries` times before it is reported as errored. Its attempts share the
    run's token limit and are counted together, and so do its simulated user's, so a run
    never costs more than `run_cost` (what a token budget relies on). A retry that uses
    up what the errored attempts left it without passing is reported as the errored run
    it retried, never scored as a failure: a fresh run would have had the whole limit."""
    attempt, spent, user_spent = 1, TokenUsage(), TokenUsage()
    errored: RunResult | None = None
    while True:
        left = replace(limits, max_tokens=limits.max_tokens - spent.total)
        user_left = run_cost(task, limits) - limits.max_tokens - user_spent.total
        result = await attempt_task(task, variant, candidate, models, left, attempt, user_left)
        spent, user_spent = spent + result.usage, user_spent + result.user_usage
        if errored is not None and not result.passed and spent.total >= limits.max_tokens:
            return replace(errored, usage=spent, user_usage=user_spent, attempts=attempt)
        if result.outcome != "errored" or not result.retryable or attempt > retries or spent.total >= limits.max_tokens:
            return replace(result, usage=spent, user_usage=user_spent)
        errored, attempt = result, attempt + 1


async def attempt_task(
    task: Task,
    variant: Variant,
    candidate: Candidate,
    models: ModelFactory,
    limits: EpisodeLimits,
    attempt: int,
    user_tokens: int,
) -> RunResult:
    """One attempt of a run; `user_tokens` is what its simulated user may spend in it."""
    over_stdio = isinstance(candidate, Command)
    episode = TaskEpisode(task, variant.models[0] if variant.models else None, models, limits, over_stdio, user_tokens)
    case = case_for(task, variant, limits)
    if task.world is not None:
        try:
            episode.world = await worlds.pool().take(task.world)
        except WorldFailed as exc:
            episode.error = str(exc)
            return _scored(task, episode, CandidateEnd("errored"), attempt)
    if isinstance(candidate, Command):
        ended = await _run_command(candidate, case, episode)
    else:
        ended = await _run_agent(candidate, case, episode)
    return _scored(task, episode, ended, attempt, await _world_state(episode))


async def _world_state(episode: TaskEpisode) -> str:
    """The state the run left its world in; the world goes back to the pool only when
    it answered to the end (one that failed errors the run, and is ended)."""
    world, episode.world = episode.world, None
    if world is None:
        return ""
    try:
        state = await world.state() if not episode.error else ""
    except WorldFailed as exc:
        episode.error = str(exc)
        state = ""
    if episode.error:
        await worlds.pool().discard(world)
    else:
        worlds.pool().give_back(world)
    return state


def _scored(task: Task, episode: TaskEpisode, ended: CandidateEnd, attempt: int, state: str = "") -> RunResult:
    result = _judged(task, episode, ended, attempt, state)
    return replace(result, user=tuple(episode.turns_with_user), user_usage=episode.user_usage)


def _judged(task: Task, episode: TaskEpisode, ended: CandidateEnd, attempt: int, state: str) -> RunResult:
    usage, turns, calls = episode.budget.usage, episode.budget.turns, tuple(episode.calls)
    if episode.leak:
        # Not the candidate's doing and no test of it: errored, never scored, not retried
        # (the same model under the same instructions would likely leak again).
        run = Run(calls, ended.answer, "errored")
        return RunResult(task.name, "errored", 0.0, [], run, episode.leak, usage, turns, attempt, False, leaked=True)
    if episode.error:
        run = Run(calls, ended.answer, "errored")
        return RunResult(task.name, "errored", 0.0, [], run, episode.error, usage, turns, attempt, not episode.final)
    if episode.fault:
        run = Run(calls, ended.answer, "broken", state=state)
        checked = score_run(task.checks, task.tools, run, task.rubric)
        failures = [f"the candidate broke the run: it {episode.fault}", *checked.failures]
        return RunResult(task.name, "failed", 0.0, failures, run, episode.fault, usage, turns, attempt)
    how = "limit" if episode.limit else ended.how
    run = Run(calls, ended.answer, how, state=state)
    checked = score_run(task.checks, task.tools, run, task.rubric)
    outcome: RunOutcome = "passed" if checked.passed else "failed"
    reason = episode.limit or ended.reason
    return RunResult(task.name, outcome, checked.reward, checked.failures, run, reason, usage, turns, attempt)


async def _run_agent(agent: Agent, case: Case, episode: TaskEpisode) -> CandidateEnd:
    wall = case.limits.wall_seconds
    try:
        async with asyncio.timeout(wall) as timer:
            episode.budget.enforce(timer)
            ending = await agent(case, episode)
            while ending.ended in ("done", "asked") and (reply := await episode.person(ending.answer)) is not None:
                ending = await agent(replace(case, conversation=continued(ending.messages, reply)), episode)
    except EpisodeAborted:
        raise
    except TimeoutError:
        episode.fault = episode.fault or f"did not finish within {wall:g} seconds"
        return CandidateEnd("broken")
    except Exception as exc:  # the candidate crashed: its doing, and a failed run
        episode.fault = episode.fault or f"crashed: {type(exc).__name__}: {exc}"
        return CandidateEnd("broken")
    if ending.ended == "errored" and not episode.error:
        # Only the harness knows whether a model failed; a candidate cannot claim it.
        episode.fault = episode.fault or "said it errored, though no model failed under it"
    with contextlib.suppress(LimitReached):
        episode.count_output(len(ending.answer.encode()))
    return CandidateEnd(ending.ended, ending.answer, ending.error)


async def _run_command(command: Command, case: Case, episode: TaskEpisode) -> CandidateEnd:
    try:
        process = await command.runner.start(_bounded(command, case.limits))
    except SandboxError as exc:
        episode.error = f"cannot start the candidate {command.request.argv[0]!r}: {exc}"
        return CandidateEnd("errored")
    wall = case.limits.wall_seconds
    ended = CandidateEnd("broken")
    async with process:
        try:
            async with asyncio.timeout(wall) as timer:
                episode.budget.enforce(timer)
                ended = await _converse(process, case, episode)
        except TimeoutError:
            episode.fault = episode.fault or f"did not finish within {wall:g} seconds"
        finally:
            process.close_input()
            # A candidate that ended cleanly gets a moment to exit; any other is killed now.
            await (process.finish(EXIT_GRACE) if ended.how in ("done", "asked") else process.kill())
    return ended


def _bounded(command: Command, limits: EpisodeLimits) -> Request:
    """The request with the run's output cap, and a wall time that only backs up the
    harness's own: the candidate's time excludes the model's, which may take as long
    again on every turn."""
    sandboxed = command.request.limits or command.runner.limits
    backstop = limits.wall_seconds * (limits.max_turns + 2) + EXIT_GRACE
    return replace(
        command.request, limits=replace(sandboxed, output_bytes=limits.max_output_bytes, wall_seconds=backstop)
    )


async def _converse(process: Process, case: Case, episode: TaskEpisode) -> CandidateEnd:
    await process.send(encode_line("case", case.to_json()))
    while True:
        try:
            line = await process.readline()
        except OutputLimit:
            episode.fault = f"flooded its output: more than {case.limits.max_output_bytes} bytes"
            return CandidateEnd("broken")
        if not line:
            return await _gone(process, episode)
        try:
            episode.count_output(len(line))
        except LimitReached:
            return CandidateEnd("broken")
        try:
            kind, payload = decode_line(line)
        except ValueError as exc:
            episode.fault = f"sent a line that is not the protocol ({exc}): {_quote(line)}"
            return CandidateEnd("broken")
        if kind in ("done", "ask"):
            ended = (
                CandidateEnd("done", str(payload.get("answer") or ""))
                if kind == "done"
                else CandidateEnd("asked", str(payload.get("question") or ""))
            )
            reply = await episode.person(ended.answer)
            if reply is None:
                return ended
            await process.send(encode_line("user", {"content": reply}))
            continue
        if kind == "model":
            response = await _answer_model(payload, episode)
        elif kind == "tool":
            response = await _answer_tool(payload, episode)
        else:
            episode.fault = f"sent {kind!r}, which the protocol does not have"
            return CandidateEnd("broken")
        if response is None:
            return CandidateEnd("broken")
        await process.send(encode_line(*response))


async def _answer_model(payload: dict[str, Any], episode: TaskEpisode) -> tuple[str, dict[str, Any]] | None:
    messages: Any = payload.get("messages")  # of any shape until request_fault says it is a list
    tools, max_tokens = payload.get("tools", []), payload.get("max_tokens")
    fault = request_fault(messages, tools, max_tokens, episode.limits.max_tokens)
    if fault:
        episode.fault = f"sent a malformed model request: {fault}"
        return None
    try:
        completion = await episode.model(messages, tools, max_tokens)
    except ProviderError as exc:
        if episode.fault:  # the candidate's own request: the run ends, failed
            return None
        return "error", {"kind": "provider", "message": str(exc)}
    except LimitReached as exc:
        return "error", {"kind": "limit", "message": str(exc)}
    return "completion", completion_to_json(completion)


async def _answer_tool(payload: dict[str, Any], episode: TaskEpisode) -> tuple[str, dict[str, Any]] | None:
    call_id, name, arguments = payload.get("id"), payload.get("name"), payload.get("arguments")
    if not isinstance(name, str) or not isinstance(arguments, str):
        episode.fault = "sent a tool call without a name and its arguments as text"
        return None
    try:
        answer = await episode.tool(str(call_id or ""), name, arguments)
    except ProviderError:  # the task's world failed: the run errors (episode.error says why)
        return None
    except LimitReached as exc:
        if episode.fault:
            return None
        return "error", {"kind": "limit", "message": str(exc)}
    return "result", {"content": answer}


async def _gone(process: Process, episode: TaskEpisode) -> CandidateEnd:
    """The candidate closed its output. After an error reply it may: that is how it ends."""
    result = await process.finish(EXIT_GRACE)
    if episode.error or episode.limit:
        return CandidateEnd("limit", reason=episode.limit)
    episode.fault = f"exited before it said it was done or asked a person ({_how(result)})"
    return CandidateEnd("broken")


def _how(result: Result) -> str:
    if result.why != "exited":
        return result.describe()
    tail = result.stderr.decode(errors="replace").strip().splitlines()[-1:]
    said = f": {tail[0][:300]}" if tail else ""
    return f"exit status {result.status}{said}"


def _quote(line: bytes) -> str:
    text = line.decode(errors="replace").rstrip("\n")
    return repr(text[:80] + ("..." if len(text) > 80 else ""))
