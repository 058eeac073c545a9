"""Patch limits: what a code change may touch, how large it may be, and what it may add.

A patch (as improver/code/git.py takes it, `git diff --binary`) is held to four limits, each
refusal a line naming the file and the limit:

- paths: only under the paths allowed (`--allow`; by default agentd's agent runtime,
  `agentd/runtime.py`), and never what scores or guards the agent (GUARDED), whatever
  is allowed;
- size: at most so many files and so many changed lines;
- what it holds: regular files only, as the patch's own headers give their modes: no
  binary file, no symbolic link (nor submodule), no change of a file's mode and no new
  executable file;
- added lines: none that starts a process, opens the network or loads code
  dynamically (DANGEROUS, each pattern with what it opens). A line is matched on its
  words, and the added lines of a Python file, read by `ast` where they parse, on the
  names their imports and assignments bind too (`from os import system as run`, `import
  os as o` then `o.system(...)`). A name built at run time from pieces still gets past
  it: this stops the common mistakes and the obvious attempts, not a determined
  adversary (the sandbox is what holds the rest).

What a patch holds and adds (`content_refusal`) is also what an installer holds a
release's patch to, whatever paths it allows (improver/trust/install.py).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

DEFAULT_ALLOW = ("agentd/runtime.py",)
MAX_FILES = 10
MAX_LINES = 400  # added and deleted together

# What scores or guards the agent in agentd's own tree: never changed by a code change.
GUARDED = (
    "improver/",  # the harness, checks, statistics, seals, gates, the loop, releases
    "sandbox/",
    "ledger/",
    "agentd/cli/",
    "agentd/app/",
    "agentd/wallets.py",
    "agentd/secrets.py",
    "agentd/claims.py",
    "agentd/home.py",
    "tests/",
    "bench/",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "conftest.py",
    ".ci/",
    ".github/",
    ".gitattributes",
    ".gitmodules",
)

# What of os (and of posix and nt, which os takes them from) starts a process.
OS_PROCESS = r"system|popen|exec\w*|spawn\w*|fork\w*|posix_spawn\w*|startfile"

# (what it does, pattern): an added line matching any is refused.
DANGEROUS: tuple[tuple[str, str], ...] = (
    ("starts processes", r"\bsubprocess\b"),
    ("starts processes", rf"\bos\s*\.\s*({OS_PROCESS})\b"),
    ("starts processes", r"\b(pty|multiprocessing|concurrent\.futures\.process)\b"),
    ("starts processes", r"\bcreate_subprocess_(exec|shell)\b"),
    ("opens the network", r"\bsocket\b"),
    ("opens the network", r"\b(urllib|urllib3|http|httpx|requests|aiohttp|ftplib|smtplib|telnetlib|ssl|websockets?)\b"),
    ("opens the network", r"\bopen_connection\b|\bstart_server\b"),
    ("loads code dynamically", r"\b(ctypes|cffi|importlib|runpy|zipimport|pickle|marshal|shelve)\b"),
    ("loads code dynamically", r"\b__import__\b|\b__builtins__\b|\bbuiltins\b"),
    ("loads code dynamically", r"\b(eval|exec|compile)\s*\("),
    ("loads code dynamically", r"\bglobals\s*\(\s*\)|\bgetattr\s*\(\s*(os|sys)\b"),
)
_DANGEROUS = tuple((what, re.compile(pattern)) for what, pattern in DANGEROUS)

# Read by `ast` in added Python lines: the modules a name bound to them starts processes
# through, and the builtins that load code, which a name bound to them calls unspelled.
OS_MODULES = frozenset({"os", "posix", "nt"})
_OS_PROCESS = re.compile(OS_PROCESS)
CODE_BUILTINS = frozenset({"eval", "exec", "compile"})
PYTHON = (".py", ".pyw", ".pyi")
MAX_STATEMENT_LINES = 50  # added lines joined to find the end of one bracketed statement

# File modes as git writes them in a patch's headers: a change holds regular files only.
REGULAR, EXECUTABLE, LINK = "100644", "100755", "120000"
_MODE_LINES = (
    ("old mode ", "old"),
    ("new mode ", "new"),
    ("deleted file mode ", "deleted"),
    ("new file mode ", "created"),
)
_INDEX = re.compile(r"^index [0-9a-f]+\.\.[0-9a-f]+ (\d+)$")


@dataclass
class FileChange:
    path: str
    added: list[str] = field(default_factory=list)
    deleted: int = 0
    binary: bool = False
    old_path: str = ""  # the a/ side, when a header names one other than `path` (a rename, a copy)
    hunks: int = 0
    modes: dict[str, str] = field(default_factory=dict)  # old, new, deleted, created, index: as the headers say


@dataclass(frozen=True)
class PatchLimits:
    allow: tuple[str, ...] = DEFAULT_ALLOW
    max_files: int = MAX_FILES
    max_lines: int = MAX_LINES
    guarded: tuple[str, ...] = GUARDED


def parse(patch: bytes) -> list[FileChange]:
    """The files a `git diff` patch changes, with their added lines and deleted counts.

    A hunk ends where its header's line counts say, as `git apply` reads it: a `---`/`+++`
    pair after it starts another file's section even with no `diff --git` line before it,
    so a file cannot hide in what looks like the tail of another's hunk."""
    files: list[FileChange] = []
    current: FileChange | None = None
    hunk: _Hunk | None = None
    for raw in patch.decode(errors="replace").splitlines():
        if hunk is not None and not hunk.take(raw, current):  # type: ignore[arg-type]
            hunk = None
        if hunk is not None:
            continue
        if raw.startswith("diff --git "):
            current = FileChange(_path_of(raw), old_path=_old_path_of(raw))
            files.append(current)
        elif raw.startswith("--- ") and (current is None or current.hunks):
            # A section of its own: git applies it whatever came before.
            current = FileChange("", old_path="" if raw == "--- /dev/null" else _unquote(raw[4:])[2:])
            files.append(current)
        elif current is None:
            continue
        elif raw.startswith("@@"):
            hunk, current.hunks = _Hunk.of(raw), current.hunks + 1
        elif raw.startswith("GIT binary patch") or raw.startswith("Binary files "):
            current.binary = True
        elif mode := _mode_of(raw):
            current.modes[mode[0]] = mode[1]
        elif raw.startswith("+++ ") and raw != "+++ /dev/null":
            current.path = _unquote(raw[4:])[2:]
        elif raw.startswith("--- ") and raw != "--- /dev/null":
            current.old_path = _unquote(raw[4:])[2:]
        elif raw.startswith(("rename from ", "copy from ")):
            current.old_path = _unquote(raw.split(" ", 2)[2])
        elif raw.startswith(("rename to ", "copy to ")):
            current.path = _unquote(raw.split(" ", 2)[2])
    for change in files:
        change.path = change.path or change.old_path  # a section deleting a file names it on its --- line
    return files


