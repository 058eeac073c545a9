"""The tasks as an OpenEnv environment, driven by the real `openenv-core` client over
loopback: full episodes to the reward, bad frames, many sessions, faults."""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
import websockets
from openenv.core.generic_client import GenericEnvClient

from improver.base.errors import ImproverError
from improver.base.protocol import Case, Ending, Episode, EpisodeLimits, ProviderError
from improver.base.serving import HttpLimits
from improver.episodes.openenv import IDLE_SECONDS, EnvServer, EnvSetup, address, listen
from improver.tasks.task import TaskSet
from tests.improver.taskkit import OPERATOR, calls, follows_the_protocol, paid_task, says

RIGHT = [calls(("read_invoice", {"number": "23"})), calls(("pay", {"to": "acme-ltd", "amount": "7"})), says("Paid.")]
WRONG = [calls(("pay", {"to": "mallory", "amount": "7"})), says("Paid.")]


def taskset() -> TaskSet:
    tasks = (paid_task("work-1", number="11"), paid_task("work-2", number="12"), paid_task("work-3"))
    return TaskSet("invoices", OPERATOR, tasks)


@contextmanager
def serving(
    agent: Any = follows_the_protocol,
    max_sessions: int = 256,
    limits: EpisodeLimits = EpisodeLimits(),
    idle_seconds: float = IDLE_SECONDS,
    http: HttpLimits | None = None,
) -> Iterator[str]:
    """The server on a free loopback port, in a thread of its own; its base URL."""
    server = EnvServer(EnvSetup(taskset(), agent, "Check the payee.", limits), max_sessions, idle_seconds, http)
    sock = listen("127.0.0.1", 0)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sock)), daemon=True)
    thread.start()
    try:
        yield address(sock)
    finally:
        server.stop()
        thread.join(timeout=30)
        sock.close()


async def play(client: GenericEnvClient, replies: list[dict[str, Any]], **reset: Any) -> Any:
    """Resets, then answers each request with the next reply until done; the last result."""
    result = await client.reset(**reset)
    for reply in replies:
        if result.done:
            break
        result = await client.step({"message": reply})
    return result


def test_the_openenv_client_runs_an_episode_to_its_reward() -> None:
    async def main(url: str) -> None:
        async with GenericEnvClient(base_url=url) as env:
            first = await env.reset(task_id="work-3")
            assert first.done is False and first.reward is None
            request = first.observation["request"]
            assert request["messages"][0] == {"role": "system", "content": f"{OPERATOR}\n\nCheck the payee."}
            assert request["messages"][1]["content"] == "Pay invoice 23 from Acme, 7 USD, to acme-ltd."
            assert {t["function"]["name"] for t in request["tools"]} >= {"read_invoice", "pay"}
            second = await env.step({"message": RIGHT[0]})
            assert second.observation["request"]["messages"][-1]["content"] == "Invoice 23 from Acme: toner, 7 USD."
            await env.step({"message": RIGHT[1]})
            last = await env.step({"message": RIGHT[2]})
            assert (last.done, last.reward) == (True, 1.0)
            assert last.observation["outcome"] == "passed" and last.observation["calls"] == 2
            state = await env.state()
            assert state["task_id"] == "work-3" and state["step_count"] == 3 and state["outcome"] == "passed"
            wrong = await play(env, WRONG, task_id="work-3")
            assert wrong.done and wrong.observation["outcome"] == "failed" and 0 <= wrong.reward < 1
            assert any("acme-ltd" in f for f in wrong.observation["failures"])

    with serving() as url:
        asyncio.run(main(url))


def test_the_sync_client_picks_tasks_by_seed_and_otherwise_in_turn() -> None:
    with serving() as url, GenericEnvClient(base_url=url).sync() as env:
        by_seed = [env.reset(seed=7).observation["task_id"] for _ in range(3)]
        in_turn = [env.reset().observation["task_id"] for _ in range(4)]
        named = env.reset(task_id="work-2", episode_id="ep-9")
        assert env.state()["episode_id"] == "ep-9" and named.observation["task_id"] == "work-2"
    assert len(set(by_seed)) == 1
    assert in_turn == ["work-1", "work-2", "work-3", "work-1"]


