"""How agentd's servers answer (the daemon's API, server/api.py, and the examiner's,
server/examiner.py): every error one JSON line, `{"error": "..."}`, with its status; what
no route takes answered the same way; a body read no further than its cap."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from agentd.home import Home


class Refused(Exception):
    """A request answered with `status` and one line saying why."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers


def error(status: int, message: str, headers: dict[str, str] | None = None) -> JSONResponse:
    return JSONResponse(
        {"error": message.splitlines()[0] if message else "refused"}, status_code=status, headers=headers
    )


def public(message: str, home: Home) -> str:
    """An error as a client elsewhere is told it: where the home is on this machine is none
    of its business, so the home's folder is said as HOME (as the README writes it)."""
    return message.replace(str(home.root), "HOME")


async def _unrouted(request: Request, exc: Exception) -> Response:
    """What Starlette answers by itself, as the routes answer: a path no route serves (404),
    a method its route does not take (405, with Allow), in one JSON line."""
    if not isinstance(exc, HTTPException):  # registered for HTTPException alone
        raise exc
    where = request.url.path[:100]
    taken = ", ".join(sorted(Headers(exc.headers).get("allow", "no method").split(", ")))
    said = {404: f"nothing is served at {where}", 405: f"{request.method[:10]} is not taken at {where}; {taken} is"}
    return error(exc.status_code, said.get(exc.status_code, exc.detail), dict(exc.headers or {}))


async def _fault(request: Request, exc: Exception) -> Response:
    """The server's own fault, whatever it was: a 500 that says no more than that (the
    traceback, which Starlette raises again after this answer, goes to the log)."""
    return error(500, "the server failed to answer this; its log says why")


# How `agentd serve` and the examiner (server/examiner.py) answer what no route of theirs does.
JSON_ERRORS: dict[Any, Callable[[Request, Exception], Awaitable[Response]]] = {
    HTTPException: _unrouted,
    Exception: _fault,
}


async def capped_body(request: Request, cap: int) -> bytes:
    """The request's body, refused past `cap` bytes before more is read."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > cap:
        raise Refused(413, f"the body is {declared} bytes; at most {cap} are taken")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > cap:
            raise Refused(413, f"the body is over {cap} bytes; at most {cap} are taken")
    if not body:
        raise Refused(400, "the body is empty")
    return bytes(body)