def _mode_of(header: str) -> tuple[str, str] | None:
    """(which, mode) of a header line naming a file's mode, or None."""
    for start, which in _MODE_LINES:
        if header.startswith(start):
            return which, header[len(start) :].strip()
    found = _INDEX.match(header)
    return ("index", found.group(1)) if found else None


_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


@dataclass
class _Hunk:
    """The lines a hunk still holds, old side and new, as its header counts them."""

    old: float
    new: float

    @classmethod
    def of(cls, header: str) -> _Hunk:
        found = _HUNK.match(header)
        if found is None:  # not a header git reads: the rest of the section is taken as its lines
            return cls(float("inf"), float("inf"))
        return cls(int(found.group(1) or 1), int(found.group(2) or 1))

    def take(self, raw: str, change: FileChange) -> bool:
        """Counts `raw` into the hunk; False when the hunk had already ended before it."""
        if self.old <= 0 and self.new <= 0:
            return False
        if raw.startswith("+"):
            change.added.append(raw[1:])
            self.new -= 1
        elif raw.startswith("-"):
            change.deleted += 1
            self.old -= 1
        elif raw.startswith(" ") or raw == "":
            self.old, self.new = self.old - 1, self.new - 1
        elif not raw.startswith("\\"):  # "\ No newline at end of file" belongs to the hunk
            return False
        return True


