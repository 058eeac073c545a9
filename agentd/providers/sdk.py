"""What the official `openai` and `anthropic` SDKs share, since both are generated alike:
their errors mapped onto the retry policy, and one client per event loop.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from http import HTTPStatus
from types import ModuleType
from typing import Any, AsyncIterator, Callable, Generic, Protocol, TypeVar

from agentd.providers.retry import Permanent, Transient

# Statuses a later try may not see again: time-out, conflict, rate limit, server faults.
RETRYABLE = frozenset({408, 409, 429})
MAX_DETAIL = 200


def failure(exc: Exception, sdk: ModuleType, key_hint: str) -> Transient | Permanent | None:
    """Classifies an exception raised by an SDK call; None when it is not the SDK's."""
    if isinstance(exc, sdk.APITimeoutError):
        return Transient("the request timed out")
    if isinstance(exc, sdk.APIConnectionError):
        cause = exc.__cause__
        if cause is None:
            return Transient("the connection failed")
        said = f"{type(cause).__name__}: {cause}" if str(cause) else type(cause).__name__
        return Transient(f"the connection failed ({said})")
    if isinstance(exc, sdk.APIResponseValidationError):
        return Transient("malformed body: it does not have the shape of an answer")
    if isinstance(exc, sdk.APIStatusError):
        return _status_failure(exc.status_code, _detail(exc.body), exc.response.headers, key_hint)
    if isinstance(exc, json.JSONDecodeError):
        return Transient("malformed body: not JSON")
    if isinstance(exc, UnicodeDecodeError):
        # The SDKs decode the body before parsing it, outside their own error types.
        return Transient(f"malformed body: not valid {exc.encoding.upper()} ({exc.reason})")
    return None


def malformed(what: str) -> Transient:
    return Transient(f"malformed body: {what}")


def _status_failure(status: int, detail: str, headers: Any, key_hint: str) -> Transient | Permanent:
    phrase = _phrase(status)
    reason = " ".join(filter(None, (f"HTTP {status}", phrase))) + (f": {detail}" if detail and detail != phrase else "")
    if status in RETRYABLE or status >= 500:
        return Transient(reason, _retry_after(headers))
    if status in (401, 403):
        return Permanent(f"{reason}; {key_hint}")
    return Permanent(reason)


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _detail(body: object) -> str:
    """The server's own words, from either SDK's error body, on one short line."""
    if isinstance(body, dict):
        inner = body.get("error")
        body = inner.get("message") if isinstance(inner, dict) else body.get("message", inner)
    text = " ".join(str(body).split()) if body else ""
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"


def _retry_after(headers: Any) -> float | None:
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return max(0.0, float(headers.get(name))) * scale
        except (TypeError, ValueError):
            continue
    return None


class Closable(Protocol):
    async def close(self) -> None: ...


C = TypeVar("C", bound=Closable)


class PerLoop(Generic[C]):
    """One SDK client per event loop. An async HTTP pool belongs to the loop that opened
    its connections, and a model object may outlive one `asyncio.run` (tests, trials)."""

    def __init__(self, make: Callable[[], C]) -> None:
        self._make = make
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[C, AsyncIterator[None]]] = (
            weakref.WeakKeyDictionary()
        )

    async def get(self) -> C:
        loop = asyncio.get_running_loop()
        found = self._clients.get(loop)
        if found is None:
            client = self._make()
            keeper = _close_at_shutdown(client)
            await anext(keeper)
            found = self._clients[loop] = (client, keeper)
        return found[0]


async def _close_at_shutdown(client: Closable) -> AsyncIterator[None]:
    # asyncio.run closes every async generator still open before it closes its loop
    # (loop.shutdown_asyncgens), so the pool's connections are closed in their own loop
    # rather than by the SDK's finaliser, later, on whatever loop then runs.
    try:
        yield
    finally:
        await client.close()
