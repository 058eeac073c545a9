"""Digests of JSON values: SHA-256 over their RFC 8785 (JCS) canonical bytes.

Tasks, task sets and variants are named by such digests, so anyone holding the same
content gets the same name, on any machine, whatever order its keys were written in.
"""

from __future__ import annotations

import hashlib
from typing import Any

from improver.base.errors import ImproverError
from ledger.canonical import dumps
from ledger.errors import LedgerError


def canonical(value: Any) -> bytes:
    """The JCS bytes of a JSON value; ImproverError when it has none (a NaN, a non-string key)."""
    try:
        return dumps(value)
    except LedgerError as exc:
        raise ImproverError(str(exc)) from None


def digest(value: Any) -> str:
    """SHA-256 of the value's canonical bytes, in hex."""
    return hashlib.sha256(canonical(value)).hexdigest()
