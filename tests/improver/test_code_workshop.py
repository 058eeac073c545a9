"""The code loop's workshop and coder against bad input and attacks, with real git and
the real bubblewrap sandbox: each turned down or refused with one clear line, nothing
outside the copy changed, nothing left running."""

from __future__ import annotations

import asyncio
import json
import os
import stat
from pathlib import Path

import pytest

from improver.base.errors import ImproverError
from improver.base.variant import Variant
from improver.code.codeloop import Workshop
from improver.code.coder import code
from improver.code.git import init_checkout
from improver.code.release import Commands
from improver.episodes.harness import run_task
from sandbox.choose import make_runner
from sandbox.runner import Limits, SandboxUnavailable
from tests.improver.taskkit import OPERATOR, ScriptedModel, calls, paid_task, pays_right, says

AGENT = 'import json, sys\ncase = json.loads(sys.stdin.readline())\nprint("RULES = pay")\n'
TEST = 'import agent\nprint("ok")\n'
TEST_READ_ONLY = (
    "python3 -c \"import ast; ast.parse(open('test_agent.py').read())\""  # writes nothing: the tree is read-only
)
QUICK = Limits(wall_seconds=20.0, cpu_seconds=20, processes=32)


def checkout(tmp_path: Path) -> Path:
    source = tmp_path / "source"
    source.mkdir()
    (source / "agent.py").write_text(AGENT)
    (source / "test_agent.py").write_text(TEST)
    init_checkout(source, "the harness")
    return source


def workshop(
    tmp_path: Path,
    build: str = "python3 -m py_compile agent.py",
    test: str = "",
    candidate: str = "python3 agent.py",
    limits: Limits = QUICK,
) -> Workshop:
    return Workshop(
        checkout(tmp_path), tmp_path / "work", Commands(build, test, candidate), make_runner("bwrap", limits)
    )


def still_running(marker: str) -> list[str]:
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace"):
                found.append(pid)
        except OSError:
            continue
    return found


def test_a_change_to_the_copy_becomes_a_patch_taken_in_a_fresh_clone(tmp_path: Path) -> None:
    ws = workshop(tmp_path)
    copy = ws.copy_for_coder(b"")
    assert not (copy / ".git").exists() and (copy / "agent.py").read_text() == AGENT
    (copy / "agent.py").write_text(AGENT.replace("pay", "ask first"))
    patch, why = ws.patch_of(copy)
    assert why is None and b'+print("RULES = ask first")' in patch
    tree, why = asyncio.run(ws.built(patch))
    assert tree is not None and "ask first" in (tree / "agent.py").read_text() and not (tree / ".git").exists()
    assert (ws.source / "agent.py").read_text() == AGENT  # the source is never touched


@pytest.mark.parametrize(
    "attack, refused",
    [
        (
            lambda c: ((c / "agent.py").unlink(), os.symlink("/etc/passwd", c / "agent.py")),
            "agent.py is a symbolic link (to /etc/passwd); the copy may hold none",
        ),
        (lambda c: os.symlink(str(Path.home()), c / "home"), f"home is a symbolic link (to {Path.home()})"),
        (
            lambda c: (c / ".gitattributes").write_text("* filter=evil diff=evil\n"),
            ".gitattributes is a .gitattributes of the copy's own",
        ),
        (
            lambda c: (c / ".gitmodules").write_text('[submodule "x"]\n\tpath = x\n\turl = /etc\n'),
            ".gitmodules is a .gitmodules of the copy's own",
        ),
        (
            lambda c: (
                (c / ".git" / "hooks").mkdir(parents=True),
                (c / ".git" / "hooks" / "pre-commit").write_text("#!/bin/sh\ntouch /tmp/pwned\n"),
            ),
            ".git is a git directory or file of the copy's own",
        ),
        (
            lambda c: ((c / "sub").mkdir(), (c / "sub" / ".git").write_text("gitdir: /etc\n")),
            "sub/.git is a git directory or file of the copy's own",
        ),
        (lambda c: os.mkfifo(c / "pipe"), "pipe is neither a file nor a folder"),
    ],
    ids=[
        "symlink-to-passwd",
        "symlink-to-home",
        "gitattributes-filter",
        "gitmodules",
        "hook-in-dot-git",
        "gitdir-file",
        "fifo",
    ],
)
def test_a_copy_that_could_make_git_run_anything_is_refused_before_git_reads_it(
    tmp_path: Path, attack, refused: str
) -> None:
    ws = workshop(tmp_path)
    copy = ws.copy_for_coder(b"")
    (copy / "agent.py").write_text(AGENT + "# changed\n")
    attack(copy)
    patch, why = ws.patch_of(copy)
    assert patch == b"" and why is not None and why.startswith(refused)
    assert (ws.source / "agent.py").read_text() == AGENT and not Path("/tmp/pwned").exists()


