"""The runner interface, on both runners: what goes in, what comes back, why a run
ended, the conversation a line at a time, and the paths and limits a request sets."""

from __future__ import annotations

import asyncio
import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from sandbox.choose import limits_from, make_runner
from sandbox.python import python_request
from sandbox.runner import Limits, Request, Result, Runner, SandboxError, run, run_blocking
from tests.sandbox.sandboxkit import RUNNERS, runner_named

SMALL = Limits(
    wall_seconds=30, cpu_seconds=20, memory_bytes=512 << 20, processes=32, file_bytes=1 << 20, output_bytes=10_000
)


@pytest.fixture(scope="module", params=RUNNERS)
def runner(request: pytest.FixtureRequest) -> Runner:
    return runner_named(request.param, SMALL)


def python(runner: Runner, source: str, stdin: bytes = b"", **changes) -> Result:
    request = replace(python_request(("-c", source)), **changes)
    return run_blocking(runner, request, stdin)


def test_the_tail_of_a_programs_output_cannot_drive_a_terminal(runner: Runner) -> None:
    # Clear the screen, retitle the window, ring the bell: all as text; a carriage return
    # ends a line, so nothing after it writes over what came before.
    source = r"import sys; print('built\x1b[2J\x1b]0;owned\x07'); print('ok\rFAILED', file=sys.stderr); sys.exit(1)"
    tail = python(runner, source).tail(5)
    assert tail == ["built\\x1b[2J\\x1b]0;owned\\x07", "ok", "FAILED"]
    assert all(c.isprintable() for line in tail for c in line)


def test_status_outputs_and_input(runner: Runner) -> None:
    result = python(
        runner, "import sys; print(sys.stdin.read().upper()); print('oops', file=sys.stderr); sys.exit(3)", b"hello"
    )
    assert (result.status, result.why, result.stdout, result.stderr) == (3, "exited", b"HELLO\n", b"oops\n")
    assert result.describe() == "it exited with status 3" and not result.ok and result.usage.wall_seconds > 0


