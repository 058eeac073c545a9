"""The tasks as an OpenEnv environment, served over HTTP and WebSocket for a trainer.

OpenEnv (Hugging Face's environment protocol, the Gym reset/step/state calls over a
network) has a persistent WebSocket session at `/ws` and stateless HTTP calls beside it.
Here an episode is one task run exactly as the loop scores it (improver.episodes.harness: the
agent runtime, the task's stand-ins and checks), with the policy supplying the model's
turns, as `agentd improve env` does over stdio (improver.episodes.env).

WebSocket frames, `{"type": ..., "data": ...}` (-> from the client, <- from the server):

    -> {"type": "reset", "data": {"task_id": "work-3"}}      (or {"seed": 7}, or {})
    <- {"type": "observation", "data": {"observation": {..., "request": {"messages":
        [...], "tools": [...], "max_tokens": 4096}}, "reward": null, "done": false}}
    -> {"type": "step", "data": {"message": {"role": "assistant", "content": "Paid."}}}
    <- {"type": "observation", "data": {"observation": {..., "outcome": "passed"},
        "reward": 1.0, "done": true}}
    -> {"type": "state"}   <- {"type": "state", "data": {"episode_id": ..., "step_count": 1, ...}}
    -> {"type": "close"}

`reset` picks the task named `task_id`, else the one `seed` picks, else the next in the
set's order. Every observation carries the request the agent would send its model; the
last has `done` true and the reward, the share of the task's checks that held, and in
a conversation `user` and `user_tokens` as in `agentd improve env`'s done line (the
simulated user's replies and what its model used; `leaked` true instead when it gave
the hidden part away, which errors the episode). An
episode the harness could not run (an infrastructure fault, not the policy's doing)
ends with `done` true, outcome "errored" and reward null: a trainer drops it, it is
never a reward of 0. A frame that is not JSON, not a known type or not a valid action
gets `{"type": "error", "data": {"message", "code"}}` and the session goes on.

A connection with no episode under way (none reset yet, or the last one over) that
sends nothing for the idle timeout (IDLE_SECONDS unless the server is given another) is
closed with code 1008 (policy violation, RFC 6455) and a reason that says so, so that
connections never used do not hold sessions for ever. In an episode the client's turn
timeout (the episode's wall_seconds) governs instead: a silent client ends its episode
(which is then over, and the idle timeout runs).

HTTP: `GET /health`, `/metadata`, `/schema`, `/state`; `POST /reset` (the first
observation of a task, the episode then dropped) and `POST /step`, stateless: its action
names the task and the policy's earlier messages (`history`), which are replayed (the
stand-ins answer the same every time) before the new message is taken. Every HTTP
connection is held to the limits the server is given (`http`, improver.base.serving's):
deadlines on a request's head, on its body and on an idle connection, and a body cap
(8 MiB unless given another; 413 with `{"detail": ...}` past it).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from random import Random
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.types import Message
from starlette.websockets import WebSocket, WebSocketDisconnect

from improver.base.errors import ImproverError
from improver.base.nesting import loads_bounded
from improver.base.protocol import DEFAULT_MAX_TOKENS, Agent, Completion, EpisodeLimits, TokenUsage
from improver.base.serving import HttpLimits, ServerConfig
from improver.base.variant import Variant
from improver.episodes.env import POLICY, POLICY_GRACE, checked_message, episode_models
from improver.episodes.harness import EpisodeAborted, ModelFactory, RunResult, run_task
from improver.tasks.task import Task, TaskSet

ENV_NAME = "agentd-tasks"
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8471
MAX_SESSIONS = 256  # WebSocket sessions at once; one more is refused with CAPACITY_REACHED
IDLE_SECONDS = 300.0  # a connection with no episode under way that sends nothing this long is closed
IDLE_CLOSE = 1008  # RFC 6455 "policy violation": the server's idle rule ended it, not the client
BACKLOG = 2048
MAX_EPISODE_ID = 255

MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The policy's turn: an assistant message in OpenAI chat format.",
    "properties": {
        "role": {"const": "assistant"},
        "content": {"type": ["string", "null"]},
        "tool_calls": {"type": "array", "items": {"type": "object"}},
    },
}
ACTION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "message": MESSAGE_SCHEMA,
        "task_id": {"type": "string", "description": "HTTP /step only: the task the episode runs."},
        "history": {"type": "array", "items": MESSAGE_SCHEMA, "description": "HTTP /step only: the earlier turns."},
        "metadata": {"type": "object"},
    },
    "required": ["message"],
    "additionalProperties": False,
}
OBSERVATION_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "task_id": {"type": "string"},
        "episode_id": {"type": "string"},
        "turn": {"type": "integer", "description": "The model turns asked for so far."},
        "request": {
            "type": ["object", "null"],
            "description": "What the agent sends its model this turn: messages, tools, max_tokens; null when done.",
        },
        "outcome": {"enum": [None, "passed", "failed", "errored"]},
        "failures": {"type": "array", "items": {"type": "string"}, "description": "The checks that did not hold."},
        "calls": {"type": "integer", "description": "The tool calls the run made."},
        "ended": {"type": ["object", "null"], "description": "How the run ended: how, answer, reason."},
        "error": {"type": "string", "description": "For an errored episode: the fault (drop the episode)."},
    },
}
STATE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "episode_id": {"type": ["string", "null"]},
        "step_count": {"type": "integer"},
        "task_id": {"type": ["string", "null"]},
        "done": {"type": "boolean"},
        "outcome": {"enum": [None, "passed", "failed", "errored"]},
    },
}


class BadRequest(ImproverError):
    """What the client sent cannot be acted on; the message says why and what to send."""


@dataclass(frozen=True)
class EnvSetup:
    """What every episode of the server runs with."""

    taskset: TaskSet
    agent: Agent
    lessons: str = ""
    limits: EpisodeLimits = EpisodeLimits()
    users: ModelFactory | None = None  # makes conversations' simulated users (improver.episodes.env.episode_models)


class PolicyTurns:
    """The model, as the client answers it: each request waits in a queue for the
    session to send, each answer comes back through another."""

    name = POLICY

    def __init__(self, timeout: float) -> None:
        self.requests: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.answers: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self.timeout = timeout  # a client silent longer than this on a turn ends the episode
        self.turn = 0

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        self.turn += 1
        request = {"messages": list(messages), "tools": tools, "max_tokens": max_tokens or DEFAULT_MAX_TOKENS}
        # A request that cannot go out as JSON is the episode's fault: raised here, the
        # harness reports the run as errored rather than scoring it.
        json.dumps(request, allow_nan=False)
        self.requests.put_nowait(request)
        try:
            message = await asyncio.wait_for(self.answers.get(), self.timeout)
        except TimeoutError:
            raise EpisodeAborted(
                f"turn {self.turn}: the policy did not answer within {self.timeout:g} seconds"
            ) from None
        return Completion(message, TokenUsage(), POLICY)


class Session:
    """One episode: the harness runs the task as a coroutine, which waits on the client
    at every model turn."""

    def __init__(self, setup: EnvSetup, task: Task, episode_id: str) -> None:
        self.task = task
        self.episode_id = episode_id
        self.turns = PolicyTurns(setup.limits.wall_seconds)
        self.steps = 0
        self.result: RunResult | None = None
        variant = Variant(setup.taskset.operator, setup.lessons, (POLICY,))
        # The harness allows a model call wall_seconds before calling it a fault; here
        # the model is the client, whose own clock (PolicyTurns) must run out first.
        limits = replace(setup.limits, wall_seconds=setup.limits.wall_seconds + POLICY_GRACE)
        models = episode_models(self.turns, setup.users)
        self.run = asyncio.ensure_future(run_task(task, variant, setup.agent, models, limits, retries=0))

    async def first(self) -> dict[str, Any]:
        return await self._next()

    async def step(self, message: dict[str, Any]) -> dict[str, Any]:
        if self.result is not None:
            raise BadRequest(f"the episode is over (it ended at turn {self.turns.turn}); reset to start another")
        try:
            checked = checked_message(message, self.turns.turn)
        except EpisodeAborted as exc:
            raise BadRequest(str(exc)) from None
        if self.run.done():
            self._ended()  # the client was too slow: says so
        self.turns.answers.put_nowait(checked)
        self.steps += 1
        return await self._next()

    def state(self) -> dict[str, Any]:
        return {
            "episode_id": self.episode_id,
            "step_count": self.steps,
            "task_id": self.task.name,
            "done": self.result is not None,
            "outcome": self.result.outcome if self.result else None,
        }

    async def close(self) -> None:
        """Ends the episode wherever it is (the client closed, or reset to another)."""
        self.run.cancel()
        await asyncio.gather(self.run, return_exceptions=True)

    async def _next(self) -> dict[str, Any]:
        asked = asyncio.ensure_future(self.turns.requests.get())
        await asyncio.wait({asked, self.run}, return_when=asyncio.FIRST_COMPLETED)
        if asked.done():
            return self._observation(asked.result())
        asked.cancel()
        return self._ended()

    def _observation(self, request: dict[str, Any]) -> dict[str, Any]:
        observation = {
            "task_id": self.task.name,
            "episode_id": self.episode_id,
            "turn": self.turns.turn,
            "request": request,
            "outcome": None,
            "failures": [],
            "calls": 0,
            "ended": None,
            "error": "",
        }
        return {"observation": observation, "reward": None, "done": False}

    def _ended(self) -> dict[str, Any]:
        try:
            result = self.run.result()
        except EpisodeAborted as exc:
            raise BadRequest(f"the episode ended: {exc}; reset to start another") from None
        self.result = result
        errored = result.outcome == "errored"
        observation = {
            "task_id": self.task.name,
            "episode_id": self.episode_id,
            "turn": self.turns.turn,
            "request": None,
            "outcome": result.outcome,
            "failures": result.failures,
            "calls": len(result.run.calls),
            "ended": {"how": result.run.ended, "answer": result.run.answer, "reason": result.reason},
            "error": f"the episode could not be run (not the policy's doing): {result.reason}" if errored else "",
            # A leaked reply is never passed on: the episode only says it leaked.
            **({"leaked": True} if result.leaked else result.conversation_json()),
        }
        return {"observation": observation, "reward": None if errored else result.reward, "done": True}


def error_frame(code: str, message: str) -> dict[str, Any]:
    return {"type": "error", "data": {"message": message, "code": code}}


class Connection:
    """One WebSocket client: at most one episode at a time, a new reset ending the last."""

    def __init__(self, server: EnvServer) -> None:
        self.server = server
        self.session: Session | None = None

    async def handle(self, text: str) -> dict[str, Any] | None:
        """The reply to one frame; None for `close`."""
        try:
            frame = loads_bounded(text)
        except ValueError as exc:  # not JSON, too deep, or a number too long to read
            return error_frame("INVALID_JSON", f"not a JSON frame: {exc}")
        if not isinstance(frame, dict):
            return error_frame("VALIDATION_ERROR", 'a frame is a JSON object {"type": ..., "data": ...}')
        kind = frame.get("type")
        try:
            if kind == "reset":
                return {"type": "observation", "data": await self._reset(frame.get("data", {}))}
            if kind == "step":
                if self.session is None:
                    raise BadRequest("no episode yet: send a reset first")
                message = action_message(frame.get("data"), stateless=False)[0]
                return {"type": "observation", "data": await self.session.step(message)}
            if kind == "state":
                return {"type": "state", "data": self.session.state() if self.session else empty_state()}
            if kind == "close":
                return None
        except BadRequest as exc:
            return error_frame("VALIDATION_ERROR", str(exc))
        return error_frame("UNKNOWN_TYPE", f"unknown message type {kind!r}; the types are reset, step, state and close")

    async def _reset(self, data: Any) -> dict[str, Any]:
        task, episode_id = self.server.choose(data)
        await self.close()
        self.session = Session(self.server.setup, task, episode_id)
        return await self.session.first()

    @property
    def in_episode(self) -> bool:
        """An episode is under way: reset, and neither finished nor ended by its turn timeout."""
        return self.session is not None and not self.session.run.done()

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()
            self.session = None


def empty_state() -> dict[str, Any]:
    return {"episode_id": None, "step_count": 0, "task_id": None, "done": False, "outcome": None}


def action_message(data: Any, stateless: bool) -> tuple[dict[str, Any], str | None, list[Any]]:
    """An action's message, and for a stateless step its task and history."""
    shape = '{"message": {"role": "assistant", "content": ..., "tool_calls": [...]}}'
    if not isinstance(data, dict) or not isinstance(data.get("message"), dict):
        raise BadRequest(f"an action is {shape}")
    allowed = {"message", "metadata"} | ({"task_id", "history"} if stateless else set())
    unknown = sorted(set(data) - allowed)
    if unknown:
        where = "" if stateless else " (task_id and history are for the stateless HTTP /step)"
        raise BadRequest(f"unknown action field {unknown[0]!r}{where}; an action is {shape}")
    history = data.get("history", [])
    if not isinstance(history, list) or not all(isinstance(m, dict) for m in history):
        raise BadRequest("history must be a list of the policy's earlier messages")
    task_id = data.get("task_id")
    if stateless and not isinstance(task_id, str):
        raise BadRequest("a stateless step names its task: add task_id (the observation's task_id)")
    return data["message"], task_id, history


