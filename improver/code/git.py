"""The source, its clones and the coder's copy, through hardened git (sandbox.git).

The source checkout is read once, to know its commit and that nothing in it is left
uncommitted, and cloned (a bare mirror) into the round's workshop. Every tree after
that comes from a fresh clone of the mirror at that commit. The coder's copy is only
ever read as files: it is checked for what could make git run anything (a symbolic
link, a `.git` of its own, a `.gitattributes` or `.gitmodules` the commit does not
hold) before its files are copied into a fresh clone, where git takes the diff. A
patch is applied with `git apply`, never `patch`.
"""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from improver.base.errors import ImproverError
from sandbox import GitError, run_git

GIT_DIR = ".git"
# Files through which a copy could tell git to run a filter or fetch a submodule.
GIT_FILES = (".gitattributes", ".gitmodules")
DIFF = ("diff", "--cached", "--binary", "--full-index", "--no-renames", "--no-color")


def source_commit(source: Path) -> str:
    """The commit the checkout at `source` stands at; ImproverError when it is not a git
    checkout's top or holds changes not committed."""
    commit = head_of(source)
    try:
        dirty = run_git(
            ("status", "--porcelain", "--untracked-files=normal", "--ignore-submodules=none"), source
        ).decode()
    except GitError as exc:
        raise ImproverError(f"{source}: {exc}") from None
    if dirty.strip():
        first = dirty.strip().splitlines()[0]
        raise ImproverError(f"{source} has uncommitted changes ({first.strip()} ...): commit or stash them first")
    return commit


def head_of(checkout: Path) -> str:
    """The commit the checkout at `checkout` stands at, changes or none; ImproverError when
    it is not a git checkout's top."""
    if not (checkout / GIT_DIR).exists():
        raise ImproverError(
            f"{checkout} is not a git checkout (no .git at its top): give --source a checkout of the code"
        )
    try:
        top = run_git(("rev-parse", "--show-toplevel"), checkout).decode().strip()
        commit = run_git(("rev-parse", "--verify", "HEAD^{commit}"), checkout).decode().strip()
    except GitError as exc:
        raise ImproverError(f"{checkout}: {exc}") from None
    if Path(top).resolve() != checkout.resolve():
        raise ImproverError(f"{checkout} is inside the checkout at {top}, not its top: give --source {top}")
    return commit


def mirror(source: Path, into: Path) -> Path:
    """A bare clone of the source, which every later clone is made from."""
    target = into / "source.git"
    _run(("clone", "--quiet", "--bare", "--no-local", "--no-hardlinks", str(source.resolve()), str(target)), into)
    return target


def holds(repo: Path, commit: str) -> bool:
    """Whether the repository holds `commit` (a full id) as a commit."""
    try:
        run_git(("cat-file", "-e", f"{commit}^{{commit}}"), repo)
    except GitError:
        return False
    return True


def clone_at(origin: Path, commit: str, target: Path, patch: bytes = b"") -> Path:
    """A fresh clone at `commit`, with `patch` applied (and staged) when there is one."""
    _run(("clone", "--quiet", "--no-checkout", "--no-hardlinks", str(origin), str(target)), target.parent)
    _run(("checkout", "--quiet", "--detach", commit), target)
    if patch:
        _run(("apply", "--index", "--whitespace=nowarn", "-"), target, patch)
    return target


def files_of(clone: Path, target: Path) -> Path:
    """The clone's files without its git directory: what a coder or a build is given,
    readable by the sandbox's own uid whatever the umask here (folders 0755, files 0644,
    or 0755 when git has them executable)."""
    shutil.copytree(clone, target, symlinks=True, ignore=shutil.ignore_patterns(GIT_DIR))
    target.chmod(0o755)
    for root, dirs, files in os.walk(target):
        for name in dirs:
            Path(root, name).chmod(0o755)
        for name in files:
            path = Path(root, name)
            if not path.is_symlink():
                path.chmod(0o755 if path.stat().st_mode & 0o100 else 0o644)
    return target


def refused(copy: Path, clone: Path) -> str | None:
    """Why the coder's copy may not be read by git, or None; `clone` is the commit's."""
    for root, dirs, files in os.walk(copy):
        for name in dirs + files:
            path = Path(root, name)
            where = path.relative_to(copy)
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode):
                return f"{where} is a symbolic link (to {os.readlink(path)}); the copy may hold none"
            if name == GIT_DIR:
                return f"{where} is a git directory or file of the copy's own"
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                return f"{where} is neither a file nor a folder"
            if name in GIT_FILES and not _same_file(path, clone / where):
                return f"{where} is a {name} of the copy's own, which could make git run a filter or fetch"
    return None


def _same_file(path: Path, original: Path) -> bool:
    return original.is_file() and not original.is_symlink() and original.read_bytes() == path.read_bytes()


def diff_of(copy: Path, clone: Path, commit: str) -> bytes:
    """The patch from `commit` to the copy's files, taken in `clone` (a fresh clone at
    `commit`, its files replaced by the copy's). Call `refused` first."""
    for entry in clone.iterdir():
        if entry.name != GIT_DIR:
            shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    shutil.copytree(copy, clone, dirs_exist_ok=True)
    _run(("add", "--all", "--force", "."), clone)
    return _run((*DIFF, commit), clone)


def apply_to(checkout: Path, patch: bytes, *, reverse: bool = False) -> None:
    """Applies `patch` to a checkout's files with `git apply` (after checking it applies);
    `reverse` takes it back out."""
    how = ("--reverse",) if reverse else ()
    _run(("apply", "--check", *how, "-"), checkout, patch)
    _run(("apply", *how, "-"), checkout, patch)


def paths_git_reads(patch: bytes, where: Path) -> list[str]:
    """Every path `git apply` would touch for `patch`, as git itself reads it (both sides
    of a rename or copy): a reading that cannot differ from what applying does."""
    fields = iter(_run(("apply", "--numstat", "-z", "-"), where, patch).decode(errors="replace").split("\0"))
    paths: list[str] = []
    for field in fields:
        if not field:
            continue
        # "added<TAB>deleted<TAB>path"; a rename or copy leaves the path empty and gives
        # its two paths as the next two fields.
        _, _, path = field.split("\t", 2)
        for each in (path,) if path else (next(fields, ""), next(fields, "")):
            if each and each not in paths:
                paths.append(each)
    return paths


def init_checkout(folder: Path, message: str) -> str:
    """Makes `folder` a git checkout holding its files as one commit; returns the commit."""
    _run(("init", "--quiet"), folder)
    _run(("add", "--all", "."), folder)
    _run(("commit", "--quiet", "--no-verify", "-m", message), folder)
    return _run(("rev-parse", "HEAD"), folder).decode().strip()


def _run(args: tuple[str, ...], where: Path, stdin: bytes = b"") -> bytes:
    try:
        return run_git(args, where, stdin)
    except GitError as exc:
        raise ImproverError(str(exc)) from None
