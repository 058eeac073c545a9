"""Patch limits: what a code change may touch, how large it may be, and what it may add.

A patch (as improver/code/git.py takes it, `git diff --binary`) is held to three limits, each
refusal a line naming the file and the limit:

- paths: only under the paths allowed (`--allow`; by default agentd's agent runtime,
  `agentd/runtime.py`), and never what scores or guards the agent (GUARDED), whatever
  is allowed;
- size: at most so many files and so many changed lines, and no binary file;
- added lines: none that starts a process, opens the network or loads code
  dynamically (DANGEROUS, each pattern with what it opens). A line is matched on its
  words, so a name built at run time from pieces gets past it: this stops the common
  mistakes and the obvious attempts, not a determined adversary (the sandbox is what
  holds the rest).
"""

from __future__ import annotations

import re
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

# (what it does, pattern): an added line matching any is refused.
DANGEROUS: tuple[tuple[str, str], ...] = (
    ("starts processes", r"\bsubprocess\b"),
    ("starts processes", r"\bos\s*\.\s*(system|popen|exec\w*|spawn\w*|fork\w*|posix_spawn\w*|startfile)\b"),
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


@dataclass
class FileChange:
    path: str
    added: list[str] = field(default_factory=list)
    deleted: int = 0
    binary: bool = False
    old_path: str = ""  # the a/ side, when a header names one other than `path` (a rename, a copy)
    hunks: int = 0


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
        if f.binary:
            return f"{f.path}: a binary file, which a change may not hold"
    if len(files) > limits.max_files:
        return f"it changes {len(files)} files; at most {limits.max_files}"
    added, deleted = counts(files)
    if added + deleted > limits.max_lines:
        return f"it changes {added + deleted} lines (+{added} -{deleted}); at most {limits.max_lines}"
    for f in files:
        for number, line in enumerate(f.added, 1):
            for what, pattern in _DANGEROUS:
                found = pattern.search(line)
                if found:
                    return f"{f.path}: added line {number} {what} ({found.group(0).strip()!r} in {line.strip()[:80]!r})"
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