def test_a_gitattributes_the_commit_holds_is_not_the_copys_own(tmp_path: Path) -> None:
    source = tmp_path / "source"
    source.mkdir()
    (source / "agent.py").write_text(AGENT)
    (source / ".gitattributes").write_text("*.py text\n")
    init_checkout(source, "with attributes")
    ws = Workshop(source, tmp_path / "work", Commands("", "", "python3 agent.py"), make_runner("bwrap", QUICK))
    copy = ws.copy_for_coder(b"")
    (copy / "agent.py").write_text(AGENT + "# changed\n")
    patch, why = ws.patch_of(copy)
    assert why is None and b"# changed" in patch


def test_a_source_that_is_not_a_git_checkout_or_has_uncommitted_changes_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(ImproverError, match="is not a git checkout"):
        Workshop(plain, tmp_path / "w1", Commands("", "", "python3 agent.py"), make_runner("bwrap", QUICK))
    source = checkout(tmp_path)
    (source / "agent.py").write_text("changed")
    with pytest.raises(ImproverError, match=r"has uncommitted changes \(M agent.py"):
        Workshop(source, tmp_path / "w2", Commands("", "", "python3 agent.py"), make_runner("bwrap", QUICK))


def test_a_build_that_never_ends_is_stopped_at_its_limit_and_leaves_nothing_running(tmp_path: Path) -> None:
    ws = workshop(tmp_path, build="sleep 600 && echo never-7f3a", limits=Limits(wall_seconds=2.0))
    tree, why = asyncio.run(ws.built(b""))
    assert tree is None and why.startswith("the build failed (it reached its wall time)")
    assert still_running("never-7f3a") == []


def test_a_build_that_fills_the_scratch_space_fails_with_its_last_lines(tmp_path: Path) -> None:
    fill = "i=0; while head -c 1048576 /dev/zero > /tmp/f$i; do i=$((i+1)); done; echo full >&2; exit 1"
    tree, why = asyncio.run(workshop(tmp_path, build=fill).built(b""))
    assert tree is None and why.startswith("the build failed (it exited with status 1)") and "No space left" in why


def test_a_build_that_forks_without_end_is_held_to_its_process_limit(tmp_path: Path) -> None:
    bomb = "python3 -c 'import os\nwhile True: os.fork()' bomb-9c1e"
    tree, why = asyncio.run(workshop(tmp_path, build=bomb).built(b""))
    assert tree is None and why.startswith("the build failed") and "BlockingIOError" in why
    assert still_running("bomb-9c1e") == []


def test_a_failing_test_turns_the_change_down_with_its_output(tmp_path: Path) -> None:
    tree, why = asyncio.run(workshop(tmp_path, test="python3 -c 'assert False, \"the test says no\"'").built(b""))
    assert tree is None and why.startswith("the test failed (it exited with status 1)") and "the test says no" in why


def test_a_candidate_that_prints_garbage_fails_its_runs(tmp_path: Path) -> None:
    ws = workshop(tmp_path, candidate="echo garbage; cat")
    tree, _ = asyncio.run(ws.built(b""))
    assert tree is not None
    model = ScriptedModel(pays_right())
    result = asyncio.run(
        run_task(paid_task(), Variant(OPERATOR, "", ("script:test",)), ws.candidate(tree), lambda s: model)
    )
    assert result.outcome == "failed" and "not the protocol" in result.failures[0]


def coder_run(tmp_path: Path, replies: list) -> tuple:
    ws = workshop(tmp_path)
    copy = ws.copy_for_coder(b"")
    model = ScriptedModel(replies)
    seen: list = []
    model_complete = model.complete

    async def complete(messages, tools, max_tokens):
        seen.append(json.loads(json.dumps(messages)))
        return await model_complete(messages, tools, max_tokens)

    model.complete = complete  # type: ignore[method-assign]
    coded = asyncio.run(code(model, [{"role": "user", "content": "go"}], copy, lambda c: ws.coder_command(copy, c)))
    return ws, copy, coded, seen


