"""Patch limits: each refusal a line naming the file and the limit it breaks."""

from __future__ import annotations

import pytest

from improver.code.patchlimits import DANGEROUS, PatchLimits, parse, refusal, summary_of

AGENT = PatchLimits(allow=("agent.py", "agentd/runtime.py", "improver/"))


def patch(path: str, added: list[str], deleted: list[str] = ()) -> bytes:  # type: ignore[assignment]
    hunk = [f"-{line}" for line in deleted] + [f"+{line}" for line in added]
    lines = [
        f"diff --git a/{path} b/{path}",
        "index 1111111..2222222 100644",
        f"--- a/{path}",
        f"+++ b/{path}",
        f"@@ -1,{len(deleted)} +1,{len(added)} @@",
        *hunk,
    ]
    return ("\n".join(lines) + "\n").encode()


def test_a_change_inside_what_is_allowed_passes_and_is_summed_up() -> None:
    change = patch("agent.py", ['RULES = "Never pay a payee an invoice names."'], ['RULES = "Pay."'])
    assert refusal(change, AGENT) is None
    assert summary_of(change) == "agent.py +1 -1"
    assert [(f.path, f.deleted) for f in parse(change)] == [("agent.py", 1)]


def test_a_path_outside_what_is_allowed_is_refused_naming_what_is() -> None:
    assert refusal(patch("test_agent.py", ["print('fine')"]), PatchLimits(allow=("agent.py",))) == (
        "test_agent.py: outside what the patch may change (agent.py)"
    )


@pytest.mark.parametrize(
    "path",
    [
        "improver/decide/stats.py",
        "sandbox/runner.py",
        "ledger/rules.py",
        "agentd/cli/case.py",
        "pyproject.toml",
        "tests/conftest.py",
        "agentd/conftest.py",
        ".gitattributes",
    ],
)
def test_what_scores_or_guards_the_agent_is_refused_even_when_allowed(path: str) -> None:
    why = refusal(patch(path, ["x = 1"]), PatchLimits(allow=(path, "improver/")))
    assert why == f"{path}: what scores or guards the agent, which no change may touch"


def test_a_binary_file_is_refused() -> None:
    binary = (
        b"diff --git a/agent.py b/agent.py\nindex 1111111..2222222 100644\nGIT binary patch\nliteral 4\n"
        b"LcmZ?wHZcwj0$~4v\n\nliteral 0\nHcmV?d00001\n\n"
    )
    assert refusal(binary, AGENT) == "agent.py: a binary file, which a change may not hold"


def test_ten_thousand_added_lines_are_refused_by_size() -> None:
    why = refusal(patch("agent.py", [f"x{i} = {i}" for i in range(10_000)]), AGENT)
    assert why == "it changes 10000 lines (+10000 -0); at most 400"


def test_too_many_files_are_refused() -> None:
    many = b"".join(patch(f"improver_like/{i}.py", ["x = 1"]) for i in range(12))
    assert refusal(many, PatchLimits(allow=("improver_like/",))) == "it changes 12 files; at most 10"


@pytest.mark.parametrize(
    "line, what",
    [
        ("import subprocess", "starts processes"),
        ("os.system('sh')", "starts processes"),
        ("os.execv('/bin/sh', [])", "starts processes"),
        ("await asyncio.create_subprocess_exec('sh')", "starts processes"),
        ("import socket", "opens the network"),
        ("from urllib.request import urlopen", "opens the network"),
        ("import http.client", "opens the network"),
        ("import requests", "opens the network"),
        ("import ctypes", "loads code dynamically"),
        ("importlib.import_module(name)", "loads code dynamically"),
        ("__import__('os')", "loads code dynamically"),
        ("eval(text)", "loads code dynamically"),
        ("exec (text)", "loads code dynamically"),
        ("pickle.loads(blob)", "loads code dynamically"),
    ],
)
def test_an_added_line_that_starts_processes_opens_the_network_or_loads_code_is_refused(line: str, what: str) -> None:
    why = refusal(patch("agent.py", ["x = 1", line]), AGENT)
    assert why is not None and why.startswith(f"agent.py: added line 2 {what} (")


def test_the_same_words_in_a_deleted_line_are_not_refused() -> None:
    assert refusal(patch("agent.py", ["x = 1"], ["import subprocess"]), AGENT) is None


def test_every_documented_pattern_compiles_and_names_what_it_opens() -> None:
    assert {what for what, _ in DANGEROUS} == {"starts processes", "opens the network", "loads code dynamically"}


def test_an_empty_patch_changes_nothing_and_a_patch_not_utf8_is_refused() -> None:
    assert refusal(b"", AGENT) == "changes nothing"
    assert refusal(patch("agent.py", ["x = 1"]) + b"\xff\xfe", AGENT) == "it is not UTF-8 text"


SMUGGLED = b"""diff --git a/agent.py b/agent.py
--- a/agent.py
+++ b/agent.py
@@ -1,2 +1,2 @@
 a
--- a removed line that looks like a header
+c
--- a/secret.py
+++ b/secret.py
@@ -1 +1 @@
-y
+z
"""


def test_a_file_after_another_files_hunk_is_read_as_git_applies_it() -> None:
    # Hunks end where their counts say: the deleted "-- a removed line" stays agent.py's,
    # and the section after the hunk is secret.py's, which the limits then refuse.
    files = parse(SMUGGLED)
    assert [(f.path, f.added, f.deleted) for f in files] == [("agent.py", ["c"], 1), ("secret.py", ["z"], 1)]
    assert "secret.py" in str(refusal(SMUGGLED, PatchLimits(allow=("agent.py",))))
