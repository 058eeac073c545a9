"""What every HTTP server holds its clients to (improver.base.serving): a uvicorn server
on loopback, in a thread, set to deadlines of a second and a small body cap, against
real sockets that never finish a request."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from improver.base.serving import HttpLimits, ServerConfig
from tests.slowclients import answered, closed_within, endless_body, endless_head, nothing

LIMITS = HttpLimits(header_seconds=1, body_seconds=1, idle_seconds=1, body_bytes=1000)


async def echo(request: Request) -> JSONResponse:
    return JSONResponse({"bytes": len(await request.body())})


async def slow(request: Request) -> JSONResponse:
    await asyncio.sleep(3)  # longer than every deadline: an app answering has none
    return JSONResponse({"slept": True})


@contextmanager
def serving(limits: HttpLimits = LIMITS) -> Iterator[tuple[str, int]]:
    """A server of `echo` and `slow` held to `limits`; its (host, port)."""
    web = Starlette(routes=[Route("/echo", echo, methods=["GET", "POST"]), Route("/slow", slow)])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(ServerConfig(web, limits, log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started and thread.is_alive():
            thread.join(0.05)
        yield sock.getsockname()
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


@pytest.mark.parametrize(
    "client",
    [
        pytest.param(nothing, id="connected and sends nothing"),
        pytest.param(lambda: endless_head("/echo"), id="a header line at a time"),
        pytest.param(lambda: endless_body("/echo"), id="a body a byte at a time"),
        pytest.param(lambda: answered("/echo"), id="kept alive after its answer"),
    ],
)
def test_a_client_that_never_finishes_a_request_is_closed(client) -> None:
    with serving() as address:
        assert closed_within(address, client())
        assert httpx.get(f"http://{address[0]}:{address[1]}/echo").json() == {"bytes": 0}  # the server serves on


def test_the_same_clients_stay_open_without_the_limits() -> None:
    # What the limits change: uvicorn alone keeps all three open (its keep-alive timer
    # starts only after an answer, and stops at the next byte).
    relaxed = HttpLimits(header_seconds=600, body_seconds=600, idle_seconds=600)
    with serving(relaxed) as address:
        for client in (nothing(), endless_head("/echo"), endless_body("/echo")):
            assert not closed_within(address, client, within=3)


def test_requests_within_the_limits_are_answered_on_one_kept_connection() -> None:
    with serving() as address, httpx.Client(base_url=f"http://{address[0]}:{address[1]}") as client:
        answers = [client.post("/echo", content=b"x" * 1000).json() for _ in range(3)]
        assert answers == [{"bytes": 1000}] * 3
        assert client.get("/slow").json() == {"slept": True}  # an app may take longer than any deadline


def test_a_body_over_the_cap_is_a_413_saying_so_whether_declared_or_streamed() -> None:
    with serving() as address:
        url = f"http://{address[0]}:{address[1]}/echo"
        declared = httpx.post(url, content=b"x" * 1001)
        streamed = httpx.post(url, content=iter([b"x" * 600, b"x" * 600]))  # chunked: no length declared
        unknown_route = httpx.post(f"http://{address[0]}:{address[1]}/nowhere", content=b"x" * 5000)
    assert (declared.status_code, declared.json()) == (413, {"error": "the body is 1001 bytes; at most 1000 are taken"})
    assert (streamed.status_code, streamed.json()) == (
        413,
        {"error": "the body is over 1000 bytes; at most 1000 are taken"},
    )
    assert unknown_route.status_code == 413


def test_a_client_sending_far_more_than_the_cap_reads_its_413_not_a_reset() -> None:
    # Answered from the head; what it goes on sending is dropped as it comes, not read whole.
    with serving() as address:
        answer = httpx.post(f"http://{address[0]}:{address[1]}/echo", content=b"x" * (64 * 1024 * 1024))
    assert answer.status_code == 413