def test_a_coder_whose_arguments_nest_too_deep_or_hold_a_number_too_long_is_told_so(tmp_path: Path) -> None:
    def sent(arguments: str) -> dict:
        function = {"name": "read_file", "arguments": arguments}
        return {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "b", "type": "function", "function": function}],
        }

    replies = [sent("[" * 200_000), sent('{"path": ' + "9" * 5000 + "}"), says("Done.")]
    _, _, coded, seen = coder_run(tmp_path, replies)
    answers = [m["content"] for m in seen[-1] if m["role"] == "tool"]
    assert answers == ["error: the arguments are not valid JSON"] * 2 and coded.summary == "Done."


def test_a_coder_that_makes_no_tool_call_changes_nothing(tmp_path: Path) -> None:
    _, _, coded, _ = coder_run(tmp_path, [says("I would rather not.")])
    assert coded.problem == "the coder made no tool call" and coded.summary == "I would rather not."


def test_a_coder_with_malformed_arguments_or_paths_out_of_the_copy_is_told_so_and_changes_nothing_outside(
    tmp_path: Path,
) -> None:
    bad = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "b1", "type": "function", "function": {"name": "write_file", "arguments": "{not json"}}],
    }
    replies = [
        bad,
        calls(
            ("write_file", {"path": "../escape.py", "content": "x"}),
            ("write_file", {"path": "/etc/agentd-pwned", "content": "x"}),
            ("write_file", {"path": ".git/config", "content": "x"}),
            ("read_file", {"path": "agent.py", "extra": 3}),
        ),
        calls(
            (
                "run_command",
                {
                    "command": f"ln -s /etc link; echo pwned > {tmp_path}/source/agent.py; curl -s http://1.1.1.1 || echo no-net"
                },
            )
        ),
        calls(("write_file", {"path": "link/agentd-pwned", "content": "x"})),
        says("Done."),
    ]
    ws, copy, coded, seen = coder_run(tmp_path, replies)
    answers = [m["content"] for m in seen[-1] if m["role"] == "tool"]
    assert answers[0] == "error: the arguments are not valid JSON"
    assert all(a.startswith("error: ") for a in answers[1:5])
    assert "no-net" in answers[5] and "exit status 0" in answers[5]
    assert answers[6] == "error: link/agentd-pwned: link is a symbolic link"
    assert (ws.source / "agent.py").read_text() == AGENT and not (tmp_path / "escape.py").exists()
    assert not Path("/etc/agentd-pwned").exists() and coded.summary == "Done." and coded.problem == ""
    assert ws.patch_of(copy)[1] == "link is a symbolic link (to /etc); the copy may hold none"


@pytest.mark.parametrize("name", ["bwrap", "docker"])
def test_each_runner_builds_a_tree_and_runs_the_coders_command_in_the_copy(tmp_path: Path, name: str) -> None:
    try:
        runner = make_runner(name, QUICK)
    except SandboxUnavailable as exc:
        pytest.skip(str(exc))
    ws = Workshop(
        checkout(tmp_path),
        tmp_path / "work",
        Commands("python3 -m py_compile agent.py", TEST_READ_ONLY, "python3 agent.py"),
        runner,
    )
    tree, why = asyncio.run(ws.built(b""))
    assert tree is not None, why
    copy = ws.copy_for_coder(b"")
    said = asyncio.run(ws.coder_command(copy, "echo hi > new.txt && ls"))
    assert said.startswith("exit status 0") and "new.txt" in said
    patch, why = ws.patch_of(copy)
    assert why is None and b"+hi" in patch


@pytest.mark.timeout(60)
def test_a_fifo_the_coders_command_made_is_refused_by_the_file_tools_and_nothing_waits_on_it(tmp_path: Path) -> None:
    replies = [
        calls(("run_command", {"command": "mkfifo pipe.py && mkfifo lib.py && ls -l pipe.py"})),
        calls(
            ("read_file", {"path": "pipe.py"}),
            ("write_file", {"path": "pipe.py", "content": "x"}),
            ("replace_in_file", {"path": "lib.py", "old": "a", "new": "b"}),
            ("read_file", {"path": "agent.py"}),
        ),
        says("Done."),
    ]
    _, copy, coded, seen = coder_run(tmp_path, replies)
    answers = [m["content"] for m in seen[-1] if m["role"] == "tool"]
    assert answers[0].startswith("prw") or "pipe.py" in answers[0], answers[0]
    refused = "is not a regular file (a FIFO, a socket or a device): only files may be used"
    assert answers[1:4] == [f"error: pipe.py {refused}", f"error: pipe.py {refused}", f"error: lib.py {refused}"]
    assert answers[4] == AGENT and coded.summary == "Done."
    assert stat.S_ISFIFO((copy / "pipe.py").lstat().st_mode)  # left as it was
