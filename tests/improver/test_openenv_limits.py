"""The OpenEnv server against clients that never finish a request, bodies over its cap,
and garbage of every shape on its HTTP endpoints and WebSocket: a connection closed, a
JSON 4xx or an error frame, never a 5xx, a dropped connection or a crash."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
import websockets
from hypothesis import given, strategies as st
from websockets.sync.client import connect

from improver.base.serving import HttpLimits
from tests.garbage import FUZZ, garbage, json_values, objects
from tests.improver.test_openenv import RIGHT, serving
from tests.slowclients import answered, closed_within, endless_body, endless_head, host_port, nothing

QUICK = HttpLimits(header_seconds=1, body_seconds=1, idle_seconds=1, body_bytes=64 * 1024)
MESSAGES = st.lists(objects(["role", "content", "tool_calls"]), max_size=3)
RESETS = objects(["task_id", "seed", "episode_id"], st.sampled_from(["work-3", "nope", "", 7, -1]) | json_values())
STEPS = objects(["action"], objects(["message", "task_id", "history", "metadata"], MESSAGES | json_values()))


@pytest.mark.parametrize(
    "client",
    [
        pytest.param(nothing, id="connected and sends nothing"),
        pytest.param(endless_head, id="a header line at a time"),
        pytest.param(lambda: endless_body("/reset"), id="a body a byte at a time"),
        pytest.param(answered, id="kept alive after its answer"),
    ],
)
def test_a_client_that_never_finishes_a_request_is_closed(client) -> None:
    with serving(http=QUICK) as url:
        assert closed_within(host_port(url), client())
        assert httpx.get(f"{url}/health").json() == {"status": "healthy"}


def test_a_body_over_the_cap_is_a_413_and_the_server_goes_on() -> None:
    big = json.dumps({"task_id": "work-3", "pad": "x" * QUICK.body_bytes}).encode()
    with serving(http=QUICK) as url:
        answer = httpx.post(f"{url}/reset", content=big)
        again = httpx.post(f"{url}/reset", json={"task_id": "work-3"})
    assert answer.status_code == 413
    assert answer.json() == {"detail": f"the body is {len(big)} bytes; at most {QUICK.body_bytes} are taken"}
    assert again.status_code == 200 and again.json()["observation"]["task_id"] == "work-3"


def test_a_websocket_session_is_not_held_to_the_http_deadlines() -> None:
    async def main(url: str) -> dict:
        async with websockets.connect(url.replace("http", "ws") + "/ws") as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"task_id": "work-3"}}))
            await ws.recv()
            await asyncio.sleep(3 * QUICK.idle_seconds)  # past every HTTP deadline, mid-episode
            await ws.send(json.dumps({"type": "step", "data": {"message": RIGHT[0]}}))
            return json.loads(await ws.recv())

    with serving(http=QUICK) as url:
        assert asyncio.run(main(url))["type"] == "observation"


@pytest.mark.parametrize(("path", "shape"), [("/reset", RESETS), ("/step", STEPS)])
def test_garbage_posted_is_a_json_4xx_never_a_5xx(path: str, shape) -> None:
    with serving(http=QUICK) as url, httpx.Client(base_url=url, timeout=60) as client:

        @FUZZ
        @given(body=garbage(shape))
        def posted(body: bytes) -> None:
            answer = client.post(path, content=body)
            assert answer.status_code == 200 or 400 <= answer.status_code < 500, answer.text
            if answer.status_code != 200:
                assert isinstance(answer.json()["detail"], str)

        posted()
        assert client.get("/health").status_code == 200


def test_garbage_frames_get_error_frames_on_a_connection_that_stays_open() -> None:
    frames = objects(["type", "data"], st.sampled_from(["reset", "step", "state"]) | RESETS)
    with serving(http=QUICK) as url, connect(url.replace("http", "ws") + "/ws", max_size=None) as ws:

        @FUZZ
        @given(frame=garbage(frames))
        def sent(frame: bytes) -> None:
            if b"close" in frame:
                return  # a close frame ends the session, as it should
            ws.send(frame)  # a binary frame: the server reads it as UTF-8, whatever it holds
            reply = json.loads(ws.recv(timeout=60))
            assert reply["type"] in ("error", "observation", "state"), reply

        sent()
