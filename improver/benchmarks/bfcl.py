"""BFCL (the Berkeley Function Calling Leaderboard) as agentd tasks.

Its single-turn sets ship in `bfcl_eval/data/BFCL_v4_SET.json`, one task a line
(`{id, question, function}`), and their answers in `possible_answer/` (`{id,
ground_truth: [{function: {param: [allowed, ...]}}]}`). Each becomes a task:

- the ask is the one user turn (a system message, where a live task has one, goes
  before it);
- each function is a tool in JSON Schema (BFCL's `dict`, `float`, `tuple` and `any` are
  `object`, `number`, `array` and `string`), its dots written as underscores as BFCL
  itself does for providers that refuse them; a call to it is answered `ok` (these sets
  grade the calls, not what they return);
- the check is a `call_set` of the ground truth (improver.tasks.callsets), or for an
  irrelevance set `calls_nothing`;
- the solution makes each call with the first allowed value of each argument (one that
  may be left out is left out); the failure is a run that calls nothing, or, where
  calling nothing is right, one that calls the first tool.

The multi-turn sets (stateful API classes), memory, web search, format sensitivity, the
Java and JavaScript sets (their own type conversions) and live relevance (any call
passes) are not imported yet.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from improver.base.errors import ImproverError
from improver.benchmarks.packages import Imported, Skipped, json_lines, package_dir, version_of
from improver.tasks.callsets import LEFT_OUT
from improver.tasks.runs import Call, Run
from improver.tasks.task import Task

PACKAGE = "bfcl_eval"
# The sets imported, and whether calling nothing is the right run.
SETS: dict[str, bool] = {
    "simple_python": False,
    "multiple": False,
    "parallel": False,
    "parallel_multiple": False,
    "irrelevance": True,
    "live_simple": False,
    "live_multiple": False,
    "live_parallel": False,
    "live_parallel_multiple": False,
    "live_irrelevance": True,
}
NOT_YET: dict[str, str] = {
    "multi_turn": "its tasks run over stateful API classes through several turns",
    "memory": "it needs a memory backend and a prior conversation",
    "web_search": "it needs a live web search",
    "format_sensitivity": "it grades the format of text answers, not calls",
    "simple_java": "its arguments are Java source, with conversions of their own",
    "simple_javascript": "its arguments are JavaScript source, with conversions of their own",
    "live_relevance": "any call passes it, so no check could fail a wrong one",
}
_TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": "string"}
_PLACEHOLDER: dict[str, Any] = {"string": "x", "integer": 1, "number": 1.0, "boolean": True, "array": [], "object": {}}


def data_dir() -> Path:
    return package_dir(PACKAGE) / "data"


def known_sets() -> str:
    return ", ".join(SETS)


def set_problem(name: str) -> str | None:
    """Why `name` is no set this import takes (with the sets it takes), or None."""
    if name in SETS:
        return None
    why = next((why for prefix, why in NOT_YET.items() if name.startswith(prefix)), None)
    if why:
        return f"BFCL set {name!r} is not imported yet: {why}; the sets are {known_sets()}"
    return f"no BFCL set named {name!r}; the sets are {known_sets()}"


def import_set(name: str, profile: str, limit: int | None = None) -> Imported:
    """The tasks of BFCL set `name`, the first `limit` of them when given."""
    wrong = set_problem(name)
    if wrong:
        raise ImproverError(wrong)
    folder = data_dir()
    imported = Imported()
    rows = json_lines(folder / f"BFCL_v4_{name}.json", imported)
    answers = {} if SETS[name] else _answers(folder / "possible_answer" / f"BFCL_v4_{name}.json", imported)
    source = {"benchmark": "bfcl", "set": name, "package": version_of(PACKAGE)}
    for row in rows[:limit]:
        ident = str(row.get("id", "?"))
        try:
            task = _task(row, answers.get(ident), SETS[name], profile, source)
        except _Unfit as exc:
            imported.skipped.append(Skipped(ident, str(exc)))
            continue
        imported.tasks.append(task)
    return imported


class _Unfit(Exception):
    """A row this import cannot make a task of; the message says why."""


def _answers(path: Path, imported: Imported) -> dict[str, list[Any]]:
    return {
        str(row["id"]): row["ground_truth"]
        for row in json_lines(path, imported)
        if "id" in row and isinstance(row.get("ground_truth"), list)
    }


def _task(row: dict[str, Any], truth: list[Any] | None, irrelevant: bool, profile: str, source: dict[str, Any]) -> Task:
    ident = row.get("id")
    functions = row.get("function")
    if not isinstance(ident, str) or not isinstance(functions, list) or not functions:
        raise _Unfit("it has no id or no functions")
    tools = [_tool(f) for f in functions]
    names = [t["name"] for t in tools]
    if len(set(names)) != len(names):
        raise _Unfit("two of its functions have one name once dots are underscores")
    ask = _ask(row.get("question"))
    if irrelevant:
        checks: list[dict[str, Any]] = [{"check": "calls_nothing"}]
        solution = Run(answer="None of the tools offered can do that.")
        failures = (Run(calls=(_any_call(tools[0]),), why="a run that calls a tool the ask has no use for"),)
    else:
        if truth is None:
            raise _Unfit("it has no possible answer")
        expected = [_expected(entry) for entry in truth]
        unknown = next((e["tool"] for e in expected if e["tool"] not in names), None)
        if unknown:
            raise _Unfit(f"its answer calls {unknown}, which it does not offer")
        checks = [{"check": "call_set", "calls": expected}]
        solution = Run(calls=tuple(_gold(e, tools) for e in expected), answer="Done.")
        failures = (Run(why="a run that calls nothing"),)
    return Task(
        name=f"bfcl-{ident}",
        profile=profile,
        task=ask,
        tools=tools,
        standins=[],
        checks=checks,
        source={**source, "id": ident},
        solution=solution,
        failures=failures,
    )


def _ask(question: Any) -> str:
    if not isinstance(question, list) or len(question) != 1 or not isinstance(question[0], list):
        raise _Unfit("it is a conversation of several turns; single-turn tasks are imported")
    messages = question[0]
    if not messages or not all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in messages):
        raise _Unfit("its question is not a list of messages with text")
    roles = [m.get("role") for m in messages]
    if "assistant" in roles or "user" not in roles or any(r not in ("system", "user") for r in roles):
        raise _Unfit("its question holds more than a system message and the user's")
    return "\n\n".join(m["content"] for m in messages)


def tool_name(function: str) -> str:
    return re.sub(r"\.", "_", function)


def _tool(function: Any) -> dict[str, Any]:
    if not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise _Unfit("a function has no name")
    parameters = function.get("parameters")
    if not isinstance(parameters, dict):
        raise _Unfit(f"function {function['name']} has no parameters")
    return {
        "name": tool_name(function["name"]),
        "description": str(function.get("description", "")),
        "parameters": json_schema(parameters),
        "changes": True,
        "match": "input",
    }


def json_schema(parameter: dict[str, Any]) -> dict[str, Any]:
    """A BFCL parameter description in JSON Schema."""
    kind = parameter.get("type", "string")
    schema: dict[str, Any] = {"type": _TYPES.get(kind, kind)}
    for key in ("description", "enum", "default"):
        if key in parameter:
            schema[key] = parameter[key]
    if isinstance(parameter.get("properties"), dict):
        schema["properties"] = {k: json_schema(v) for k, v in parameter["properties"].items() if isinstance(v, dict)}
    if isinstance(parameter.get("items"), dict):
        schema["items"] = json_schema(parameter["items"])
    if isinstance(parameter.get("required"), list):
        schema["required"] = [r for r in parameter["required"] if isinstance(r, str)]
    return schema


def _expected(entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict) or len(entry) != 1:
        raise _Unfit("an answer is not one function and its arguments")
    (function, arguments), *_ = entry.items()
    if not isinstance(arguments, dict) or not all(isinstance(v, list) for v in arguments.values()):
        raise _Unfit(f"the answer's arguments to {function} are not lists of allowed values")
    return {"tool": tool_name(function), "arguments": arguments}


def _gold(expected: dict[str, Any], tools: list[dict[str, Any]]) -> Call:
    schema = next(t["parameters"] for t in tools if t["name"] == expected["tool"])
    required = set(schema.get("required", []))
    arguments = {}
    for name, allowed in expected["arguments"].items():
        given = [v for v in allowed if v != LEFT_OUT]
        if not given or (allowed[0] == LEFT_OUT and name not in required):
            continue
        arguments[name] = _concrete(given[0])
    return Call(expected["tool"], arguments)


def _concrete(value: Any) -> Any:
    """One right value of an allowed one: an object in an answer maps each key to its
    own allowed values (the first is taken, one that may be left out is), a list holds
    such objects or plain values."""
    if isinstance(value, dict):
        return {
            key: _concrete(allowed[0])
            for key, allowed in value.items()
            if isinstance(allowed, list) and allowed and allowed[0] != LEFT_OUT
        }
    if isinstance(value, list):
        return [_concrete(v) for v in value]
    return value


def _any_call(tool: dict[str, Any]) -> Call:
    properties = tool["parameters"].get("properties", {})
    arguments = {
        name: _PLACEHOLDER.get(properties.get(name, {}).get("type", "string"), "x")
        for name in tool["parameters"].get("required", [])
    }
    return Call(tool["name"], arguments)