class EnvServer:
    """The environment's sessions and routes, over one task set."""

    def __init__(
        self,
        setup: EnvSetup,
        max_sessions: int = MAX_SESSIONS,
        idle_seconds: float = IDLE_SECONDS,
        http: HttpLimits | None = None,
    ) -> None:
        if not setup.taskset.tasks:
            raise ImproverError(
                "the task set holds no tasks to serve (validation excluded them all, or none were harvested)"
            )
        if max_sessions < 1:
            raise ImproverError("max sessions must be at least 1")
        if not idle_seconds > 0:
            raise ImproverError(f"the idle timeout must be more than 0 seconds, not {idle_seconds:g}")
        self.setup = setup
        self.max_sessions = max_sessions
        self.idle_seconds = idle_seconds
        self.http = http or HttpLimits()
        self.active = 0
        self.turn = 0  # the next task a reset without task_id or seed gets
        self._uvicorn: QuietExit | None = None
        self._stopping = False

    def choose(self, data: Any) -> tuple[Task, str]:
        """The task and episode id a reset asks for."""
        if not isinstance(data, dict):
            raise BadRequest('reset data is {"task_id": ...} or {"seed": ...} or {}, with an optional episode_id')
        tasks = self.setup.taskset.tasks
        task_id, seed, episode_id = data.get("task_id"), data.get("seed"), data.get("episode_id")
        if task_id is not None:
            if not isinstance(task_id, str):
                raise BadRequest("task_id must be a task's name")
            try:
                task = self.setup.taskset.get(task_id)
            except ImproverError as exc:
                raise BadRequest(str(exc)) from None
        elif seed is not None:
            if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
                raise BadRequest("seed must be a whole number, 0 or more")
            task = tasks[Random(seed).randrange(len(tasks))]
        else:
            task = tasks[self.turn % len(tasks)]
            self.turn += 1
        if episode_id is None:
            episode_id = uuid.uuid4().hex
        if not isinstance(episode_id, str) or not episode_id or len(episode_id) > MAX_EPISODE_ID:
            raise BadRequest(f"episode_id must be text of 1 to {MAX_EPISODE_ID} characters")
        return task, episode_id

    async def websocket(self, ws: WebSocket) -> None:
        await ws.accept()
        if self.active >= self.max_sessions:
            await self._refuse(ws)
            return
        self.active += 1
        connection = Connection(self)
        # One receive is kept waiting across the idle checks: waiting again on the same
        # one loses no frame that arrives as a check times out.
        receiving: asyncio.Future[Message] | None = None
        idle = False
        try:
            while True:
                receiving = receiving or asyncio.ensure_future(ws.receive())
                await asyncio.wait({receiving}, timeout=self.idle_seconds)
                if not receiving.done():
                    if connection.in_episode:
                        continue  # the episode's turn timeout governs a client mid-episode
                    idle = True
                    break
                text = _text(receiving.result())
                receiving = None
                if text is None:
                    break
                reply = await connection.handle(text)
                if reply is None:
                    break
                await ws.send_text(json.dumps(reply, ensure_ascii=False))
        except (WebSocketDisconnect, RuntimeError, OSError):
            pass  # the client went away mid-frame; its episode ends below
        finally:
            self.active -= 1
            if receiving is not None:
                receiving.cancel()
                await asyncio.gather(receiving, return_exceptions=True)
            await connection.close()
        await (_close(ws, IDLE_CLOSE, self._idle_reason()) if idle else _close(ws))

    def _idle_reason(self) -> str:
        # A close frame's reason is at most 123 bytes of UTF-8 (RFC 6455, 5.5).
        return f"idle {self.idle_seconds:g} s with no episode: reset within that, or reconnect"

    async def _refuse(self, ws: WebSocket) -> None:
        """Tells a client over capacity so in answer to its first frame (a frame sent
        before it asked could race its own first send), then closes."""
        busy = error_frame(
            "CAPACITY_REACHED", f"the server runs {self.max_sessions} sessions at once; try again when one closes"
        )
        busy["data"].update({"active_sessions": self.active, "max_sessions": self.max_sessions})
        try:
            if _text(await asyncio.wait_for(ws.receive(), self.idle_seconds)) is not None:
                await ws.send_text(json.dumps(busy))
        except TimeoutError:  # it never asked: closed as any idle connection is
            await _close(ws, IDLE_CLOSE, self._idle_reason())
            return
        except Exception:  # the client is gone: nothing to tell it
            return
        await _close(ws)

    async def reset(self, data: Any) -> dict[str, Any]:
        """The stateless HTTP reset: a task's first observation."""
        task, episode_id = self.choose(data)
        session = Session(self.setup, task, episode_id)
        try:
            return await session.first()
        finally:
            await session.close()

    async def step(self, data: Any) -> dict[str, Any]:
        """The stateless HTTP step: the episode replayed up to the action's message."""
        if not isinstance(data, dict):
            raise BadRequest('a step is {"action": {"task_id": ..., "history": [...], "message": {...}}}')
        message, task_id, history = action_message(data.get("action"), stateless=True)
        task, episode_id = self.choose({"task_id": task_id})
        session = Session(self.setup, task, episode_id)
        try:
            observation = await session.first()
            for index, earlier in enumerate(history, 1):
                if observation["done"]:
                    raise BadRequest(f"the episode ended before history message {index}: send only the turns it took")
                try:
                    observation = await session.step(earlier)
                except BadRequest as exc:
                    raise BadRequest(f"history message {index}: {exc}") from None
            if observation["done"]:
                raise BadRequest(
                    f"the episode ended with history message {len(history)}: the message has no turn left to take"
                )
            return await session.step(message)
        finally:
            await session.close()

    def metadata(self) -> dict[str, Any]:
        taskset = self.setup.taskset
        return {
            "name": ENV_NAME,
            "description": (
                f"{len(taskset.tasks)} tasks of profile {taskset.profile} (set {taskset.digest[:16]}): "
                "the policy gives the agent's model turns; the reward is the share of the task's checks that held"
            ),
            "version": "1",
        }

    def app(self) -> Starlette:
        async def body(request: Request) -> Any:
            raw = await request.body()  # at most http.body_bytes: ServerConfig's cap answered any more
            if not raw.strip():
                return {}
            try:
                return loads_bounded(raw)
            except ValueError as exc:  # not JSON, not UTF-8, too deep, or a number too long to read
                raise BadRequest(f"the body is not JSON: {exc}") from None

        def answer(call: Callable[[Any], Any]) -> Callable[[Request], Any]:
            async def endpoint(request: Request) -> JSONResponse:
                try:
                    return JSONResponse(await call(await body(request)))
                except BadRequest as exc:
                    return JSONResponse({"detail": str(exc)}, status_code=422)

            return endpoint

        def fixed(value: Any) -> Callable[[Request], Any]:
            """A route whose answer never changes: its bytes made once, served as they are."""
            answer = JSONResponse(value)

            async def endpoint(_request: Request) -> Response:
                return Response(answer.body, media_type=answer.media_type)

            return endpoint

        schemas = {"action": ACTION_SCHEMA, "observation": OBSERVATION_SCHEMA, "state": STATE_SCHEMA}
        routes = [
            Route("/health", fixed({"status": "healthy"})),
            Route("/metadata", fixed(self.metadata())),
            Route("/schema", fixed(schemas)),
            Route("/state", fixed(empty_state())),
            Route("/reset", answer(self.reset), methods=["POST"]),
            Route("/step", answer(self.step), methods=["POST"]),
            WebSocketRoute("/ws", self.websocket),
        ]
        return Starlette(routes=routes)

    async def serve(self, sock: socket.socket) -> None:
        """Serves on a socket from `listen` until `stop` (or SIGINT/SIGTERM in the main thread)."""
        config = ServerConfig(
            self.app(), self.http, errors="detail", log_level="warning", lifespan="off", backlog=BACKLOG
        )
        self._uvicorn = QuietExit(config)
        self._uvicorn.should_exit = self._stopping
        await self._uvicorn.serve(sockets=[sock])

    def stop(self) -> None:
        """Asks the server to finish (from any thread; before `serve` too)."""
        self._stopping = True
        if self._uvicorn is not None:
            self._uvicorn.should_exit = True


