"""An installer holds a release's patch to what the code loop holds a coder's to, read
from the patch itself: a patch `git apply` would take that makes agent.py a link to the
home's key (as `git diff` writes it, and by hand), adds a link under an allowed folder,
makes a file executable or holds a binary file fails the allow check, whatever the
installer allows, and the code loop's own limits refuse it alike."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from improver.code.git import init_checkout
from improver.code.patchlimits import PatchLimits, refusal
from improver.trust.install import check_allow
from tests.improver.test_install import release

KEY = "/home/operator/.agentd/log-key.json"


def hand_made_link(path: str, text: str, target: str) -> bytes:
    """A patch written by hand that replaces `path` (holding `text`) by a link to `target`."""
    lines = text.splitlines()
    return (
        f"diff --git a/{path} b/{path}\ndeleted file mode 100644\n--- a/{path}\n+++ /dev/null\n"
        f"@@ -1,{len(lines)} +0,0 @@\n"
        + "".join(f"-{line}\n" for line in lines)
        + f"diff --git a/{path} b/{path}\nnew file mode 120000\n--- /dev/null\n+++ b/{path}\n"
        f"@@ -0,0 +1 @@\n+{target}\n\\ No newline at end of file\n"
    ).encode()


def checkout(tmp_path: Path) -> Path:
    folder = tmp_path / "code"
    (folder / "lib").mkdir(parents=True)
    (folder / "agent.py").write_text("a\nb\n")
    (folder / "lib" / "tools.py").write_text("x = 1\n")
    init_checkout(folder, "start")
    return folder


def git_diff(code: Path, change: Callable[[Path], None]) -> bytes:
    """The patch `git diff` writes for `change` made to a copy of the checkout."""
    copy = code.parent / f"{code.name}-changed"
    shutil.copytree(code, copy, symlinks=True)
    try:
        change(copy)
        subprocess.run(["git", "add", "--all"], cwd=copy, check=True)
        diff = ["git", "diff", "--cached", "--binary", "--full-index", "--no-renames"]
        return subprocess.run(diff, cwd=copy, check=True, capture_output=True).stdout
    finally:
        shutil.rmtree(copy)


def linked(path: str, target: str) -> Callable[[Path], None]:
    """A change making `path` a symbolic link to `target`, in place of any file there."""

    def change(copy: Path) -> None:
        (copy / path).unlink(missing_ok=True)
        (copy / path).parent.mkdir(exist_ok=True)
        (copy / path).symlink_to(target)

    return change


def executable(path: str) -> Callable[[Path], None]:
    return lambda copy: (copy / path).chmod(0o755)


def binary(path: str) -> Callable[[Path], None]:
    def change(copy: Path) -> None:
        (copy / path).parent.mkdir(exist_ok=True)
        (copy / path).write_bytes(bytes(range(256)) * 4)

    return change


LINK = "a symbolic link (mode 120000), which a change may not hold"
CASES = [
    ("git_link", linked("agent.py", KEY), ("agent.py",), f"agent.py: {LINK}"),
    ("hand_link", None, ("agent.py",), f"agent.py: {LINK}"),
    ("lib_link", linked("lib/key.py", "../../log-key.json"), ("lib/",), f"lib/key.py: {LINK}"),
    (
        "mode",
        executable("agent.py"),
        ("agent.py",),
        "agent.py: a change of its mode (100644 to 100755), which a change may not make",
    ),
    ("binary", binary("lib/tools.py"), ("lib/",), "lib/tools.py: a binary file, which a change may not hold"),
]


@pytest.mark.parametrize("name, change, allow, why", CASES, ids=[c[0] for c in CASES])
def test_a_patch_git_would_apply_that_the_code_loop_refuses_fails_the_allow_check(
    tmp_path: Path, name: str, change: Callable[[Path], None] | None, allow: tuple[str, ...], why: str
) -> None:
    code = checkout(tmp_path)
    patch = hand_made_link("agent.py", "a\nb\n", KEY) if change is None else git_diff(code, change)
    applies = subprocess.run(["git", "apply", "--check", "-"], cwd=code, input=patch, capture_output=True)
    assert applies.returncode == 0, applies.stderr  # the attack is real: git would apply it
    files = sorted(os.listdir(code))

    found = check_allow(patch, release(()), allow, code)
    assert not found.ok and found.detail == f"{why} (the code loop's limits, which a release keeps to)"
    assert refusal(patch, PatchLimits(allow=allow)) == why  # the very limit the code loop holds
    assert sorted(os.listdir(code)) == files and not (code / "agent.py").is_symlink()


def test_an_ordinary_change_under_the_same_allow_still_passes(tmp_path: Path) -> None:
    code = checkout(tmp_path)
    patch = git_diff(code, lambda copy: (copy / "lib" / "tools.py").write_text("x = 2\n"))
    found = check_allow(patch, release(()), ("lib/",), code)
    assert found.ok and found.detail == "it touches lib/tools.py, within what you allow (lib/)"