def test_malformed_frames_get_error_frames_and_the_session_goes_on() -> None:
    async def main(url: str) -> list[dict[str, Any]]:
        async with websockets.connect(url.replace("http", "ws") + "/ws") as ws:
            replies = []
            for frame in [
                "garbage{",
                b"\xff\xfe not text",
                "[1, 2]",
                json.dumps({"type": "dance"}),
                json.dumps({"type": "step", "data": {"message": says("hi")}}),
                json.dumps({"type": "reset", "data": {"seed": -1}}),
                json.dumps({"type": "reset", "data": {"task_id": "work-3"}}),
                json.dumps({"type": "step", "data": {"message": {"role": "user", "content": "x"}}}),
                json.dumps({"type": "step", "data": {"say": "hi"}}),
                json.dumps({"type": "step", "data": {"message": {"content": 5}}}),
            ] + [json.dumps({"type": "step", "data": {"message": m}}) for m in RIGHT]:
                await ws.send(frame)
                replies.append(json.loads(await ws.recv()))
            return replies

    with serving() as url:
        replies = asyncio.run(main(url))
    codes = [r["data"].get("code") for r in replies]
    assert codes[:6] == [
        "INVALID_JSON",
        "INVALID_JSON",
        "VALIDATION_ERROR",
        "UNKNOWN_TYPE",
        "VALIDATION_ERROR",
        "VALIDATION_ERROR",
    ]
    assert "send a reset first" in replies[4]["data"]["message"]
    assert replies[6]["type"] == "observation"
    assert [r["type"] for r in replies[7:10]] == ["error"] * 3
    assert "assistant" in replies[7]["data"]["message"] and "content must be text" in replies[9]["data"]["message"]
    assert replies[-1]["data"]["done"] is True and replies[-1]["data"]["reward"] == 1.0


def test_an_unknown_task_id_is_named_and_the_session_stays_usable() -> None:
    async def main(url: str) -> Any:
        async with GenericEnvClient(base_url=url) as env:
            with pytest.raises(RuntimeError, match=r"no task named 'work-99'.*work-1, work-2, work-3"):
                await env.reset(task_id="work-99")
            return await play(env, RIGHT, task_id="work-3")

    with serving() as url:
        assert asyncio.run(main(url)).reward == 1.0


def test_closing_mid_episode_frees_the_session() -> None:
    async def main(url: str) -> Any:
        polite = GenericEnvClient(base_url=url)
        await polite.reset(task_id="work-3")
        await polite.close()  # sends {"type": "close"} mid-episode
        rude = await websockets.connect(url.replace("http", "ws") + "/ws")
        await rude.send(json.dumps({"type": "reset", "data": {}}))
        await rude.recv()
        rude.transport.abort()  # gone without a close frame
        for _ in range(3):  # the one session there is, each time free again
            result = await play_when_free(url)
        return result

    async def play_when_free(url: str) -> Any:
        """The server hears a dropped connection when its socket does: until then the
        one session is still taken, and it says so (as it tells any client over the cap)."""
        for _ in range(300):
            try:
                async with GenericEnvClient(base_url=url) as env:
                    return await play(env, RIGHT, task_id="work-3")
            except RuntimeError as exc:
                if "CAPACITY_REACHED" not in str(exc):
                    raise
                await asyncio.sleep(0.1)
        raise AssertionError("the dropped session was never freed")

    with serving(max_sessions=1) as url:
        assert asyncio.run(main(url)).reward == 1.0
        assert httpx.get(f"{url}/health").json() == {"status": "healthy"}


def test_200_sessions_at_once_are_each_isolated_and_those_over_the_limit_are_told() -> None:
    async def main(url: str) -> tuple[list[Any], list[str]]:
        clients = [GenericEnvClient(base_url=url) for _ in range(200)]
        await asyncio.gather(*(c.connect() for c in clients))
        # Every client holds its session open mid-episode before any goes on.
        firsts = await asyncio.gather(
            *(c.reset(task_id=f"work-{1 + i % 3}") for i, c in enumerate(clients)), return_exceptions=True
        )
        refused = [str(f) for f in firsts if isinstance(f, Exception)]
        running = [c for c, f in zip(clients, firsts, strict=False) if not isinstance(f, Exception)]

        async def finish(index: int, client: GenericEnvClient) -> Any:
            replies = RIGHT if index % 2 == 0 else WRONG
            result = None
            for reply in replies:
                result = await client.step({"message": reply})
                if result.done:
                    break
            return result

        results = await asyncio.gather(*(finish(i, c) for i, c in enumerate(running)))
        await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
        return results, refused

    with serving(max_sessions=150) as url:
        results, refused = asyncio.run(main(url))
    assert len(results) == 150 and len(refused) == 50
    assert all("CAPACITY_REACHED" in r for r in refused)
    assert [r.reward for r in results[0::2]] == [1.0] * 75
    assert all(r.done and r.observation["outcome"] == "failed" for r in results[1::2])


async def sends_what_cannot_be_json(case: Case, episode: Episode) -> Ending:
    """A candidate whose request cannot go out: the episode's fault, never the policy's."""
    try:
        await episode.model(
            [{"role": "user", "content": case.task}, {"role": "user", "content": math.nan}], case.tools, None
        )
    except ProviderError as exc:
        return Ending("errored", error=str(exc))
    return Ending("done", answer="unreachable")


def test_an_episode_the_server_cannot_run_is_errored_with_no_reward_not_a_zero() -> None:
    with serving(agent=sends_what_cannot_be_json) as url:
        with GenericEnvClient(base_url=url).sync() as env:
            result = env.reset(task_id="work-3")
        over_http = httpx.post(f"{url}/reset", json={"task_id": "work-3"}).json()
    assert result.done is True and result.reward is None
    assert result.observation["outcome"] == "errored" and "not the policy's doing" in result.observation["error"]
    assert over_http["reward"] is None and over_http["observation"]["outcome"] == "errored"


