"""The command line's shape: every command loads on first use, `agentd --help` lists them
all without loading any, and what it says of each is what the command says of itself."""

from __future__ import annotations

import importlib
import subprocess
import sys

from agentd.cli import COMMANDS

HEAVY = (
    "improver.decide.stats",
    "numpy",
    "scipy",
    "sqlalchemy",
    "psycopg",
    "openai",
    "anthropic",
    "httpx",
    "agentd.app",
)


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


def test_a_ledger_read_loads_no_statistics_model_client_or_worker_pool(agentd, home) -> None:
    """Every command opens the ledger, and its rules check kept changes' levels: that must
    not cost numpy's import, nor a model client's or multiprocessing's."""
    assert agentd("wallet", "new", "alice").code == 0
    assert agentd("wallet", "fund", "alice", "5").code == 0
    probe = (
        "import sys\n"
        "from agentd.cli import invoke\n"
        f"code = invoke(['--home', {str(home.root)!r}, 'ledger', 'checkpoint'])\n"
        "heavy = ('numpy', 'scipy', 'psycopg', 'openai', 'anthropic', 'httpx', 'multiprocessing', 'improver.decide.stats')\n"
        "print(code, sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "0 []"


def test_an_unknown_command_is_a_usage_error(agentd) -> None:
    result = agentd("no-such-command")
    assert result.code == 2 and "No such command 'no-such-command'" in result.err


# Commands whose output is not a report: the demo is a tour, `case` and `improve env`
# speak their JSON-lines protocol, `ledger prove` prints JSON always, `ledger export` writes
# the copy itself; `serve`, `examiner serve` and `worker` are services that log as they go.
NO_JSON = {
    "demo",
    "case",
    "improve env",
    "ledger prove",
    "ledger fork-proof",
    "ledger export",
    "serve",
    "examiner serve",
    "worker",
}


def _leaves(command, path: str = ""):
    from click import Group

    if isinstance(command, Group):
        for name in command.list_commands(None):  # type: ignore[arg-type]
            yield from _leaves(command.get_command(None, name), f"{path} {name}".strip())  # type: ignore[arg-type]
    else:
        yield path, command


def test_every_command_that_reports_takes_json() -> None:
    from agentd.cli import cli

    missing = [
        path
        for path, command in _leaves(cli)
        if path not in NO_JSON and not any(p.name == "as_json" for p in command.params)
    ]
    assert missing == []


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    readme = (root / "README.md").read_text()
    [command] = re.findall(r"&& (python3 -m pytest[^\n`]*)", readme)
    ci = [line.strip() for line in (root / ".ci" / "run").read_text().splitlines()]
    assert command in ci
    assert [line for line in ci if line.startswith("python3 -m pytest")] == [command]