class QuietExit(uvicorn.Server):
    """uvicorn's server, except that SIGINT or SIGTERM ends it as a finished command
    (exit 0) rather than raising the signal again once it has shut down."""

    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # signals reach only the main thread: a server in a thread is stopped by stop()
            return
        previous = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def listen(host: str, port: int) -> socket.socket:
    """A socket listening on host:port (port 0: any free one), so the address is known,
    and a port in use is said, before the server starts."""
    try:
        info = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(info[0], socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # uvicorn serving a socket it did not bind leaves Nagle on (accepted sockets inherit
        # it): an answer's body then waits ~40 ms for the client's delayed ACK.
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(info[4])
        sock.listen(BACKLOG)
    except OSError as exc:
        raise ImproverError(
            f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --host or --port"
        ) from None
    return sock


def address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def _text(message: Message) -> str | None:
    """A received WebSocket message's text (bytes read as UTF-8); None when it closed."""
    if message.get("type") == "websocket.disconnect":
        return None
    if message.get("text") is not None:
        return str(message["text"])
    return bytes(message.get("bytes") or b"").decode("utf-8", errors="replace")


async def _close(ws: WebSocket, code: int = 1000, reason: str = "") -> None:
    with contextlib.suppress(WebSocketDisconnect, RuntimeError, OSError):  # already closed by the client
        await ws.close(code, reason)
