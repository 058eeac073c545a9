"""How deep JSON from outside may nest: a bound for every text agentd parses from
someone else (a candidate's protocol lines, an imported or posted transcript, an
OpenEnv frame).

Python's json module recurses once a level, so a line of 200,000 `[` raises
RecursionError, and a value that parses (up to ~1,000 levels) can still overflow the
recursive walks after it (redacting secrets, taking a digest). `loads_bounded` refuses
both with TooDeep, a ValueError that says so, at MAX_NESTING levels: far deeper than
any transcript, protocol line or tool schema needs, and far shallower than any walk's
recursion limit. It costs nothing on the usual text: a text with fewer brackets than the
bound cannot be deeper than it, so only texts with more are measured.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any

MAX_NESTING = 100


class TooDeep(ValueError):
    """JSON nested deeper than the bound."""


def loads_bounded(text: str | bytes, limit: int = MAX_NESTING) -> Any:
    """`json.loads(text)`, raising TooDeep for nesting deeper than `limit` and, as json.loads
    does, json.JSONDecodeError for what is not JSON (here a number too long to read too)
    and UnicodeDecodeError for bytes that are not UTF-8: ValueErrors all."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise TooDeep(f"nested deeper than {limit} levels") from None
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise
    except ValueError:  # past Python's bound on the digits it converts (CVE-2020-10735)
        raise _too_long(text) from None
    opened = text.count(b"[") + text.count(b"{") if isinstance(text, bytes) else text.count("[") + text.count("{")
    if opened > limit and depth_of(value) > limit:
        raise TooDeep(f"nested deeper than {limit} levels")
    return value


def _too_long(text: str | bytes) -> json.JSONDecodeError:
    """What json.loads says of a number it cannot read, where the number starts."""
    doc = text.decode(errors="replace") if isinstance(text, bytes) else text
    digits = sys.get_int_max_str_digits()
    found = re.search(f"[0-9]{{{digits + 1},}}", doc)
    return json.JSONDecodeError(f"a number of more than {digits} digits", doc, found.start() if found else 0)


def depth_of(value: Any) -> int:
    """How many arrays and objects deep `value` nests (0 for a scalar), without recursing."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        deepest = max(deepest, depth)
        stack.extend((child, depth + 1) for child in children)
    return deepest
