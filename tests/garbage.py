"""What a client or a candidate may send that it should not, as hypothesis strategies:
any bytes, text, JSON of any shape (or of a shape close to what is wanted), and the
tricks that have crashed parsers before: nesting past any bound, a number too long to
read, lone surrogates, NaN, bytes that are not UTF-8."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.strategies import SearchStrategy

# Bounded: a few hundred examples an endpoint, however slow the machine.
FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))

TRICKS: list[bytes] = [
    b"",
    b"   ",
    b"{",
    b"null",
    b"[" * 200_000,
    b"{" * 200_000,
    b'{"a":' * 500 + b"1" + b"}" * 500,
    b"[" * 101 + b"]" * 101,
    b"9" * 5000,
    b'{"a": ' + b"9" * 5000 + b"}",
    b"NaN",
    b"[Infinity, -Infinity]",
    b'"\\ud800"',
    b'{"\\udfff": "\\ud800"}',
    b"\xff\xfe{}",
    b'{"a": "\x00"}',
    b'{"a": 1, "a": 2}',
    b"[1e99999]",
]


def scalars() -> SearchStrategy[Any]:
    return st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20)


def json_values(leaves: SearchStrategy[Any] | None = None) -> SearchStrategy[Any]:
    """JSON of any shape, small."""
    return st.recursive(
        scalars() if leaves is None else leaves,
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
        max_leaves=12,
    )


def objects(keys: Sequence[str], values: SearchStrategy[Any] | None = None) -> SearchStrategy[dict[str, Any]]:
    """JSON objects under the keys a request should have (and others), of any values."""
    values = json_values() if values is None else values
    return st.dictionaries(st.sampled_from(keys) | st.text(max_size=6), values, max_size=len(keys) + 1)


def encoded(values: SearchStrategy[Any]) -> SearchStrategy[bytes]:
    return values.map(lambda value: json.dumps(value).encode())


def garbage(*shapes: SearchStrategy[Any]) -> SearchStrategy[bytes]:
    """Bodies or lines: bytes, text, JSON of any shape and of `shapes`, and the tricks."""
    return st.one_of(
        st.binary(max_size=300),
        st.text(max_size=200).map(lambda text: text.encode("utf-8", "surrogatepass")),
        encoded(json_values()),
        *(encoded(shape) for shape in shapes),
        st.sampled_from(TRICKS),
    )
