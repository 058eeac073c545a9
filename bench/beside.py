"""A server's CPU a request, beside the same bytes served as a constant by the same server.

`with_constant(app)` adds a route to a Starlette app: `PUT /bench/constant` keeps the
body it is sent, and `GET` or `POST /bench/constant` answers with it, bytes made once (a
POST's body read, as any route reads it, and dropped). A bench serves that app in a
process of its own (as the real server runs); `beside` asks the real route once, puts
its answer as the constant, and measures the server process's CPU a request for the
route and for the constant asked the same way (method and body), in turns: what the
route costs above taking that request and sending those bytes through the same server
(uvicorn, its HTTP protocol, Starlette, the kernel's copy).

The CPU is the process's (every thread), read from /proc in clock ticks, so each figure
runs requests until the server has spent at least `budget` seconds: a tick is 1% of it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

CONSTANT = "/bench/constant"


def with_constant(app: Starlette) -> Starlette:
    """`app` with the constant's route first."""
    kept: dict[str, bytes] = {}

    async def constant(request: Request) -> Response:
        body = await request.body()
        if request.method == "PUT":
            kept["body"] = body
            return Response(b"", status_code=204)
        return Response(kept["body"], media_type="application/json")

    app.router.routes.insert(0, Route(CONSTANT, constant, methods=["GET", "POST", "PUT"]))
    return app


def cpu_seconds(pid: int) -> float:
    """A process's CPU seconds so far, user and system, every thread's."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def per_request(pid: int, call: Callable[[], httpx.Response], budget: float, at_least: int = 20) -> float:
    """The server's CPU seconds a `call`, over calls until it has spent `budget` seconds."""
    started, calls = cpu_seconds(pid), 0
    while calls < at_least or cpu_seconds(pid) - started < budget:
        answer = call()
        if answer.status_code != 200:
            raise SystemExit(f"bench: the server answered {answer.status_code}: {answer.text[:200]}")
        calls += 1
    return (cpu_seconds(pid) - started) / calls


@dataclass(frozen=True)
class Beside:
    route_ms: float  # the server's CPU a request of the route
    constant_ms: float  # the same bytes as a constant
    size: int  # bytes a response

    @property
    def ratio(self) -> float:
        return self.route_ms / self.constant_ms

    def line(self, limit: float) -> str:
        said = "meets" if self.ratio <= limit else "misses"
        return (
            f"{self.route_ms:.2f} ms of server CPU a request beside {self.constant_ms:.2f} ms for the same "
            f"{self.size:,} bytes as a constant: {self.ratio:.1f}x (goal {limit:g}x: {said}); "
            f"load average {os.getloadavg()[0]:.2f}"
        )


def beside(client: httpx.Client, pid: int, method: str, path: str, budget: float = 1.0, **asked: Any) -> Beside:
    """The route's server CPU a request (`method` on `path`, with `asked`: params, json)
    beside the constant of what it answers asked the same way, each measured twice in
    turns (route, constant, route, constant), the lower of each kept."""

    def route() -> httpx.Response:
        return client.request(method, path, **asked)

    def constant() -> httpx.Response:
        return client.request(method, CONSTANT, **asked)

    body = route().content
    client.put(CONSTANT, content=body).raise_for_status()
    routes, constants = [], []
    for _ in range(2):
        routes.append(per_request(pid, route, budget))
        constants.append(per_request(pid, constant, budget))
    return Beside(min(routes) * 1e3, min(constants) * 1e3, len(body))
