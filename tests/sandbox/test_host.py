"""Trusted host commands: the environment given and nothing else, the time limit held."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from sandbox import run_program, run_shell


def test_a_shell_command_sees_only_the_environment_it_is_given(monkeypatch) -> None:
    monkeypatch.setenv("AGENTD_WALLET_PASSPHRASE", "secret")
    done = run_shell('echo "$GIVEN:$AGENTD_WALLET_PASSPHRASE"; exit 3', env={"GIVEN": "yes"}, timeout=30)
    assert (done.returncode, done.stdout, done.timed_out) == (3, b"yes:\n", False)


def test_a_shell_command_past_its_time_limit_is_ended() -> None:
    done = run_shell("sleep 30", env={}, timeout=0.2)
    assert done.timed_out and done.returncode is None


def test_a_program_gets_its_input_and_is_killed_at_its_limit(tmp_path: Path) -> None:
    echo = asyncio.run(run_program(["/bin/cat"], cwd=tmp_path, env={}, stdin=b'{"a": 1}', timeout=30))
    assert (echo.returncode, echo.stdout) == (0, b'{"a": 1}')
    slow = asyncio.run(run_program(["/bin/sleep", "30"], cwd=tmp_path, env={}, stdin=b"", timeout=0.2))
    assert slow.timed_out
    assert not [p for p in os.listdir("/proc") if p.isdigit() and _is_sleep_30(p)]


def _is_sleep_30(pid: str) -> bool:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes() == b"/bin/sleep\x0030\x00"
    except OSError:
        return False
