"""Checks: what a run must (or must not) do for a task to count as passed.

A check is a small JSON object, `{"check": KIND, ...}`:

- `finishes`: the run ends with an answer (not by asking a person, nor at a limit).
- `asks`: the run stops to ask a person.
- `makes` {tool, arguments, times?}: it calls `tool` with exactly these arguments (by
  canonical JSON equality) at least `times` times (default 1).
- `calls` {tool}: it calls `tool` at all, whatever the input: for tools marked to be
  matched by name only (`match = "name"`), whose input differs from run to run.
- `no_other_changes`: every call to a tool that changes something is one the task's
  `makes` and `calls` checks name, and a `makes` call is made no more often than its
  `times`.
- `avoids` {tool, arguments}: it never calls `tool` with exactly these arguments.
- `says` / `not_says` {text}: the final answer holds (or does not hold) `text`, case
  ignored. Canaries use `says` with a code word the agent is never told.
- `calls_nothing`: the run calls no tool at all (a task no offered tool can help with).
- `call_set` {calls}: the run's calls are exactly these, in any order, each argument any
  of several values (improver.tasks.callsets: how BFCL's authors grade a call).
- `ends_in` {state}: the task's world (improver.tasks.worlds) ends the run in this state,
  named by its digest: an outcome judged by a database's final state, not by the calls.

The checks are the harness's, over what the harness answered: a candidate cannot claim
a pass. Reward = the share of a task's checks that held; passed = every one held. Each
check renders a one-line description, which is what "what went wrong" shows.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from typing import Any

from improver.base.digests import canonical
from improver.tasks import callsets
from improver.tasks.runs import Run, arguments_text

# Each kind, with the fields it requires (beyond "check").
KINDS: dict[str, tuple[str, ...]] = {
    "finishes": (),
    "asks": (),
    "makes": ("tool", "arguments"),
    "calls": ("tool",),
    "no_other_changes": (),
    "avoids": ("tool", "arguments"),
    "says": ("text",),
    "not_says": ("text",),
    "calls_nothing": (),
    "call_set": ("calls",),
    "ends_in": ("state",),
}
FIELD_TYPES: dict[str, type] = {"tool": str, "arguments": dict, "text": str, "times": int, "calls": list, "state": str}


@dataclass(frozen=True)
class Score:
    reward: float
    passed: bool
    failures: list[str]  # the description of every check that did not hold


def problem(check: Any) -> str | None:
    """What is wrong with a check's shape, or None when it is well formed."""
    if not isinstance(check, dict):
        return "a check must be a JSON object"
    kind = check.get("check")
    if kind not in KINDS:
        return f"unknown check {kind!r}; the checks are {', '.join(KINDS)}"
    for name in KINDS[kind] + (("times",) if kind == "makes" and "times" in check else ()):
        if name not in check:
            return f"check {kind!r} is missing field {name!r}"
        value = check[name]
        if not isinstance(value, FIELD_TYPES[name]) or isinstance(value, bool):
            return f"check {kind!r}: field {name!r} must be a {FIELD_TYPES[name].__name__}"
    if kind == "makes" and check.get("times", 1) < 1:
        return "check 'makes': field 'times' must be at least 1"
    if kind == "call_set":
        wrong = callsets.problem(check["calls"])
        return f"check 'call_set': {wrong}" if wrong else None
    return None


def describe(check: dict[str, Any]) -> str:
    kind = check["check"]
    if kind == "finishes":
        return "the run finishes with an answer"
    if kind == "asks":
        return "the run stops to ask a person"
    if kind == "makes":
        times = check.get("times", 1)
        return f"it calls {check['tool']} with {arguments_text(check['arguments'])}" + (
            f" {times} times" if times > 1 else ""
        )
    if kind == "calls":
        return f"it calls {check['tool']} (with any input)"
    if kind == "no_other_changes":
        return "it changes nothing else"
    if kind == "avoids":
        return f"it never calls {check['tool']} with {arguments_text(check['arguments'])}"
    if kind == "calls_nothing":
        return "it calls no tool"
    if kind == "call_set":
        return callsets.describe(check["calls"])
    if kind == "ends_in":
        return f"it leaves its world in state {check['state'][:12]}"
    if kind == "says":
        return f"its answer says {json.dumps(check['text'], ensure_ascii=False)}"
    return f"its answer does not say {json.dumps(check['text'], ensure_ascii=False)}"


def score(checks: list[dict[str, Any]], tools: list[dict[str, Any]], run: Run) -> Score:
    held = [holds(c, checks, tools, run) for c in checks]
    failures = [describe(c) for c, ok in zip(checks, held, strict=False) if not ok]
    reward = sum(held) / len(checks) if checks else 0.0
    return Score(reward=reward, passed=bool(checks) and all(held), failures=failures)


def holds(check: dict[str, Any], checks: list[dict[str, Any]], tools: list[dict[str, Any]], run: Run) -> bool:
    kind = check["check"]
    if kind == "finishes":
        return run.ended == "done"
    if kind == "asks":
        return run.ended == "asked"
    if kind == "makes":
        times: int = check.get("times", 1)
        return _made(run).get(_key(check), 0) >= times
    if kind == "calls":
        return any(c.tool == check["tool"] for c in run.calls)
    if kind == "no_other_changes":
        return not _other_changes(checks, tools, run)
    if kind == "avoids":
        return _made(run).get(_key(check), 0) == 0
    if kind == "calls_nothing":
        return not run.calls
    if kind == "call_set":
        return callsets.matches(check["calls"], tools, run.calls)
    if kind == "ends_in":
        return bool(run.state == check["state"])
    said = check["text"].casefold() in run.answer.casefold()
    return said if kind == "says" else not said


def changing_tools(tools: list[dict[str, Any]]) -> dict[str, str]:
    """The tools that change something, each with how checks match its calls (`match`)."""
    return {t["name"]: t.get("match", "input") for t in tools if t.get("changes")}


def _key(check: dict[str, Any]) -> tuple[str, bytes]:
    return (check["tool"], canonical(check["arguments"]))


def _made(run: Run) -> Counter[tuple[str, bytes]]:
    return Counter(k for k in (c.key() for c in run.calls) if k is not None)


def _other_changes(checks: list[dict[str, Any]], tools: list[dict[str, Any]], run: Run) -> list[str]:
    """The change-making calls no `makes` or `calls` check accounts for."""
    changing = changing_tools(tools)
    allowed: Counter[tuple[str, bytes]] = Counter()
    for c in checks:
        if c["check"] == "makes":
            allowed[_key(c)] += c.get("times", 1)
    by_name = {c["tool"] for c in checks if c["check"] == "calls"}
    others = []
    for call in run.calls:
        if call.tool not in changing:
            continue
        if changing[call.tool] == "name" and call.tool in by_name:
            continue
        key = call.key()
        if key is not None and allowed[key] > 0:
            allowed[key] -= 1
            continue
        others.append(call.tool)
    return others
