"""What a patch touches, for the installer's --allow, is read from every header of the patch
and as git itself reads it: a second file smuggled past the first file's hunk, or the old
side of a rename, is named."""

from __future__ import annotations

from pathlib import Path

from improver.base.variant import Variant
from improver.code.git import init_checkout
from improver.code.release import Commands, Release
from improver.trust.install import check_allow

SMUGGLED = b"""diff --git a/agent.py b/agent.py
--- a/agent.py
+++ b/agent.py
@@ -1,2 +1,2 @@
 a
-b
+c
--- a/secret.py
+++ b/secret.py
@@ -1,2 +1,2 @@
 x
-y
+z
"""

RENAMED = b"""diff --git a/secret.py b/agent2.py
similarity index 100%
rename from secret.py
rename to agent2.py
"""


def checkout(tmp_path: Path) -> Path:
    folder = tmp_path / "code"
    folder.mkdir()
    (folder / "agent.py").write_text("a\nb\n")
    (folder / "secret.py").write_text("x\ny\n")
    init_checkout(folder, "start")
    return folder


def release(files: tuple[str, ...]) -> Release:
    return Release(
        "0" * 16,
        "c" * 64,
        "p" * 32,
        "1" * 40,
        "2" * 64,
        Commands("", "", "python3 agent.py"),
        files,
        Variant("o", "", ("m",)),
        {},
        "3" * 64,
        4,
        0.0125,
        "newcombe",
    )


def test_a_file_after_another_files_hunk_is_named_as_git_reads_the_patch(tmp_path: Path) -> None:
    found = check_allow(SMUGGLED, release(("agent.py",)), ("agent.py",), checkout(tmp_path))
    assert not found.ok
    assert found.detail == (
        "it touches secret.py, outside what you allow (agent.py); its publisher says it changes agent.py"
    )


def test_the_old_side_of_a_rename_is_named(tmp_path: Path) -> None:
    found = check_allow(RENAMED, release(("agent2.py",)), ("agent.py", "agent2.py"), checkout(tmp_path))
    assert not found.ok and found.detail.startswith("it touches secret.py, outside what you allow")


def test_a_patch_within_allow_is_named_whole(tmp_path: Path) -> None:
    found = check_allow(SMUGGLED, release(("agent.py", "secret.py")), ("agent.py", "secret.py"), checkout(tmp_path))
    assert found.ok and found.detail == "it touches agent.py, secret.py, within what you allow (agent.py, secret.py)"
