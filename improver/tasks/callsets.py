"""Call sets: a run's calls judged against calls whose arguments may each take any of
several values, in any order. This is how BFCL's authors grade a function call (their
AST checker), restated here so a task imported from BFCL passes and fails as they score it.

An expected call is `{tool, arguments: {param: [allowed, ...]}}`. A call of the run
matches it when it names the tool; gives every parameter the tool's schema requires;
gives no parameter the schema or the expected call does not name; leaves out only
parameters whose allowed values hold "" (what BFCL writes for "may be left out"); and
gives each parameter a value that is allowed:

- its JSON type is the schema's (an integer for a `number` counts as the number), or
  that of the allowed values (BFCL writes a value that names a variable as a string);
- a string is compared with spaces, `,./-_*^` and case ignored, `'` read as `"`;
- a list is compared item by item, its strings as above; an object key by key, each
  key present in one allowed object (or allowed to be left out); a list of objects
  object by object; anything else by equality.

A run matches a set when it made as many calls as the set holds and each expected call,
in the set's order, takes the first of the run's calls left that matches it (the
authors' own first-fit order, kept so both score alike).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

from improver.tasks.runs import Call

LEFT_OUT = ""  # among a parameter's allowed values: it may be left out
_IGNORED = re.compile(r"[ ,./\-_*^]")
_TYPES: dict[str, type] = {
    "string": str,
    "integer": int,
    "number": float,
    "boolean": bool,
    "array": list,
    "object": dict,
}


def problem(calls: Any) -> str | None:
    """What is wrong with a call set's shape, or None."""
    if not isinstance(calls, list) or not calls:
        return "field 'calls' must be a non-empty list of {tool, arguments}"
    for i, call in enumerate(calls, 1):
        if not isinstance(call, dict) or not isinstance(call.get("tool"), str) or not call["tool"]:
            return f"expected call #{i} needs a 'tool' name"
        arguments = call.get("arguments")
        if not isinstance(arguments, dict) or not all(isinstance(v, list) for v in arguments.values()):
            return f"expected call #{i}: 'arguments' must map each parameter to a list of allowed values"
    return None


def describe(calls: list[dict[str, Any]]) -> str:
    shown = "; ".join(f"{c['tool']}({_allowed_text(c['arguments'])})" for c in calls)
    return (
        "it makes exactly these calls, in any order: " if len(calls) > 1 else "it makes exactly this call: "
    ) + shown


def _allowed_text(arguments: dict[str, list[Any]]) -> str:
    parts = []
    for name, allowed in arguments.items():
        values = [json.dumps(v, ensure_ascii=False) for v in allowed if v != LEFT_OUT]
        optional = " or left out" if LEFT_OUT in allowed else ""
        parts.append(f"{name}: {' or '.join(values) or 'left out'}{optional if values else ''}")
    return ", ".join(parts)


def matches(expected: list[dict[str, Any]], tools: list[dict[str, Any]], made: Sequence[Call]) -> bool:
    if len(made) != len(expected):
        return False
    schemas = {t["name"]: t.get("parameters", {}) for t in tools}
    taken: set[int] = set()
    for want in expected:
        schema = schemas.get(want["tool"], {})
        found = next(
            (i for i, call in enumerate(made) if i not in taken and call_matches(want, schema, call)),
            None,
        )
        if found is None:
            return False
        taken.add(found)
    return True


def call_matches(want: dict[str, Any], schema: Mapping[str, Any], call: Call) -> bool:
    if call.tool != want["tool"] or not isinstance(call.arguments, dict):
        return False
    given, allowed = call.arguments, want["arguments"]
    properties: Mapping[str, Any] = schema.get("properties", {})
    if any(name not in given for name in schema.get("required", [])):
        return False
    for name, value in given.items():
        if name not in properties or name not in allowed:
            return False
        if not value_allowed(value, allowed[name], properties[name]):
            return False
    return all(name in given or LEFT_OUT in values for name, values in allowed.items())


def value_allowed(value: Any, allowed: list[Any], schema: Mapping[str, Any]) -> bool:
    declared = schema.get("type", "string")
    if declared == "number" and type(value) is int:
        value = float(value)
    kind = _TYPES.get(declared, str)
    of_allowed = _first_type(allowed)
    variable = of_allowed is not None and of_allowed is not kind
    given: Any = value  # of any JSON type: the comparisons below are by type
    if type(given) is kind:
        if declared == "array" and not _items_typed(given, allowed, schema.get("items", {})):
            return False
    elif of_allowed is None or type(given) is not of_allowed:
        return False
    else:
        variable = True
    if variable:
        return given in allowed
    if kind is dict:
        return any(_object_allowed(given, candidate) for candidate in allowed if candidate != LEFT_OUT)
    if kind is list and schema.get("items", {}).get("type") == "object":
        return any(_objects_allowed(given, candidate) for candidate in allowed)
    if kind is str:
        return _plain(given) in [_plain(a) for a in allowed if isinstance(a, str)]
    if kind is list:
        return [_plain(v) for v in cast("list[Any]", given)] in [
            [_plain(v) for v in a] for a in allowed if isinstance(a, (list, str))
        ]
    return given in allowed


def _first_type(allowed: list[Any]) -> type | None:
    return next((type(a) for a in allowed if a != LEFT_OUT), None)


def _items_typed(value: Any, allowed: list[Any], items: Mapping[str, Any]) -> bool:
    """Each item of a list is of the schema's item type (or of the allowed items' type),
    against at least one allowed value; one that is no list (left out) asks nothing."""
    kind = _TYPES.get(items.get("type", ""))
    if kind is None:
        return True
    for candidate in allowed:
        if not isinstance(candidate, list):
            return True
        of_candidate = _first_type(candidate)
        if all(type(v) is kind or type(v) is of_candidate for v in value):
            return True
    return False


def _object_allowed(value: Any, candidate: Any) -> bool:
    if not isinstance(candidate, dict):
        return False
    for key, item in value.items():
        if key not in candidate or _plain(item) not in [_plain(a) for a in candidate[key]]:
            return False
    return all(key in value or LEFT_OUT in values for key, values in candidate.items())


def _objects_allowed(value: Any, candidate: Any) -> bool:
    if len(value) != len(candidate):
        return False
    return all(isinstance(v, dict) and _object_allowed(v, c) for v, c in zip(value, candidate, strict=True))


def _plain(value: Any) -> Any:
    """A string as the authors compare it; anything else as it is."""
    if not isinstance(value, str):
        return value
    return _IGNORED.sub("", value).lower().replace("'", '"')
