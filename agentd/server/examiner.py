"""`agentd examiner serve`: the examiner's HTTP API (Starlette on uvicorn), on the
conventions of `agentd serve`'s: JSON in and out, one-line JSON errors, bodies capped.

    GET  /health                              {"ok": true, "seals": N}
    GET  /v1/examiner/key                     the key document, signed by the examiner's wallet
    PUT  /v1/examiner/seals/{seal}            {"sealed": base64 HPKE ciphertext, "log", "seq"} -> {"receipt"}
    GET  /v1/examiner/seals/{seal}            confirmations, spent, the receipt, every examination signed
    POST /v1/examiner/seals/{seal}/examinations  {change, current, runs, baseline_runs, gain, seal_claim, log, seq}
                                              -> {"examination": the signed agent.examination/v1 entry}
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from agentd.app.examiner import Examiner, ExaminerRefused
from agentd.server.api import Refused, capped_body

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

    routes = [
        Route("/health", _endpoint(health)),
        Route("/v1/examiner/key", _endpoint(key)),
        Route("/v1/examiner/seals/{seal}", _endpoint(receive), methods=["PUT"]),
        Route("/v1/examiner/seals/{seal}", _endpoint(state)),
        Route("/v1/examiner/seals/{seal}/examinations", _endpoint(examine), methods=["POST"]),
    ]
    return Starlette(routes=routes)


def _endpoint(handler: Callable[[Request], Awaitable[dict[str, Any]]]) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        try:
            return JSONResponse(await handler(request))
        except (ExaminerRefused, Refused) as exc:
            return JSONResponse({"error": str(exc).splitlines()[0]}, status_code=exc.status)

    return endpoint


async def _json(request: Request, cap: int) -> dict[str, Any]:
    body = await capped_body(request, cap)
    try:
        data = json.loads(body)
    except ValueError:
        raise ExaminerRefused(400, "the body is not JSON") from None
    if not isinstance(data, dict):
        raise ExaminerRefused(400, "the body must be a JSON object")
    return data
