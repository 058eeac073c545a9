"""Choosing a ledger's store from its URL.

Each backend is imported only when a URL names it, so a SQLite ledger never loads the
PostgreSQL driver.
"""

from __future__ import annotations

from pathlib import Path

from ledger.errors import LedgerError
from ledger.store import Recorder

SQLITE_PREFIX = "sqlite:///"
POSTGRES_PREFIXES = ("postgresql://", "postgres://")
HTTP_PREFIXES = ("http://", "https://")


def open_store(url: str, *, read_only: bool = False) -> Recorder:
    """The store a ledger URL names: sqlite:///PATH, postgresql://… or a daemon's
    http://HOST:PORT (read-only, see ledger.remote). `read_only` opens it for reading
    alone: a SQLite file as a copy on a read-only disk is, a PostgreSQL database in a
    session that refuses writes; nothing is made in either."""
    if url.startswith(SQLITE_PREFIX):
        from ledger.sqlite import SqliteRecorder

        return SqliteRecorder(url, Path(url.removeprefix(SQLITE_PREFIX)), read_only=read_only)
    if url.startswith(POSTGRES_PREFIXES):
        from ledger.postgres import PostgresRecorder

        return PostgresRecorder(url, read_only=read_only)
    if url.startswith(HTTP_PREFIXES):
        from ledger.remote import RemoteRecorder

        return RemoteRecorder(url)
    raise LedgerError(
        f"unknown ledger URL {url!r}: use sqlite:///PATH, postgresql://HOST/DB or a daemon's http://HOST:PORT"
    )
