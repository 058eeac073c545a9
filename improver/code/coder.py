"""The coder: a model with file tools and a sandboxed command, changing a copy of the code.

It works in a copy of the source without its `.git`: it lists, reads, writes and
replaces text in files there (paths inside the copy only, never through a symbolic link
or into a `.git`), and runs commands in the sandbox with the copy as its only writable
folder and no network (the command is injected: improver/code/codeloop.py runs it). It ends by
answering in words what its change does; that line names the change.

Like the proposer it is shown how the agent built from the code did on the tasks to
choose on, which it failed with what went wrong, and how earlier changes went (only
whether they were kept, never a sealed task's counts). It is never shown a sealed task
nor anything a sealed run said: this module is given none.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from improver.base.nesting import loads_bounded
from improver.base.protocol import Model, TokenUsage
from improver.decide import codewords
from improver.loop.proposer import Failed, Tried

INSTRUCTIONS = """\
You improve a program by changing its code. Its files are in your working folder; use \
the tools to list, read, write and change them, and run_command to run a command there \
(no network). You are shown how the program did on the tasks changes are chosen on, \
which it failed and what went wrong, and what was tried before. Make one small change \
that makes it do better on tasks like those, in general rather than for one task: a \
change is kept only when it does better on tasks you are never shown. Only some files \
may be changed; a change to any other is turned down. When you are done, answer in one \
line saying what your change does."""
MAX_TURNS = 20  # model answers in one round
READ_BYTES = 100_000  # the most of a file read_file returns
LISTED = 500  # the most paths list_files returns
SUMMARY_CHARS = 120

RunCommand = Callable[[str], Awaitable[str]]


def _tool(name: str, description: str, **properties: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {p: {"type": "string", "description": d} for p, d in properties.items()},
                "required": list(properties),
            },
        },
    }


TOOLS = [
    _tool(
        "list_files",
        'Lists the files under a folder of the code ("." for all).',
        path="A folder, relative to the code's top.",
    ),
    _tool("read_file", "Reads a file of the code.", path="The file, relative to the code's top."),
    _tool(
        "write_file",
        "Writes a whole file (made if missing).",
        path="The file, relative to the code's top.",
        content="Its whole new text.",
    ),
    _tool(
        "replace_in_file",
        "Replaces text that occurs exactly once in a file.",
        path="The file.",
        old="The text as it is.",
        new="What replaces it.",
    ),
    _tool(
        "run_command",
        "Runs a shell command in the code's folder, in a sandbox with no network; "
        "answers its exit status and the last lines of its output.",
        command="The command, as for sh -c.",
    ),
]


class PathRefused(Exception):
    """A tool was given a path outside the copy, through a link, or into a .git."""


@dataclass(frozen=True)
class Coded:
    """How the coder's round went: its last words name the change."""

    summary: str
    said: str  # every word and argument it sent, for the canary check
    usage: TokenUsage
    calls: int  # tool calls it made
    problem: str = ""  # why it made no change worth taking, when it did not


def messages_for(
    instructions: str, counts: str, failed: list[Failed], history: list[Tried], shown: int
) -> list[dict[str, Any]]:
    parts = [f"How the program built from this code did on the tasks changes are chosen on: {counts}."]
    if failed:
        parts.append(f"Tasks it failed ({min(shown, len(failed))} of {len(failed)}), with what went wrong:")
        parts += [f"- {f.task}\n  went wrong: {'; '.join(f.wrong) or 'it did not pass'}" for f in failed[:shown]]
    else:
        parts.append("It failed none of the tasks changes are chosen on.")
    if history:
        parts.append("Tried before, and how it went:")
        parts += [f"- {t.change}: {t.went}" for t in history]
    return [{"role": "system", "content": instructions}, {"role": "user", "content": "\n\n".join(parts)}]


async def code(
    model: Model,
    messages: list[dict[str, Any]],
    copy: Path,
    run_command: RunCommand,
    max_turns: int = MAX_TURNS,
    max_tokens: int | None = None,
) -> Coded:
    """Lets the coder work on `copy` until it answers in words or has had `max_turns`;
    under a token budget its answers together are held to `max_tokens`."""
    messages = list(messages)
    usage, calls = TokenUsage(), 0
    said: list[str] = []
    for _ in range(max_turns):
        left = None if max_tokens is None else max_tokens - usage.total
        if left is not None and left <= 0:
            problem = f"the coder used the {max_tokens} tokens the budget left it before it finished"
            return Coded("(the coder did not finish)", "\n".join(said), usage, calls, problem)
        completion = await model.complete(messages, TOOLS, left)
        usage = usage + completion.usage
        message = completion.message
        text = str(message.get("content") or "")
        wanted = message.get("tool_calls") or []
        said += [text, *codewords.call_texts(wanted)]
        if not wanted:
            summary = " ".join(text.split())[:SUMMARY_CHARS] or "(the coder said nothing)"
            problem = "" if calls else "the coder made no tool call"
            return Coded(summary, "\n".join(said), usage, calls, problem)
        messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": wanted})
        for call in wanted:
            calls += 1
            answer = await _answer(call, copy, run_command)
            messages.append({"role": "tool", "tool_call_id": str(call.get("id", "")), "content": answer})
    return Coded(
        "(the coder did not finish)",
        "\n".join(said),
        usage,
        calls,
        f"the coder did not finish within {max_turns} answers",
    )