def test_a_policy_silent_past_the_wall_time_ends_the_episode_with_a_clear_error() -> None:
    async def main(url: str) -> Any:
        async with GenericEnvClient(base_url=url) as env:
            await env.reset(task_id="work-3")
            await asyncio.sleep(1.0)
            with pytest.raises(RuntimeError, match=r"did not answer within 0.2 seconds"):
                await env.step({"message": RIGHT[0]})
            return await play(env, RIGHT, task_id="work-3")

    with serving(limits=EpisodeLimits(wall_seconds=0.2)) as url:
        assert asyncio.run(main(url)).reward == 1.0


def test_the_http_endpoints_answer_as_openenv_has_them() -> None:
    with serving() as url, httpx.Client(base_url=url) as http:
        assert http.get("/health").json() == {"status": "healthy"}
        assert "3 tasks of profile invoices" in http.get("/metadata").json()["description"]
        schema = http.get("/schema").json()
        assert set(schema) == {"action", "observation", "state"} and schema["action"]["required"] == ["message"]
        assert http.get("/state").json()["step_count"] == 0
        first = http.post("/reset", json={"task_id": "work-3"}).json()
        assert first["done"] is False and first["observation"]["request"]["messages"][1]["role"] == "user"
        assert http.post("/reset").json()["observation"]["task_id"] == "work-1"
        action = {"task_id": "work-3", "history": RIGHT[:2], "message": RIGHT[2]}
        done = http.post("/step", json={"action": action}).json()
        assert done["done"] is True and done["reward"] == 1.0 and done["observation"]["outcome"] == "passed"
        middle = http.post("/step", json={"action": {"task_id": "work-3", "message": RIGHT[0]}}).json()
        assert middle["done"] is False and middle["observation"]["turn"] == 2
        too_long = http.post("/step", json={"action": {"task_id": "work-3", "history": RIGHT, "message": RIGHT[2]}})
        assert too_long.status_code == 422 and "ended with history message 3" in too_long.json()["detail"]
        unknown = http.post("/reset", json={"task_id": "nope"})
        assert unknown.status_code == 422 and "no task named 'nope'" in unknown.json()["detail"]
        assert http.post("/step", content=b"{not json").status_code == 422
        assert "names its task" in http.post("/step", json={"action": {"message": RIGHT[0]}}).json()["detail"]


CLOSED_WAIT = 60  # seconds: a bound on waiting for a close, far past any idle timeout here


async def closed(ws: Any) -> tuple[int | None, str | None]:
    """The code and reason the server closed `ws` with (waiting at most CLOSED_WAIT)."""
    await asyncio.wait_for(ws.wait_closed(), CLOSED_WAIT)
    return ws.close_code, ws.close_reason


def test_a_connection_that_never_starts_an_episode_is_closed_after_the_idle_timeout() -> None:
    async def main(url: str) -> tuple[Any, Any]:
        async with websockets.connect(url.replace("http", "ws") + "/ws") as silent:
            first = await closed(silent)
        async with websockets.connect(url.replace("http", "ws") + "/ws") as chatty:
            await chatty.send(json.dumps({"type": "state"}))  # not an episode: the idle clock runs again after it
            assert json.loads(await chatty.recv())["data"]["episode_id"] is None
            second = await closed(chatty)
        return first, second

    with serving(idle_seconds=0.3) as url:
        first, second = asyncio.run(main(url))
    for code, reason in (first, second):
        assert code == 1008 and reason == "idle 0.3 s with no episode: reset within that, or reconnect"


def test_a_connection_in_an_episode_is_kept_past_the_idle_timeout_and_one_over_the_cap_is_not() -> None:
    async def main(url: str) -> tuple[Any, Any, Any]:
        async with websockets.connect(url.replace("http", "ws") + "/ws") as playing:
            await playing.send(json.dumps({"type": "reset", "data": {"task_id": "work-3"}}))
            assert json.loads(await playing.recv())["data"]["done"] is False
            async with websockets.connect(url.replace("http", "ws") + "/ws") as over:  # the one session is taken
                refused = await closed(over)
            await asyncio.sleep(1.0)  # thinking well past the idle timeout, mid-episode
            last = None
            for reply in RIGHT:
                await playing.send(json.dumps({"type": "step", "data": {"message": reply}}))
                last = json.loads(await playing.recv())
            # The episode is over: from here the connection is idle, and closed.
            return last, refused, await closed(playing)

    with serving(max_sessions=1, idle_seconds=0.3) as url:
        last, refused, after = asyncio.run(main(url))
    assert last["type"] == "observation" and last["data"]["done"] is True and last["data"]["reward"] == 1.0
    assert refused[0] == 1008 and after[0] == 1008 and "idle 0.3 s" in after[1]


def test_an_idle_timeout_must_be_more_than_nothing() -> None:
    with pytest.raises(ImproverError, match="the idle timeout must be more than 0 seconds, not 0"):
        EnvServer(EnvSetup(taskset(), follows_the_protocol), idle_seconds=0)