def _path_of(header: str) -> str:
    """The b/ path of a `diff --git a/X b/X` line (the +++ line, read later, wins)."""
    rest = header[len("diff --git ") :]
    half = rest.rsplit(" b/", 1)
    return _unquote(half[1] if len(half) == 2 else rest)


def _old_path_of(header: str) -> str:
    """The a/ path of a `diff --git a/X b/Y` line."""
    rest = header[len("diff --git ") :]
    half = rest.rsplit(" b/", 1)
    return _unquote(half[0])[2:] if len(half) == 2 else ""


def _unquote(path: str) -> str:
    return path[1:-1] if path.startswith('"') and path.endswith('"') else path


def counts(files: list[FileChange]) -> tuple[int, int]:
    return sum(len(f.added) for f in files), sum(f.deleted for f in files)


def refusal(patch: bytes, limits: PatchLimits) -> str | None:
    """Why the patch is refused, as a line naming the file and the limit, or None."""
    try:
        patch.decode()
    except UnicodeDecodeError:
        return "it is not UTF-8 text"
    files = parse(patch)
    if not files:
        return "changes nothing"
    for f in files:
        if _guarded(f.path, limits.guarded):
            return f"{f.path}: what scores or guards the agent, which no change may touch"
        if not _under(f.path, limits.allow):
            return f"{f.path}: outside what the patch may change ({', '.join(limits.allow)})"
        why = _kind_refusal(f)
        if why:
            return why
    if len(files) > limits.max_files:
        return f"it changes {len(files)} files; at most {limits.max_files}"
    added, deleted = counts(files)
    if added + deleted > limits.max_lines:
        return f"it changes {added + deleted} lines (+{added} -{deleted}); at most {limits.max_lines}"
    return _added_refusal(files)


def content_refusal(patch: bytes) -> str | None:
    """Why what the patch holds or adds is refused, whatever paths it touches and however
    large it is, or None: a binary file, a symbolic link, a mode change, or an added line
    that starts a process, opens the network or loads code."""
    files = parse(patch)
    return next(filter(None, map(_kind_refusal, files)), None) or _added_refusal(files)


def _kind_refusal(f: FileChange) -> str | None:
    """Why the file is not a regular file a change may hold, read from the patch's headers."""
    if f.binary:
        return f"{f.path}: a binary file, which a change may not hold"
    modes = set(f.modes.values())
    if LINK in modes:
        return f"{f.path}: a symbolic link (mode {LINK}), which a change may not hold"
    other = sorted(modes - {REGULAR, EXECUTABLE})
    if other:
        return f"{f.path}: not a regular file (mode {other[0]}), which a change may not hold"
    if "old" in f.modes or "new" in f.modes:
        return f"{f.path}: a change of its mode ({f.modes.get('old')} to {f.modes.get('new')}), which a change may not make"
    if f.modes.get("created") == EXECUTABLE:
        return f"{f.path}: a new executable file (mode {EXECUTABLE}), which a change may not add"
    return None


def _added_refusal(files: list[FileChange]) -> str | None:
    for f in files:
        for number, line in enumerate(f.added, 1):
            for what, pattern in _DANGEROUS:
                found = pattern.search(line)
                if found:
                    return f"{f.path}: added line {number} {what} ({found.group(0).strip()!r} in {line.strip()[:80]!r})"
        if f.path.endswith(PYTHON):
            why = _bound_refusal(f)
            if why:
                return why
    return None


def _bound_refusal(f: FileChange) -> str | None:
    """Why the names the file's added Python lines bind get past the spelling test: one
    bound to what of os starts a process, or to a builtin that loads code, or os itself
    under another name, then used for it. Lines that do not parse are left to the words."""
    statements = list(_statements(f.added))
    bound = _os_names(tree for _, tree in statements)
    for first, tree in statements:
        for node in ast.walk(tree):
            found = _dangerous_use(node, bound)
            if found:
                what, said = found
                number = first + getattr(node, "lineno", 1) - 1
                return f"{f.path}: added line {number} {what} ({said} in {f.added[number - 1].strip()[:80]!r})"
    return None


