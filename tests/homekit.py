"""Fixtures for the suites that test agentd: a fresh home and the CLI, in-process and as a
real process. tests/agentd/conftest.py and tests/cli/conftest.py take them in."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from agentd.cli import invoke as run_cli
from agentd.home import Home

# What a shell may have set that would change what a command does.
PASSPHRASES = ("AGENTD_WALLET_PASSPHRASE", "AGENTD_LOG_PASSPHRASE", "AGENTD_WITNESS_PASSPHRASE")


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Home:
    """A fresh, empty agentd home; AGENTD_HOME points at it for subprocesses too."""
    root = tmp_path / "home"
    monkeypatch.setenv("AGENTD_HOME", str(root))
    for var in ("AGENTD_LEDGER_URL", *PASSPHRASES, "OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    return Home(root)


def run_in_process(argv: list[str], input: str | bytes | None = None, env: dict[str, str] | None = None) -> Result:
    """`agentd ARGV...` in this process, its output caught."""
    runner = CliRunner()
    with runner.isolation(input=input, env=env) as (out, err, _):
        code = run_cli(argv)
    return Result(code, out.getvalue().decode(), err.getvalue().decode())


@pytest.fixture
def agentd(home: Home):
    """Runs `agentd ARGS...` in-process against the test's home, as a user who took the
    README's first step: `agentd init` runs first when the home is not there yet (unless
    the command is `init` or `demo` themselves, which create it)."""

    def invoke(*args: str, input: str | bytes | None = None, env: dict[str, str] | None = None) -> Result:
        if not home.exists and str(args[0]) not in ("init", "demo"):
            made = run_in_process(["--home", str(home.root), "init"])
            assert made.code == 0, made.err
        return run_in_process(["--home", str(home.root), *map(str, args)], input, env)

    return invoke


@pytest.fixture
def agentd_process(home: Home):
    """Runs the installed `agentd` as a real process (for signals, concurrency, stdio)."""

    def spawn(*args: str, **kwargs) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "agentd", "--home", str(home.root), *map(str, args)], **kwargs)

    return spawn
