"""`agentd examiner serve`: the examiner's HTTP API (Starlette on uvicorn), on the
conventions of `agentd serve`'s: JSON in and out, one-line JSON errors (404 and 405 for a
path or method no route takes, 500 only for its own fault; never where its home is),
bodies capped, connections held to the home's HTTP limits (agentd/app/httplimits.py).

    GET  /health                              {"ok": true, "seals": N}
    GET  /v1/examiner/key                     the key document, signed by the examiner's wallet
    PUT  /v1/examiner/seals/{seal}            {"sealed": base64 HPKE ciphertext, "log", "seq"} -> {"receipt"}
    GET  /v1/examiner/seals/{seal}            confirmations, spent, the receipt, every examination signed
    POST /v1/examiner/seals/{seal}/examinations  {change, current, runs, baseline_runs, gain, seal_claim, log, seq,
                                              held: the examinations the asker's ledger holds}
                                              -> {"examination": the signed agent.examination/v1 entry}
                                              (409 with "missing": those signed before and not held)
    POST /v1/examiner/seals/{seal}/reveal     {claim: the seal's entry, retirement?: its publisher's, log, seq}
                                              -> {"reveal": the signed agent.seal-reveal/v1 entry, "bundle"}
    GET  /v1/examiner/seals/{seal}/revealed   the bundle of a revealed seal, as the reveal's digest names it
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentd.app.examiner import Examiner, ExaminerRefused
from agentd.app.httplimits import http_limits
from agentd.server.answers import JSON_ERRORS, Refused, capped_body, public
from improver import QuietExit, ServerConfig, loads_bounded

SEAL_CAP = 64 * 1024 * 1024  # a handed-over seal: thousands of tasks
REQUEST_CAP = 1024 * 1024  # an examination asked: two variants


def app(examiner: Examiner) -> Starlette:
    async def health(request: Request) -> dict[str, Any]:
        held = len(list(examiner.folder.glob("*.json"))) if examiner.folder.exists() else 0
        return {"ok": True, "seals": held}

    async def key(request: Request) -> dict[str, Any]:
        return examiner.key_document()

    async def receive(request: Request) -> dict[str, Any]:
        body = await _json(request, SEAL_CAP)
        try:
            sealed = base64.b64decode(body["sealed"], validate=True)
            log, seq = str(body["log"]), int(body["seq"])
        except (KeyError, TypeError, ValueError, binascii.Error):
            raise ExaminerRefused(400, "give sealed (base64), log and seq") from None
        seal = request.path_params["seal"]
        receipt = await run_in_threadpool(examiner.receive, seal, sealed, log, seq)
        return {"receipt": receipt.decode()}

    async def state(request: Request) -> dict[str, Any]:
        return await run_in_threadpool(examiner.state, request.path_params["seal"])

    async def examine(request: Request) -> dict[str, Any]:
        body = await _json(request, REQUEST_CAP)
        raw = await examiner.examine(request.path_params["seal"], body)
        return {"examination": raw.decode()}

    async def reveal(request: Request) -> dict[str, Any]:
        body = await _json(request, REQUEST_CAP)
        raw, bundle = await examiner.reveal(request.path_params["seal"], body)
        return {"reveal": raw.decode(), "bundle": bundle.decode()}

    async def revealed(request: Request) -> Response:
        try:
            bundle = await run_in_threadpool(examiner.revealed, request.path_params["seal"])
        except ExaminerRefused as exc:
            return _refused(exc, examiner)
        return Response(bundle, media_type="application/json")

    def endpoint(handler: Callable[[Request], Awaitable[dict[str, Any]]]) -> Callable[[Request], Awaitable[Response]]:
        async def answer(request: Request) -> Response:
            try:
                return JSONResponse(await handler(request))
            except (ExaminerRefused, Refused) as exc:
                return _refused(exc, examiner)

        return answer

    routes = [
        Route("/health", endpoint(health)),
        Route("/v1/examiner/key", endpoint(key)),
        Route("/v1/examiner/seals/{seal}", endpoint(receive), methods=["PUT"]),
        Route("/v1/examiner/seals/{seal}", endpoint(state)),
        Route("/v1/examiner/seals/{seal}/examinations", endpoint(examine), methods=["POST"]),
        Route("/v1/examiner/seals/{seal}/reveal", endpoint(reveal), methods=["POST"]),
        Route("/v1/examiner/seals/{seal}/revealed", revealed),
    ]
    return Starlette(routes=routes, exception_handlers=JSON_ERRORS)


def server_config(examiner: Examiner, **settings: Any) -> ServerConfig:
    """uvicorn's configuration for the examiner's API, held to its home's HTTP limits."""
    return ServerConfig(app(examiner), http_limits(examiner.home, SEAL_CAP), log_level="warning", **settings)


def serve(examiner: Examiner, host: str, port: int) -> None:
    """Serves the examiner's API on host:port until SIGTERM or Ctrl-C, then exits 0, as
    `agentd serve` and `improve env --serve` do (uvicorn's own handlers raise the signal again)."""
    QuietExit(server_config(examiner, host=host, port=port)).run()


def _refused(exc: ExaminerRefused | Refused, examiner: Examiner) -> JSONResponse:
    """A refusal in one JSON line, with what the asker needs to mend its request."""
    said = (public(str(exc), examiner.home).splitlines() or ["refused"])[0]
    extra = exc.extra if isinstance(exc, ExaminerRefused) else {}
    return JSONResponse({"error": said, **extra}, status_code=exc.status)


async def _json(request: Request, cap: int) -> dict[str, Any]:
    body = await capped_body(request, cap)
    try:
        data = loads_bounded(body)
    except ValueError as exc:  # not JSON, not UTF-8, nested too deep, or a number too long to read
        raise ExaminerRefused(400, f"the body is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ExaminerRefused(400, "the body must be a JSON object")
    return data
