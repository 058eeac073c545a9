"""The command line's shape: every command loads on first use, `agentd --help` lists them
all without loading any, and what it says of each is what the command says of itself."""

from __future__ import annotations

import importlib
import subprocess
import sys

from agentd.cli import COMMANDS

HEAVY = ("improver.stats", "numpy", "scipy", "sqlalchemy", "psycopg", "openai", "anthropic", "httpx", "agentd.app")


def test_the_listed_help_is_each_commands_own() -> None:
    for name, entry in COMMANDS.items():
        command = getattr(importlib.import_module(entry.module), entry.attribute)
        assert command.name == name
        assert command.get_short_help_str(limit=1000) == entry.help


def test_help_loads_no_command_and_nothing_heavy() -> None:
    probe = (
        "import sys\n"
        "from agentd.cli import invoke\n"
        "code = invoke(['--help'])\n"
        f"print(code, sorted(m for m in sys.modules if m.startswith({HEAVY!r}) or m.startswith('agentd.cli.')))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "0 ['agentd.cli.options']"
    for name in COMMANDS:
        assert f"\n  {name}" in done.stdout


def test_an_unknown_command_is_a_usage_error(agentd) -> None:
    result = agentd("no-such-command")
    assert result.code == 2 and "No such command 'no-such-command'" in result.err
