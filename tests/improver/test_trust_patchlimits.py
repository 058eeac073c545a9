"""The added-line limits read the names a Python file's added lines bind, not only how
they are spelled: `from os import system as run_it`, `from os import popen, execv` and
`import os as o` then `o.system(...)` are refused by the code loop's limits and by an
install alike; what does not parse is still held to the words, and what binds os for
nothing that starts a process still passes."""

from __future__ import annotations

from pathlib import Path

import pytest

from improver.code.patchlimits import PatchLimits, content_refusal, refusal
from improver.trust.install import check_allow
from tests.improver.test_install import release
from tests.improver.test_patchlimits import patch
from tests.improver.test_trust_install import checkout

LIMITS = PatchLimits(allow=("agent.py", "lib/"))


@pytest.mark.parametrize(
    "added, why",
    [
        (
            ["from os import system as run_it", "run_it('cat ~/.agentd/log-key.json')"],
            "added line 1 starts processes (os.system bound as 'run_it' in 'from os import system as run_it')",
        ),
        (
            ["from os import popen, execv"],
            "added line 1 starts processes (os.popen bound as 'popen' in 'from os import popen, execv')",
        ),
        (
            ["import os as o", "def run(command):", "    return o.system(command)"],
            "added line 3 starts processes (os.system through the name 'o' in 'return o.system(command)')",
        ),
        (
            ["from os import (", "    getcwd,", "    execv as replace_me,", ")"],
            "added line 1 starts processes (os.execv bound as 'replace_me' in 'from os import (')",
        ),
        (
            ["import posix", "shell = posix", "shell.spawnv(0, '/bin/sh', [])"],
            "added line 3 starts processes (os.spawnv through the name 'shell' in \"shell.spawnv(0, '/bin/sh', [])\")",
        ),
        (["run = eval"], "added line 1 loads code dynamically (the builtin eval, named in 'run = eval')"),
    ],
)
def test_a_name_bound_to_what_starts_a_process_is_refused_however_it_is_spelled(added: list[str], why: str) -> None:
    change = patch("agent.py", added)
    assert refusal(change, LIMITS) == content_refusal(change) == f"agent.py: {why}"


def test_an_install_holds_a_patch_to_the_bound_names_too(tmp_path: Path) -> None:
    code = checkout(tmp_path)
    change = patch("lib/tools.py", ["from os import system as run_it"], ["x = 1"])
    found = check_allow(change, release(()), ("lib/",), code)
    assert not found.ok and found.detail.startswith("lib/tools.py: added line 1 starts processes (os.system bound as")


def test_what_does_not_parse_is_still_held_to_the_words() -> None:
    change = patch("agent.py", ["    if ready:", "        os.system('sh')  # a fragment of a block"])
    assert refusal(change, LIMITS) == (
        "agent.py: added line 2 starts processes ('os.system' in \"os.system('sh')  # a fragment of a block\")"
    )


@pytest.mark.parametrize(
    "added",
    [
        ["import os as o", "here = o.getcwd()"],
        ["import os.path as osp", "name = osp.join('a', 'b')"],
        ["from os import environ, path"],
        ["from os import (", "    environ,", "    getcwd,", ")"],
        ["def system(x):", "    return x"],
    ],
)
def test_names_bound_for_nothing_that_starts_a_process_pass(added: list[str]) -> None:
    change = patch("agent.py", added)
    assert refusal(change, LIMITS) is None and content_refusal(change) is None
