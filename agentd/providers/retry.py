"""One retry policy for every model provider: bounded exponential back-off.

A call that fails in a way worth trying again (HTTP 408, 409, 429 or 5xx, a time-out, a
dropped connection, a malformed body) is tried again after a wait that doubles each
time, with jitter so that many sessions hitting the same limit do not come back in step,
never longer than the cap, and never shorter than the server's `Retry-After` (within
the cap). When the attempts run out, or the failure is one no retry can mend (a refused
key, an unknown model), it becomes `improver.base.protocol.ProviderError`: the run ends as
*errored*, an infrastructure fault that is never scored as a run that went badly.

A malformed body (bytes that are not text, not JSON, or missing the fields an answer
must have) is retried: from a real server it is almost always a proxy or load balancer
hiccup, gone on the next try; a server that only ever sends malformed bodies still
fails, after the last attempt.

Providers make one HTTP request a try (`agentd.providers.client`, which retries nothing
itself), so this is the only policy, and it is the same for every provider. A keep-alive
connection the server closed just as a call reused it is a dropped connection too.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from improver import ProviderError, RequestRefused

T = TypeVar("T")
log = logging.getLogger("agentd.providers")


class Transient(Exception):
    """A failure worth trying again; `retry_after` is the server's hint, in seconds."""

    def __init__(self, reason: str, retry_after: float | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after


class Permanent(Exception):
    """A failure no retry can mend: the call fails at once."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Refused(Permanent):
    """The server refused the request as it was shaped (HTTP 400, 413, 422): it becomes
    `RequestRefused`, which a trial holds against whoever shaped the request."""


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4  # tries per call, the first included
    backoff: float = 0.5  # seconds: the wait before the second try, doubled after each
    backoff_cap: float = 8.0  # seconds: the longest wait between two tries
    timeout: float = 120.0  # seconds a try may wait to connect, or for the server's next bytes

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """The wait after failed try number `attempt` (1-based): half the doubled back-off
        plus up to as much again at random, raised to the server's hint, within the cap."""
        full = min(self.backoff_cap, self.backoff * 2.0 ** (attempt - 1))
        wait = full / 2 + random.uniform(0, full / 2)
        if retry_after is not None:
            wait = max(wait, retry_after)
        return min(wait, self.backoff_cap)


async def with_retries(name: str, policy: RetryPolicy, call: Callable[[], Awaitable[T]]) -> T:
    """Runs `call` under `policy`; raises ProviderError naming `name` when it gives up."""
    attempt = 1
    while True:
        try:
            return await call()
        except Refused as exc:
            raise RequestRefused(f"{name}: {exc.reason}") from None
        except Permanent as exc:
            raise ProviderError(f"{name}: {exc.reason}") from None
        except Transient as exc:
            if attempt >= policy.attempts:
                raise ProviderError(f"{name}: {exc.reason} (gave up after {attempt} attempts)") from None
            wait = policy.delay(attempt, exc.retry_after)
            attempt += 1
            log.warning(
                "%s: %s; trying again in %.2fs (attempt %d of %d)", name, exc.reason, wait, attempt, policy.attempts
            )
            await asyncio.sleep(wait)
