"""Git, hardened: agentd's own trusted tool, run on repositories agentd made itself.

Git is not candidate code, so it runs outside the sandbox (it must write the clones'
own git directories, which no sandbox is ever given). What could make it run someone
else's code is turned off instead:

- no system or global configuration (`GIT_CONFIG_NOSYSTEM`, `GIT_CONFIG_GLOBAL` is
  /dev/null, `HOME` an empty directory), no attributes file of the user's;
- hooks (`core.hooksPath` /dev/null), the filesystem monitor and the pager off on every
  call, and handed down to every git it starts; external diffs and textconv off on
  every command that shows a diff (`--no-ext-diff --no-textconv`);
- `GIT_CEILING_DIRECTORIES` at the repository's parent, so git never walks up out of
  the directory it is given into a repository around it;
- no prompt for credentials, no replace objects, a fixed author and date, and an
  environment made only of these (nothing of the caller's).

Filter drivers exist only where a configuration defines them, and the only
configurations read are the clones' own, which git wrote. A copy that holds a
`.gitattributes`, a `.gitmodules`, a `.git` or a symbolic link of its own is refused by
the caller before git reads it (improver/code/git.py).
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from sandbox.runner import SandboxError

GIT = "/usr/bin/git"
TIMEOUT = 300.0  # seconds any one git command may take
# Set on every call with -c, so they hold whatever a repository's own config says.
HARDENED = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "core.attributesFile=/dev/null",
    "core.askPass=",
    "core.sshCommand=false",
    "protocol.allow=never",
    "protocol.file.allow=always",
    "init.defaultBranch=main",
    "safe.directory=*",
    "user.name=agentd",
    "user.email=agentd@localhost",
    "commit.gpgSign=false",
)
FIXED_DATE = "2000-01-01T00:00:00Z"
SHOWS_DIFFS = ("diff", "show", "log")


class GitError(SandboxError):
    """A git command failed; the message says which and what it said."""


def environment(repo: Path, home: str) -> dict[str, str]:
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": home,
        "XDG_CONFIG_HOME": home,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_ATTR_NOSYSTEM": "1",
        "GIT_CEILING_DIRECTORIES": str(repo.resolve().parent),
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_NO_REPLACE_OBJECTS": "1",
        "GIT_PAGER": "cat",
        "PAGER": "cat",
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_AUTHOR_DATE": FIXED_DATE,
        "GIT_COMMITTER_DATE": FIXED_DATE,
    }


def run_git(args: Sequence[str], repo: Path, stdin: bytes = b"") -> bytes:
    """`git ARGS` in `repo`, hardened; its standard output, or GitError with its last line."""
    argv = [GIT]
    for setting in HARDENED:
        argv += ["-c", setting]
    if args and args[0] in SHOWS_DIFFS:
        args = (args[0], "--no-ext-diff", "--no-textconv", *args[1:])
    with tempfile.TemporaryDirectory(prefix="agentd-git-home-") as home:
        try:
            done = subprocess.run(
                [*argv, *args], cwd=repo, input=stdin, capture_output=True, env=environment(repo, home), timeout=TIMEOUT
            )
        except subprocess.TimeoutExpired:
            raise GitError(f"git {args[0]} took more than {TIMEOUT:g} seconds") from None
        except OSError as exc:
            raise GitError(f"cannot run git: {exc.strerror or exc}") from None
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()[-1:] or [f"exit status {done.returncode}"]
        raise GitError(f"git {args[0]} failed: {said[0]}")
    return done.stdout
