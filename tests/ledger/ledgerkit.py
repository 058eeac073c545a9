"""Helpers for the ledger suites: an empty store of each backend, and tampering by SQL.

The PostgreSQL store gets a schema of its own per test, dropped afterwards, since
other suites share the database `test`. It is skipped only when the server cannot be
reached.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest

from ledger import RuleSet, register_funds
from tests.postgres import POSTGRES_URL


def funds_rules() -> RuleSet:
    rules = RuleSet()
    register_funds(rules)
    return rules


def _postgres_reachable() -> str | None:
    try:
        with psycopg.connect(POSTGRES_URL, connect_timeout=5):
            return None
    except psycopg.OperationalError as exc:
        return str(exc).strip().splitlines()[0]


@contextmanager
def temporary_store(backend: str, tmp_path: Path) -> Iterator[str]:
    """The URL of an empty store of `backend` ("sqlite" or "postgres"), removed afterwards."""
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.db'}"
        return
    unreachable = _postgres_reachable()
    if unreachable and os.environ.get("AGENTD_REQUIRE_POSTGRES"):
        pytest.fail(f"PostgreSQL at {POSTGRES_URL} is unreachable ({unreachable}), and AGENTD_REQUIRE_POSTGRES is set")
    if unreachable:
        pytest.skip(f"PostgreSQL at {POSTGRES_URL} is unreachable: {unreachable}")
    schema = f"ledger_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    separator = "&" if "?" in POSTGRES_URL else "?"
    try:
        yield f"{POSTGRES_URL}{separator}options={quote(f'-csearch_path={schema}')}"
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def tamper(url: str, sql: str, params: Sequence[Any] = ()) -> None:
    """Changes the store behind the ledger's back, as an attacker or a bad disk would."""
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        with conn:
            conn.execute(sql, params)
        conn.close()
        return
    with psycopg.connect(url, autocommit=True) as pg:
        pg.execute(sql.replace("?", "%s"), params)


def fetch(url: str, sql: str, params: Sequence[Any] = ()) -> list[Any]:
    if url.startswith("sqlite:///"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        rows = conn.execute(sql, params).fetchall()
        conn.close()
        return rows
    with psycopg.connect(url, autocommit=True) as pg:
        return pg.execute(sql.replace("?", "%s"), params).fetchall()


def tables(url: str) -> set[str]:
    """The names of the tables the store holds."""
    if url.startswith("sqlite:///"):
        return {r[0] for r in fetch(url, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    return {r[0] for r in fetch(url, "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")}


STORE_TABLES = ("ledger_entries", "ledger_head", "ledger_tiles", "ledger_checkpoints", "ledger_snapshot")


def footprint(url: str) -> dict[str, tuple[int, int]]:
    """What a store holds: each table's rows and the bytes of every value in them; and, of
    SQLite, the sizes of the database file and its write-ahead log."""
    found = {}
    for table in STORE_TABLES:
        rows = fetch(url, f"SELECT * FROM {table}")
        size = sum(len(v) if isinstance(v, (bytes, memoryview, str)) else 8 for row in rows for v in row)
        found[table] = (len(rows), size)
    if url.startswith("sqlite:///"):
        path = Path(url.removeprefix("sqlite:///"))
        for file in (path, path.with_name(path.name + "-wal")):
            found[file.name] = (1, file.stat().st_size if file.exists() else 0)
    return found
