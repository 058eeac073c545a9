r"""`script:PATH`: a model that answers from a rules file, for tests, trials and the demo.

The rules file is TOML: a list of `[[rule]]` tables, tried in order; the first whose
conditions all hold gives the answer. A rule with no conditions matches anything, so a
last such rule is the fallback.

    [[rule]]
    name = "heed the lesson"               # optional; errors and logs use it
    system_contains = "never pay"          # the system prompt holds this text
    last_contains = ["invoice", "pay"]     # the last user or tool message holds both
    text = "I will not pay an invoice's own payee; asking first."

    [[rule]]
    name = "read the invoice first"
    turn = 1                               # the first answer of the session
    tools_offered = "read_invoice"
    [[rule.calls]]
    name = "read_invoice"
    arguments = { number = 23 }

    [[rule]]
    name = "a provider that fails"
    last_contains = "flaky"
    error = "provider"

    [[rule]]
    text = "Done."                         # no conditions: the fallback

Conditions (every one given must hold; text matching ignores case):
- `system_contains`, `system_not_contains`: text (or a list: all / none of them) in the
  system prompt (every system message, joined).
- `last_contains`, `last_not_contains`: the same, for the last user or tool message.
- `tools_offered`: a tool name (or a list) that must be among the tools offered.
- `turn`: a number (or a list): the count of assistant messages so far, plus one.
- `task_matches`, `last_matches`: a regular expression searched in the task (the first
  user message) or the last user or tool message, both lower-cased. Its named groups,
  `(?P<number>\d+)`, fill `{number}` in the reply's text and argument strings, so one
  rule can answer many tasks.

Replies: `text` (the answer's text), `[[rule.calls]]` (tool calls, each a `name` and an
`arguments` table; with `text` too the answer carries both), or `error = "provider"` (the
call fails as a provider that failed through every retry would: the run ends *errored*).
Tool call ids are `call_<turn>_<n>`, the same on every run. `delay = SECONDS` makes the
rule's answer (or error) come that long after it is asked for: a slow model, which a
call's deadline cuts off as it would a real one, and which holds a session in a model
call for as long as a test needs.

Token counts are whitespace-separated words, so budgets are exercised: in, the words of
every message's text and tool-call arguments; out, the words of the answer's text and
its calls' arguments. `max_tokens` is honoured over the whole call, as a budget needs:
a call never reports more than it, the prompt counted first and the answer's count cut
to what is left (its text is kept whole, so rules stay simple to write).

A conversation no rule matches is a mistake of the rules file's author, neither a
provider's fault nor the agent's: it raises `improver.base.protocol.ModelMisconfigured`,
naming the file, the turn and the last message. In a trial the run is reported as
errored at once, without the retries a provider's fault gets (it would only fail the
same way again), and is never scored; in a live session (`agentd run`) the session is
recorded as errored, with that message as its error; a proposer that meets it stops
the loop with that message as a one-line error. A rules file that does not parse, or a
rule that is not valid, is refused when the model is made, naming the file, the rule
and its line.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentd.errors import AgentdError
from agentd.home import load_toml
from agentd.providers.chat import assistant, text_of, tool_call, tool_names
from improver import Completion, ModelMisconfigured, ProviderError, TokenUsage

Bad = Callable[[str], AgentdError]  # makes an error that names the file, rule and line
TEXT_CONDITIONS = ("system_contains", "system_not_contains", "last_contains", "last_not_contains")
PATTERN_CONDITIONS = ("task_matches", "last_matches")
RULE_KEYS = ("name", *TEXT_CONDITIONS, *PATTERN_CONDITIONS, "tools_offered", "turn", "text", "calls", "error", "delay")
PLACEHOLDER = re.compile(r"\{(\w+)\}")
CALL_KEYS = ("name", "arguments")
RULE_HEADER = re.compile(r"^\s*\[\[\s*rule\s*\]\]")


@dataclass(frozen=True)
class Conversation:
    """What rules look at in a conversation; text lower-cased for matching."""

    system: str
    task: str  # the first user message
    last: str
    tools: frozenset[str]
    turn: int
    quote: str  # the last user or tool message as written, cut short, for errors

    @classmethod
    def of(cls, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Conversation:
        system = "\n".join(text_of(m.get("content")) for m in messages if m.get("role") == "system")
        task = next((text_of(m.get("content")) for m in messages if m.get("role") == "user"), "")
        last = next((text_of(m.get("content")) for m in reversed(messages) if m.get("role") in ("user", "tool")), "")
        turn = 1 + sum(1 for m in messages if m.get("role") == "assistant")
        return cls(system.lower(), task.lower(), last.lower(), frozenset(tool_names(tools)), turn, last[:80])


@dataclass(frozen=True)
class ScriptRule:
    label: str  # `rule 2 ("pay")`, for messages
    system_contains: tuple[str, ...] = ()
    system_not_contains: tuple[str, ...] = ()
    last_contains: tuple[str, ...] = ()
    last_not_contains: tuple[str, ...] = ()
    task_matches: re.Pattern[str] | None = None
    last_matches: re.Pattern[str] | None = None
    tools_offered: tuple[str, ...] = ()
    turn: tuple[int, ...] = ()
    text: str | None = None
    calls: tuple[tuple[str, str], ...] = ()  # (name, arguments as JSON text)
    error: bool = False
    delay: float = 0.0  # seconds before the answer comes

    def matches(self, seen: Conversation) -> dict[str, str] | None:
        """The captured groups when every condition holds, else None."""
        if not (
            all(s in seen.system for s in self.system_contains)
            and not any(s in seen.system for s in self.system_not_contains)
            and all(s in seen.last for s in self.last_contains)
            and not any(s in seen.last for s in self.last_not_contains)
            and seen.tools.issuperset(self.tools_offered)
            and (not self.turn or seen.turn in self.turn)
        ):
            return None
        captured: dict[str, str] = {}
        for pattern, text in ((self.task_matches, seen.task), (self.last_matches, seen.last)):
            if pattern is None:
                continue
            found = pattern.search(text)
            if found is None:
                return None
            captured.update({k: v for k, v in found.groupdict().items() if v is not None})
        return captured

    def reply(self, turn: int, captured: dict[str, str]) -> dict[str, Any]:
        calls = [
            tool_call(f"call_{turn}_{i}", name, json.dumps(_fill(json.loads(args), captured), ensure_ascii=False))
            for i, (name, args) in enumerate(self.calls, 1)
        ]
        return assistant(_fill(self.text, captured), calls)


def _fill(value: Any, captured: dict[str, str]) -> Any:
    """Puts captured groups into {name} placeholders of every string in `value`."""
    if isinstance(value, str):
        return PLACEHOLDER.sub(lambda m: captured.get(m.group(1), m.group(0)), value)
    if isinstance(value, list):
        return [_fill(v, captured) for v in value]
    if isinstance(value, dict):
        return {k: _fill(v, captured) for k, v in value.items()}
    return value


class ScriptModel:
    def __init__(self, name: str, path: Path, rules: list[ScriptRule]) -> None:
        self.name = name
        self.path = path
        self.rules = rules

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        seen = Conversation.of(messages, tools)
        rule, captured = next(((r, c) for r in self.rules if (c := r.matches(seen)) is not None), (None, {}))
        if rule is None:
            raise ModelMisconfigured(
                f"{self.path}: no rule matches turn {seen.turn} (last message: {seen.quote!r}); "
                "add one, or end the file with a rule without conditions"
            )
        if rule.delay:
            await asyncio.sleep(rule.delay)
        if rule.error:
            raise ProviderError(f"{self.name}: {rule.label} scripts a provider error")
        message = rule.reply(seen.turn, captured)
        return Completion(message, _within(TokenUsage(_words_in(messages), _words(message)), max_tokens), self.name)


def load_script(name: str, path: Path) -> ScriptModel:
    """Reads and checks a rules file; AgentdError names the file, rule and line."""
    if not path.is_file():
        raise AgentdError(
            f"{name}: no rules file at {path}; check the path (a relative one starts at the profile's folder)"
        )
    data = load_toml(path)
    extra = sorted(set(data) - {"rule"})
    if extra:
        raise AgentdError(f"{path}: unknown key {extra[0]!r}; a rules file holds only [[rule]] tables")
    raw_rules = data.get("rule")
    if not isinstance(raw_rules, list) or not raw_rules:
        raise AgentdError(f"{path}: no rules; add at least one [[rule]] table")
    lines = _header_lines(path)
    if len(lines) != len(raw_rules):
        lines = []  # rules written inline: TOML gives no line to point at
    return ScriptModel(name, path, [_rule(path, lines, i, raw) for i, raw in enumerate(raw_rules)])


def _header_lines(path: Path) -> list[int]:
    text = path.read_text(encoding="utf-8")
    return [n for n, line in enumerate(text.splitlines(), 1) if RULE_HEADER.match(line)]


def _rule(path: Path, lines: list[int], index: int, raw: Any) -> ScriptRule:
    label = f"rule {index + 1}"
    if isinstance(raw, dict) and isinstance(raw.get("name"), str):
        label += f" ({raw['name']!r})"
    where = f"{path}:{lines[index]}" if lines else str(path)

    def bad(problem: str) -> AgentdError:
        return AgentdError(f"{where}: {label}: {problem}")

    if not isinstance(raw, dict):
        raise bad("must be a table")
    unknown = sorted(set(raw) - set(RULE_KEYS))
    if unknown:
        raise bad(f"unknown key {unknown[0]!r}; a rule's keys are {', '.join(RULE_KEYS)}")
    if "name" in raw and not isinstance(raw["name"], str):
        raise bad("name must be a string")
    fields: dict[str, Any] = {key: tuple(s.lower() for s in _strings(raw, key, bad)) for key in TEXT_CONDITIONS}
    for key in PATTERN_CONDITIONS:
        fields[key] = _pattern(raw.get(key), key, bad)
    fields["tools_offered"] = _strings(raw, "tools_offered", bad)
    fields["turn"] = _turns(raw.get("turn"), bad)
    fields["delay"] = _delay(raw.get("delay", 0.0), bad)
    fields.update(_reply(raw, bad))
    return ScriptRule(label, **fields)


def _strings(raw: dict[str, Any], key: str, bad: Bad) -> tuple[str, ...]:
    value = raw.get(key, [])
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not all(isinstance(v, str) and v for v in values):
        raise bad(f"{key} must be a non-empty string or a list of them")
    return tuple(values)


def _pattern(value: Any, key: str, bad: Bad) -> re.Pattern[str] | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise bad(f"{key} must be a regular expression")
    try:
        return re.compile(value, re.DOTALL)
    except re.error as exc:
        raise bad(f"{key} is not a valid regular expression ({exc})") from None


def _turns(value: Any, bad: Bad) -> tuple[int, ...]:
    if value is None:
        return ()
    values = value if isinstance(value, list) else [value]
    if not values or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values):
        raise bad("turn must be a number from 1 up, or a list of them")
    return tuple(values)


def _delay(value: Any, bad: Bad) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
        raise bad(f"delay must be a number of seconds, 0 or more, not {value!r}")
    return float(value)


def _reply(raw: dict[str, Any], bad: Bad) -> dict[str, Any]:
    if "error" in raw:
        if raw["error"] != "provider":
            raise bad(f'error must be "provider", not {raw["error"]!r}')
        if "text" in raw or "calls" in raw:
            raise bad("a rule with error gives no text or calls")
        return {"error": True}
    if "text" in raw and not isinstance(raw["text"], str):
        raise bad("text must be a string")
    calls = raw.get("calls", [])
    if not isinstance(calls, list):
        raise bad("calls must be a list of tables ([[rule.calls]])")
    if not calls and "text" not in raw:
        raise bad('gives no reply; add text, [[rule.calls]] or error = "provider"')
    return {"text": raw.get("text"), "calls": tuple(_call(n, c, bad) for n, c in enumerate(calls, 1))}


def _call(number: int, raw: Any, bad: Bad) -> tuple[str, str]:
    if not isinstance(raw, dict):
        raise bad(f"call {number} must be a table with a name and arguments")
    unknown = sorted(set(raw) - set(CALL_KEYS))
    if unknown:
        raise bad(f"call {number}: unknown key {unknown[0]!r}; a call's keys are {', '.join(CALL_KEYS)}")
    name, arguments = raw.get("name"), raw.get("arguments", {})
    if not isinstance(name, str) or not name:
        raise bad(f"call {number} needs a name (the tool to call)")
    if not isinstance(arguments, dict):
        raise bad(f"call {number}: arguments must be a table")
    try:
        return name, json.dumps(arguments, ensure_ascii=False)
    except TypeError:
        raise bad(
            f"call {number}: arguments hold a date or time, which JSON cannot carry; write it as a string"
        ) from None


def _words(message: dict[str, Any]) -> int:
    """Whitespace-separated words in a message's text and its tool calls' arguments."""
    count = len(text_of(message.get("content")).split())
    for call in message.get("tool_calls") or []:
        count += len(str(call.get("function", {}).get("arguments", "")).split())
    return count


def _words_in(messages: list[dict[str, Any]]) -> int:
    return sum(_words(m) for m in messages)


def _within(usage: TokenUsage, max_tokens: int | None) -> TokenUsage:
    """What the call reports using, at most `max_tokens`: the prompt first, then the answer."""
    if max_tokens is None:
        return usage
    tokens_in = min(usage.tokens_in, max(max_tokens, 0))
    return TokenUsage(tokens_in, min(usage.tokens_out, max(max_tokens, 0) - tokens_in))
