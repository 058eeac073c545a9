"""The bound on how deep JSON from outside may nest."""

from __future__ import annotations

import json
import sys

import pytest

from improver.base.nesting import MAX_NESTING, TooDeep, depth_of, loads_bounded
from improver.base.protocol import decode_line


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_text_up_to_the_bound_parses_as_json_does() -> None:
    for text in ("1", '"[[[["', '{"a": [1, {"b": []}]}', nested(MAX_NESTING), '"' + "[" * 500 + '"'):
        assert loads_bounded(text) == json.loads(text)
        assert loads_bounded(text.encode()) == json.loads(text)


@pytest.mark.parametrize("depth", [MAX_NESTING + 1, 495, 200_000])
def test_deeper_is_refused_whether_or_not_python_could_parse_it(depth: int) -> None:
    with pytest.raises(TooDeep, match=f"nested deeper than {MAX_NESTING} levels"):
        loads_bounded(nested(depth))


def test_what_is_not_json_is_refused_as_json_refuses_it() -> None:
    with pytest.raises(json.JSONDecodeError):
        loads_bounded("{")


def test_depth_counts_arrays_and_objects() -> None:
    assert [depth_of(v) for v in (1, [], {"a": {"b": [1]}}, [[], [[[]]]])] == [0, 1, 3, 4]


def test_a_protocol_line_too_deep_is_a_value_error_saying_so() -> None:
    with pytest.raises(ValueError, match="not a JSON line: nested deeper than 100 levels"):
        decode_line(b"[" * 200_000 + b"\n")


def test_a_number_too_long_to_read_is_not_json_saying_where_it_starts() -> None:
    with pytest.raises(json.JSONDecodeError) as refused:
        loads_bounded('{"a":\n[1, ' + "9" * 5000 + "]}")
    assert refused.value.msg == f"a number of more than {sys.get_int_max_str_digits()} digits"
    assert (refused.value.lineno, refused.value.colno) == (2, 5)
