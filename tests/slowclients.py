"""Clients that hold an HTTP server's connection without finishing a request, over real
sockets: one that sends nothing, one whose head never ends (a header line at a time),
one whose body never ends (a byte at a time), and one kept alive after its answer.

`closed_within` says whether the server closed the connection in a generous bound (the
tests' servers are set to close after about a second): it tells closed from open, never
how fast.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Iterable, Iterator
from itertools import repeat

BOUND = 60.0  # seconds: far past any deadline the tests set, so only a server that never closes fails
PACE = 0.3  # seconds between two pieces a slow client sends


def nothing() -> Iterator[bytes]:
    return iter(())


def endless_head(path: str = "/health") -> Iterator[bytes]:
    """A GET whose head never ends: one more header line every PACE seconds."""
    yield f"GET {path} HTTP/1.1\r\nHost: loopback\r\n".encode()
    yield from repeat(b"X-Slow: 1\r\n")


def endless_body(path: str, method: str = "POST") -> Iterator[bytes]:
    """A request whose body of a million bytes comes a byte every PACE seconds."""
    yield f"{method} {path} HTTP/1.1\r\nHost: loopback\r\nContent-Length: 1000000\r\n\r\n".encode()
    yield from repeat(b"x")


def answered(path: str = "/health") -> Iterator[bytes]:
    """One whole request, then nothing: the connection kept alive after its answer."""
    yield f"GET {path} HTTP/1.1\r\nHost: loopback\r\n\r\n".encode()


def closed_within(address: tuple[str, int], pieces: Iterable[bytes], within: float = BOUND) -> bool:
    """Sends `pieces` one every PACE seconds (reading and dropping any answer); True once
    the server has closed the connection, False while it is still open `within` seconds on."""
    sends = iter(pieces)
    with socket.create_connection(address, timeout=PACE) as conn:
        deadline = time.monotonic() + within
        while time.monotonic() < deadline:
            try:
                piece = next(sends, b"")
                if piece:
                    conn.sendall(piece)
                while conn.recv(65536):
                    pass
                return True  # end of stream: the server closed it
            except TimeoutError:
                continue  # still open
            except ConnectionError:
                return True  # reset, or a broken pipe: closed
    return False


def host_port(url: str) -> tuple[str, int]:
    """("127.0.0.1", 8470) of "http://127.0.0.1:8470"."""
    host, _, port = url.removeprefix("http://").partition(":")
    return host, int(port.rstrip("/"))