async def _answer(call: Any, copy: Path, run_command: RunCommand) -> str:
    """What a tool call gets back; a bad call gets an error it can mend, never a crash."""
    function = call.get("function") if isinstance(call, dict) else None
    name = function.get("name") if isinstance(function, dict) else None
    try:
        arguments = loads_bounded(function.get("arguments") or "{}") if isinstance(function, dict) else None
    except (ValueError, TypeError):  # not JSON, nested too deep, a number too long to read; not text
        return "error: the arguments are not valid JSON"
    if not isinstance(arguments, dict) or not all(isinstance(v, str) for v in arguments.values()):
        return "error: the arguments must be a JSON object of strings"
    try:
        if name == "run_command":
            return await run_command(_needs(arguments, "command"))
        return _file_tool(str(name), arguments, copy)
    except PathRefused as exc:
        return f"error: {exc}"
    except KeyError as exc:
        return f"error: {name} needs {exc.args[0]}"
    except (OSError, UnicodeDecodeError) as exc:
        return f"error: {type(exc).__name__}: {getattr(exc, 'strerror', None) or exc}"


def _needs(arguments: dict[str, str], name: str) -> str:
    return arguments[name]


def _file_tool(name: str, arguments: dict[str, str], copy: Path) -> str:
    if name == "list_files":
        folder = inside(copy, arguments.get("path", "."))
        listed = sorted(str(p.relative_to(copy)) for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
        return (
            "\n".join(listed[:LISTED]) + (f"\n... and {len(listed) - LISTED} more" if len(listed) > LISTED else "")
            or "(no files)"
        )
    path = inside(copy, _needs(arguments, "path"))
    if name == "read_file":
        return _read(path, copy)[:READ_BYTES].decode()
    if name == "write_file":
        path.parent.mkdir(parents=True, exist_ok=True)
        _write(path, copy, _needs(arguments, "content"))
        return f"wrote {path.relative_to(copy)}"
    if name == "replace_in_file":
        text, old = _read(path, copy).decode(), _needs(arguments, "old")
        found = text.count(old) if old else 0
        if found != 1:
            return f"error: the text occurs {found} times in {path.relative_to(copy)}; it must occur exactly once"
        _write(path, copy, text.replace(old, _needs(arguments, "new")))
        return f"changed {path.relative_to(copy)}"
    return f"error: there is no tool {name!r}; the tools are {', '.join(t['function']['name'] for t in TOOLS)}"


# Opened so that nothing but a regular file is ever waited on: a FIFO or a device the
# coder's command made would block open() (and agentd with it) for ever.
_NO_WAIT = os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def _regular(fd: int, path: Path, copy: Path) -> None:
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise _not_a_file(path, copy)


def _not_a_file(path: Path, copy: Path) -> PathRefused:
    return PathRefused(
        f"{path.relative_to(copy)} is not a regular file (a FIFO, a socket or a device): only files may be used"
    )


def _read(path: Path, copy: Path) -> bytes:
    fd = os.open(path, os.O_RDONLY | _NO_WAIT)
    _regular(fd, path, copy)
    with os.fdopen(fd, "rb") as file:
        return file.read()


def _write(path: Path, copy: Path, text: str) -> None:
    if path.exists() and not path.is_file():  # a FIFO with no reader would refuse the open less plainly
        raise _not_a_file(path, copy)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | _NO_WAIT, 0o644)
    _regular(fd, path, copy)  # before truncating: what is not a file is left as it was
    with os.fdopen(fd, "wb") as file:
        file.truncate()
        file.write(text.encode())


def inside(copy: Path, relative: str) -> Path:
    """`relative` as a path in the copy: never absolute, never `..`, never a `.git`, and
    never through a symbolic link (one the coder's command made, say)."""
    parts = Path(relative).parts
    if Path(relative).is_absolute() or ".." in parts or ".git" in parts:
        raise PathRefused(f"{relative}: only paths inside the code, outside any .git, may be used")
    path = copy
    for part in parts:
        path = path / part
        if path.is_symlink():
            raise PathRefused(f"{relative}: {path.relative_to(copy)} is a symbolic link")
    return path