def _statements(lines: list[str]) -> Iterator[tuple[int, ast.Module]]:
    """Each run of added lines that parses on its own, with its first line's number: a
    line, or one that leaves a bracket open or ends in a backslash with the lines that
    go on with it (a statement over several lines)."""
    number = 0
    while number < len(lines):
        tree, end = _parsed(lines, number)
        if tree is not None:
            yield number + 1, tree
        number = end


def _parsed(lines: list[str], first: int) -> tuple[ast.Module | None, int]:
    """The statement starting at line `first` and where the next begins; None when it
    does not parse, and its lines are left to the words."""
    text = ""
    for end in range(first + 1, min(len(lines), first + MAX_STATEMENT_LINES) + 1):
        text = f"{text}\n{lines[end - 1].strip()}" if text else lines[end - 1].strip()
        try:
            return ast.parse(text), end
        except (SyntaxError, ValueError, RecursionError):
            if not _goes_on(text):
                break
    return None, first + 1


def _goes_on(text: str) -> bool:
    """Whether a statement may go on past `text`: a bracket left open, or a backslash."""
    opened = sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")
    return opened > 0 or text.endswith("\\")


def _os_names(trees: Iterable[ast.Module]) -> set[str]:
    """The names the statements bind to os, posix or nt: by an import, or by assigning
    one such name to another."""
    nodes = [node for tree in trees for node in ast.walk(tree)]
    bound = {a.asname or a.name for n in nodes if isinstance(n, ast.Import) for a in n.names if a.name in OS_MODULES}
    assigned = [
        (target.id, node.value.id)
        for node in nodes
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Name)
        for target in node.targets
        if isinstance(target, ast.Name)
    ]
    while more := {name for name, value in assigned if value in bound} - bound:
        bound |= more
    return bound


def _dangerous_use(node: ast.AST, bound: set[str]) -> tuple[str, str] | None:
    """(what it does, how) when `node` binds or uses a name past the spelling test."""
    if isinstance(node, ast.ImportFrom) and node.module in OS_MODULES:
        for alias in node.names:
            if alias.name == "*":
                return "starts processes", f"all of {node.module}, its process functions too, bound by import *"
            if _OS_PROCESS.fullmatch(alias.name):
                return "starts processes", f"{node.module}.{alias.name} bound as {alias.asname or alias.name!r}"
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id in bound
        and _OS_PROCESS.fullmatch(node.attr)
    ):
        return "starts processes", f"os.{node.attr} through the name {node.value.id!r}"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
        first = node.args[0] if node.args else None
        if isinstance(first, ast.Name) and first.id in bound:
            return "loads code dynamically", f"getattr of os through the name {first.id!r}"
    if isinstance(node, ast.Name) and node.id in CODE_BUILTINS:
        return "loads code dynamically", f"the builtin {node.id}, named"
    return None


def touched(patch: bytes) -> list[str]:
    """Every path the patch names as one it changes, both sides of a rename or copy, in order."""
    paths: list[str] = []
    for f in parse(patch):
        for path in (f.old_path, f.path):
            if path and path not in paths:
                paths.append(path)
    return paths


def outside(paths: list[str], allow: tuple[str, ...]) -> str | None:
    """The first of `paths` not under any of `allow`, or None."""
    return next((p for p in paths if not _under(p, allow)), None)


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    """Whether `path` is one of `prefixes` or under one (a prefix ending in / is a folder)."""
    return any(path == p.rstrip("/") or path.startswith(p.rstrip("/") + "/") for p in prefixes)


def _guarded(path: str, guarded: tuple[str, ...]) -> bool:
    """A guarded folder or file at the top, or a guarded file name anywhere (conftest.py)."""
    name = path.rsplit("/", 1)[-1]
    return _under(path, guarded) or any("/" not in g and name == g for g in guarded)


def summary_of(patch: bytes) -> str:
    """`agent.py +1 -1`, or `a.py, b.py +3 -1`: the files a patch changes and its size."""
    files = parse(patch)
    added, deleted = counts(files)
    names = ", ".join(f.path for f in files[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
    return f"{names or 'no file'} +{added} -{deleted}"