def test_the_environment_is_only_the_requests(runner: Runner, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-caller")
    request = python_request(("-c", "import json, os; print(json.dumps(dict(os.environ)))"), GREETING="hi")
    seen = json.loads(run_blocking(runner, request).stdout)
    assert seen["GREETING"] == "hi" and "OPENAI_API_KEY" not in seen
    assert set(seen) - {"HOSTNAME", "PWD"} == set(request.env)  # Docker adds the hostname, bwrap the directory


def test_a_conversation_a_line_at_a_time(runner: Runner) -> None:
    echo = "import sys\nfor line in sys.stdin:\n    print('got ' + line.strip(), flush=True)\n"

    async def converse() -> tuple[list[bytes], Result]:
        process = await runner.start(python_request(("-c", echo)))
        heard = []
        async with process:
            for word in (b"one", b"two"):
                assert await process.send(word + b"\n")
                heard.append(await process.readline())
            process.close_input()
            heard.append(await process.readline())
            return heard, await process.finish()

    heard, result = asyncio.run(converse())
    assert heard == [b"got one\n", b"got two\n", b""] and result.ok


def test_the_wall_time_kills_the_run(runner: Runner) -> None:
    result = python(runner, "import time; time.sleep(60)", limits=replace(SMALL, wall_seconds=1))
    assert result.why == "wall" and result.describe() == "it reached its wall time"


def test_the_cpu_limit(runner: Runner) -> None:
    result = python(runner, "while True: pass", limits=replace(SMALL, cpu_seconds=1))
    assert result.why == "cpu" and result.signal == 24  # SIGXCPU


def test_the_file_size_limit(runner: Runner) -> None:
    body = (
        "import signal; signal.signal(signal.SIGXFSZ, signal.SIG_DFL); open('/tmp/big', 'wb').write(b'x' * (2 << 20))"
    )
    assert python(runner, body).why == "file size"


def test_the_output_limit_kills_the_run_and_keeps_what_fits(runner: Runner) -> None:
    result = python(runner, "import sys, time\nsys.stdout.write('x' * 50_000); sys.stdout.flush(); time.sleep(60)")
    assert result.why == "output" and result.stdout == b"x" * SMALL.output_bytes


def test_a_stopped_run(runner: Runner) -> None:
    async def stopped() -> Result:
        process = await runner.start(python_request(("-c", "import time; print('up', flush=True); time.sleep(60)")))
        async with process:
            assert await process.readline() == b"up\n"
            return await process.kill()

    assert asyncio.run(stopped()).why == "stopped"


def test_a_grandchild_in_a_session_of_its_own_ends_with_the_run(runner: Runner) -> None:
    marker = f"left-behind-{os.getpid()}-{runner.name}"
    body = f"""
import os, sys
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv(sys.executable, [sys.executable, "-c", "import time; time.sleep(600)", {marker!r}])
    os._exit(0)
"""
    assert python(runner, body).ok

    def running() -> bool:
        return any(marker.encode() in _cmdline(p) for p in os.listdir("/proc") if p.isdigit())

    for _ in range(100):
        if not running():
            break
        asyncio.run(asyncio.sleep(0.1))
    assert not running()


def _cmdline(pid: str) -> bytes:
    try:
        return Path("/proc", pid, "cmdline").read_bytes()
    except OSError:
        return b""


def test_the_tree_is_read_only_and_the_writable_directory_is_not(runner: Runner, tmp_path: Path) -> None:
    tree, out = tmp_path / "tree", tmp_path / "out"
    tree.mkdir()
    out.mkdir()
    (tree / "agent.py").write_text("from the tree\n")
    body = f"""
import os
print(open('agent.py').read().strip())
for target in ('agent.py', 'new.txt', {str(out / "built.txt")!r}):
    try:
        open(target, 'a').write('x'); print('wrote', os.path.basename(target))
    except OSError as exc:
        print('refused', os.path.basename(target), exc.strerror)
"""
    result = python(runner, body, tree=tree, writable=out, cwd=None)
    said = [
        line.rsplit(" ", 1)[0] if line.startswith("refused") else line for line in result.stdout.decode().splitlines()
    ]
    assert said[0] == "from the tree" and said[3] == "wrote built.txt"
    assert said[1].startswith("refused agent.py") and said[2].startswith("refused new.txt")
    assert (tree / "agent.py").read_text() == "from the tree\n" and (out / "built.txt").read_text() == "x"


NETWORK = """
import socket
try:
    server = socket.create_server(("127.0.0.1", 0))
    socket.create_connection(server.getsockname(), timeout=2).close()
    print("loopback")
except OSError as exc:
    print("refused", exc.strerror)
"""


def test_loopback_only_when_asked(runner: Runner) -> None:
    assert python(runner, NETWORK).stdout == b"refused Permission denied\n"
    assert python(runner, NETWORK, loopback=True).stdout == b"loopback\n"


def test_it_runs_as_an_unprivileged_uid_under_seccomp(runner: Runner) -> None:
    body = """
import json, os
status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines() if ":\t" in line)
print(json.dumps([os.getuid(), os.getgid(), os.getgroups(), status["Seccomp"], status["CapEff"], status["NoNewPrivs"]]))
"""
    uid, gid, groups, mode, caps, no_new_privs = json.loads(python(runner, body).stdout)
    assert uid >= 1_000_000 and gid == uid and set(groups) <= {gid}
    assert (mode, int(caps, 16), no_new_privs) == ("2", 0, "1")  # a seccomp filter, no capabilities


def test_a_program_or_a_path_that_is_not_there_is_the_callers_error(runner: Runner, tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="no such program"):
        run_blocking(runner, Request(("no-such-program",)))
    with pytest.raises(SandboxError, match="no such program"):
        run_blocking(runner, Request((str(tmp_path / "candidate"),)))  # not mounted, so not in the sandbox
    with pytest.raises(SandboxError, match="does not exist"):
        run_blocking(runner, Request(("/bin/true",), readable=(tmp_path / "missing",)))


def test_many_runs_at_once(runner: Runner) -> None:
    async def many() -> list[Result]:
        return await asyncio.gather(*(run(runner, python_request(("-c", f"print({i})"))) for i in range(6)))

    assert [r.stdout for r in asyncio.run(many())] == [f"{i}\n".encode() for i in range(6)]


def test_settings_from_a_sandbox_section() -> None:
    limits = limits_from({"runner": "bwrap", "memory_mb": 512, "wall_seconds": 10, "processes": 8})
    assert (limits.memory_bytes, limits.wall_seconds, limits.processes) == (512 << 20, 10.0, 8)
    assert limits.cpu_seconds == Limits().cpu_seconds
    with pytest.raises(ValueError, match="no setting 'memory'"):
        limits_from({"memory": 5})
    with pytest.raises(ValueError, match="processes must be a positive number"):
        limits_from({"processes": 0})
    with pytest.raises(ValueError, match="no sandbox runner 'chroot'"):
        make_runner("chroot")
