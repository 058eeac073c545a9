"""The HTTP side every network provider shares: a JSON request posted on a keep-alive
connection (`agentd.providers.connections`), and each way that can fail mapped onto the
retry policy.

Providers speak their wire format with httpx directly rather than through the official
SDKs: the SDKs' request building and response models cost more CPU a call than the HTTP
request itself, and a second or so to import (see the README's Performance). Bodies are
written and read with orjson, the standard library's json taking over for the rare
body orjson refuses.
"""

from __future__ import annotations

import json
from http import HTTPStatus
from typing import Any, TypeGuard

import httpx
import orjson

from agentd.providers.connections import connection
from agentd.providers.retry import Permanent, Refused, Transient
from improver import ProviderError

# Statuses a later try may not see again: time-out, conflict, rate limit, server faults.
RETRYABLE = frozenset({408, 409, 429})
# Statuses that refuse the request as it was shaped (a malformed body, too large, not valid).
REFUSED = frozenset({400, 413, 422})
MAX_DETAIL = 200


def encode(name: str, body: dict[str, Any]) -> bytes:
    """The request body as JSON bytes; ProviderError, naming the model `name`, when it
    holds what JSON cannot carry (no retry would mend that)."""
    try:
        return orjson.dumps(body)
    except TypeError:
        pass
    # orjson refuses what the standard library escapes (lone surrogates, keys that are
    # numbers): the slow path, for those rare bodies only.
    try:
        return json.dumps(body).encode()
    except (TypeError, ValueError) as exc:
        raise ProviderError(f"{name}: cannot send the request: it does not encode as JSON ({exc})") from None


async def post_json(url: httpx.URL, headers: dict[str, str], body: bytes, timeout: httpx.Timeout, key_hint: str) -> Any:
    """POSTs `body` and returns the answer's JSON; Transient or Permanent on failure, a
    refused key's failure ending with `key_hint` (what to tell the user)."""
    try:
        async with connection(url) as client:
            response = await client.post(url, content=body, headers=headers, timeout=timeout)
    except httpx.TimeoutException:
        raise Transient("the request timed out") from None
    except httpx.TooManyRedirects as exc:
        raise Permanent(f"the endpoint redirects without end ({exc})") from None
    except httpx.DecodingError as exc:
        raise Transient(f"malformed body: {exc}") from None
    except httpx.TransportError as exc:
        said = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        raise Transient(f"the connection failed ({said})") from None
    if not response.is_success:
        raise _status_failure(response, key_hint)
    return _json(response)


def malformed(what: str) -> Transient:
    return Transient(f"malformed body: {what}")


def is_count(value: object) -> TypeGuard[int]:
    """Whether an answer's field is a token count: a whole number, 0 or more."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def token_counts(usage: object, tokens_in: str, tokens_out: str) -> tuple[int, int]:
    """An answer's `usage` as its tokens in and out (its fields `tokens_in` and
    `tokens_out`); a malformed body unless both are counts."""
    counted_in, counted_out = (usage.get(tokens_in), usage.get(tokens_out)) if isinstance(usage, dict) else (None, None)
    if is_count(counted_in) and is_count(counted_out):
        return counted_in, counted_out
    raise malformed("no token counts (usage)")


def _json(response: httpx.Response) -> Any:
    content = response.content
    try:
        return orjson.loads(content)
    except orjson.JSONDecodeError:
        pass
    # orjson refuses some JSON the standard library reads (a lone surrogate escaped in a
    # string); the slow path also says why a body is not JSON.
    try:
        text = content.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise malformed(f"not valid UTF-8 ({exc.reason})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        kind = response.headers.get("content-type", "").partition(";")[0].strip()
        raise malformed(f"not JSON ({kind})" if kind and not kind.endswith("json") else "not JSON") from None


def _status_failure(response: httpx.Response, key_hint: str) -> Transient | Permanent:
    status = response.status_code
    phrase = _phrase(status)
    detail = _detail(response.content)
    reason = " ".join(filter(None, (f"HTTP {status}", phrase))) + (f": {detail}" if detail and detail != phrase else "")
    if status in RETRYABLE or status >= 500:
        return Transient(reason, _retry_after(response.headers))
    if status in (401, 403):
        return Permanent(f"{reason}; {key_hint}")
    return Refused(reason) if status in REFUSED else Permanent(reason)


def _phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _detail(content: bytes) -> str:
    """The server's own words, from either wire's error body, on one short line."""
    body: Any
    try:
        body = json.loads(content)
    except ValueError:  # not JSON, or not text at all
        body = content.decode("utf-8", "replace")
    if isinstance(body, dict):
        inner = body.get("error")
        body = inner.get("message") if isinstance(inner, dict) else body.get("message", inner)
    text = " ".join(str(body).split()) if body else ""
    return text if len(text) <= MAX_DETAIL else text[: MAX_DETAIL - 1] + "…"


def _retry_after(headers: httpx.Headers) -> float | None:
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value)) * scale
        except ValueError:
            continue  # an HTTP date, or nonsense: the back-off alone decides
    return None
