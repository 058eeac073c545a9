"""RFC 8785 (JCS) canonical JSON: the one byte form every entry is signed and stored in.

`rfc8785` is the reference; a fast path through `orjson` (sorted keys, no whitespace,
the same minimal string escapes) is taken for values where both are known to agree: no
floats, safe integers, and keys that sort the same by code point as by UTF-16 code
unit. Appends and audits canonicalise every entry, and the pure-Python encoder would
otherwise cost a third of an Ed25519 signature each time.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
import rfc8785

from ledger.errors import LedgerError

MAX_SAFE_INTEGER = 2**53 - 1


def dumps(value: Any, *, inner: Any = None) -> bytes:
    """The JCS bytes of a JSON value; LedgerError if it has no JCS form. A caller that built
    `value` of ASCII keys, strings and safe integers around one part passes that part as
    `inner`: only it can need the reference encoder, so only it is walked."""
    try:
        if plain(value if inner is None else inner):
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        return rfc8785.dumps(value)
    except (rfc8785.CanonicalizationError, TypeError, ValueError, UnicodeEncodeError) as exc:
        raise LedgerError(f"not canonical JSON: {exc}") from None


def loads(raw: bytes) -> Any:
    """Parses JSON bytes that must already be in canonical form."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise LedgerError(f"not JSON: {exc}") from None
    try:
        again = dumps(value)
    except LedgerError:
        # JCS numbers are doubles: digits beyond 2**53 (printed for a large float) read
        # back as a float, not as an integer JCS cannot print.
        value = json.loads(raw, parse_int=_number)
        again = dumps(value)
    if again != raw:
        raise LedgerError("not in canonical form (RFC 8785): re-canonicalising changes the bytes")
    return value


def _number(text: str) -> int | float:
    number = int(text)
    return number if -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER else float(text)


def plain(value: Any) -> bool:
    """True when orjson with sorted keys is guaranteed to print the JCS form."""
    kind = type(value)
    if kind is dict:
        for key, item in value.items():
            # Keys beyond the BMP sort differently by UTF-16 unit (JCS) than by code point.
            if type(key) is not str or not (key.isascii() or max(key) <= "\uffff"):
                return False
            # Strings first: most values are, and they need no call.
            if type(item) is not str and not _plain_scalar(item) and not plain(item):
                return False
        return True
    if kind is list:
        return all(_plain_scalar(item) or plain(item) for item in value)
    return _plain_scalar(value)


def _plain_scalar(value: Any) -> bool:
    kind = type(value)
    if kind is int:
        number: int = value
        return -MAX_SAFE_INTEGER <= number <= MAX_SAFE_INTEGER
    return kind is str or kind is bool or value is None
