"""The network providers' keep-alive connections: per event loop and origin, each held by
an httpx client of its own.

A call takes an idle connection to its origin (the one given back last, the likeliest to
be still open) or opens one, and gives it back when the answer is read; so turns,
sessions and models on one loop reuse the same connections, whatever their endpoint.

Why not one httpx client with a pool of many connections: httpcore's pool looks at every
connection it holds (asking each socket whether it is still open) whenever a request
starts or ends, so with n calls in flight each costs O(n) system calls and O(n^2) steps:
at 64 at once, about 9 ms of CPU a call against 0.8 ms for the request itself. Here a
client only ever looks at its own connection.

Connections belong to the loop that opened them; `asyncio.run` closes them with the loop.
The TLS context (loading the CA bundle is most of what making a client costs) is made
once a process and shared. The environment's proxy and CA settings (HTTPS_PROXY,
NO_PROXY, SSL_CERT_FILE, ...) are honoured, as httpx does by default.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import weakref
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import httpx

from agentd import __version__

MAX_IDLE = 100  # idle connections kept open per origin; one given back beyond that is closed
KEEPALIVE = 5.0  # seconds an idle connection is reused for; after that its client opens a new one
ONE = httpx.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=KEEPALIVE)
USER_AGENT = f"agentd/{__version__}"

Origin = tuple[str, bytes]


@dataclass
class Pool:
    """One loop's connections: the idle ones by origin, and every one not yet closed."""

    idle: dict[Origin, list[httpx.AsyncClient]] = field(default_factory=dict)
    every: set[httpx.AsyncClient] = field(default_factory=set)

    def take(self, origin: Origin) -> httpx.AsyncClient:
        idle = self.idle.get(origin)
        if idle:
            return idle.pop()
        client = httpx.AsyncClient(verify=_tls(), limits=ONE, follow_redirects=True, headers={"User-Agent": USER_AGENT})
        self.every.add(client)
        return client

    async def give_back(self, origin: Origin, client: httpx.AsyncClient) -> None:
        idle = self.idle.setdefault(origin, [])
        if len(idle) < MAX_IDLE:
            idle.append(client)
        else:
            self.every.discard(client)
            await client.aclose()

    async def close(self) -> None:
        clients, self.every, self.idle = self.every, set(), {}
        await asyncio.gather(*(client.aclose() for client in clients))


_pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[Pool, AsyncIterator[None]]] = (
    weakref.WeakKeyDictionary()
)


@asynccontextmanager
async def connection(url: httpx.URL) -> AsyncIterator[httpx.AsyncClient]:
    """A client holding a connection to `url`'s origin, for one request."""
    pool = await loop_pool()
    origin = (url.scheme, url.netloc)
    client = pool.take(origin)
    try:
        yield client
    finally:
        await pool.give_back(origin, client)


async def loop_pool() -> Pool:
    """This event loop's connections, an empty pool on first use."""
    loop = asyncio.get_running_loop()
    found = _pools.get(loop)
    if found is None:
        pool = Pool()
        keeper = _close_at_shutdown(loop, pool)
        await anext(keeper)
        found = _pools[loop] = (pool, keeper)
    return found[0]


@functools.cache
def _tls() -> ssl.SSLContext:
    return httpx.create_ssl_context(trust_env=True)


async def _close_at_shutdown(loop: asyncio.AbstractEventLoop, pool: Pool) -> AsyncIterator[None]:
    # asyncio.run closes every async generator still open before it closes its loop
    # (loop.shutdown_asyncgens), so the connections are closed in their own loop rather
    # than by a finaliser, later, on whatever loop then runs. The entry goes too: open
    # connections refer to the loop, which would keep its weak key alive.
    try:
        yield
    finally:
        _pools.pop(loop, None)
        await pool.close()
