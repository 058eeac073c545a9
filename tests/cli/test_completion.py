"""Shell completion (click's own, as the README sets it up): the arguments that name what
a home holds complete to its profiles, wallets, sessions and kept steps, run as bash runs
it (`COMP_WORDS`, `COMP_CWORD`, `_AGENTD_COMPLETE=bash_complete`) against the demo's home."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator

import click
import pytest
from click.shell_completion import BashComplete

from agentd.cli import cli
from agentd.home import Home
from tests.homekit import PASSPHRASES, run_in_process
from tests.serve.daemonkit import demo_home

PROFILES = ["invoices", "invoices-code", "invoices-examined"]
WALLETS = ["bob", "carol", "dave", "invoices", "invoices-code", "judge"]
BASH_COMPLETE = {"_AGENTD_COMPLETE": "bash_complete"}


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Home:
    cache = tmp_path_factory.getbasetemp() / "serve-cache"
    cache.mkdir(exist_ok=True)
    return demo_home(cache, tmp_path_factory.mktemp("completion") / "home")


def complete(words: str, env: dict[str, str]) -> list[str]:
    """What bash offers for the last word of `words` (a trailing space: a new, empty word),
    from the installed agentd run as the completion script runs it; it must say nothing else."""
    given = words.split(" ")
    done = subprocess.run(
        [sys.executable, "-m", "agentd"],
        env={**_clean(), **env, "COMP_WORDS": words, "COMP_CWORD": str(len(given) - 1), **BASH_COMPLETE},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    offered = [line.split(",", 1) for line in done.stdout.splitlines() if line]
    assert all(kind == "plain" for kind, _ in offered), done.stdout
    return [value for _, value in offered]


def _clean() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("AGENTD_HOME", *PASSPHRASES)}


def listed(home: Home, *args: str) -> object:
    done = run_in_process(["--home", str(home.root), *args, "--json"])
    assert done.code == 0, done.err
    return json.loads(done.out)


def test_the_script_bash_sources_is_clicks() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentd"],
        env={**_clean(), "_AGENTD_COMPLETE": "bash_source"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "complete -o nosort -F _agentd_completion agentd" in done.stdout


def test_profiles_wallets_sessions_and_kept_steps_complete_from_the_home(home: Home) -> None:
    at = {"AGENTD_HOME": str(home.root)}
    assert complete("agentd improve run ", at) == PROFILES
    assert complete("agentd lineage invoices-", at) == ["invoices-code", "invoices-examined"]
    assert complete("agentd wallet show ", at) == WALLETS
    assert complete("agentd improve run invoices --wallet j", at) == ["judge"]
    assert complete("agentd bond post b", at) == ["bob"]
    sessions = [s["id"] for s in listed(home, "sessions", "list")]  # type: ignore[union-attr]
    assert complete("agentd sessions show ", at) == sessions
    first = sessions[0][:6]
    assert complete(f"agentd improve mark {first}", at) == [s for s in sessions if s.startswith(first)]
    kept = [line["step"] for line in listed(home, "lineage", "invoices")["kept"]]  # type: ignore[index]
    assert kept and complete("agentd improve adopt invoices ", at) == kept
    assert complete("agentd improve eval invoices --variant ", at) == kept


def test_the_home_named_on_the_command_line_is_the_one_read(home: Home, tmp_path) -> None:
    elsewhere = {"AGENTD_HOME": str(tmp_path / "no-home")}
    assert complete(f"agentd --home {home.root} profile show ", elsewhere) == PROFILES
    assert complete("agentd profile show ", elsewhere) == []  # not a home: nothing, and no error


def test_a_damaged_store_completes_nothing_quietly(home: Home, tmp_path) -> None:
    broken = Home(tmp_path / "broken")
    assert run_in_process(["--home", str(broken.root), "init"]).code == 0
    broken.agentd_db.write_bytes(b"not a database")
    (broken.routes.root / "invoices-lineage.jsonl").write_text("{not json\n")
    at = {"AGENTD_HOME": str(broken.root)}
    assert complete("agentd sessions show ", at) == []
    assert complete("agentd improve adopt invoices ", at) == []


def _params(command: click.Command, path: list[str]) -> Iterator[tuple[list[str], click.Parameter]]:
    if isinstance(command, click.Group):
        for name in command.list_commands(click.Context(command)):
            sub = command.get_command(click.Context(command), name)
            assert sub is not None
            yield from _params(sub, [*path, name])
    else:
        yield from ((path, p) for p in command.params)


def _names(param: click.Parameter) -> str | None:
    """What a parameter names, by its name: a profile, a session, a kept step or a wallet."""
    if isinstance(param, click.Argument) and param.name in ("profile", "session", "step"):
        return param.name
    if isinstance(param, click.Option) and "--wallet" in param.opts:
        return "wallet"
    return None


def test_every_argument_naming_a_profile_session_or_step_and_every_wallet_option_completes(
    home: Home, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGENTD_HOME", str(home.root))
    sessions = [s["id"] for s in listed(home, "sessions", "list")]  # type: ignore[union-attr]
    expected = {"profile": PROFILES, "session": sessions, "wallet": WALLETS}
    kept = [line["step"] for line in listed(home, "lineage", "invoices")["kept"]]  # type: ignore[index]
    completer = BashComplete(cli, {}, "agentd", "_AGENTD_COMPLETE")
    checked = []
    for path, param in _params(cli, []):
        kind = _names(param)
        if kind is None or path[0] == "worker":  # the worker's wallet lives on the worker's machine
            continue
        if kind == "step":
            args, wanted = [*path, "invoices"], kept
        elif isinstance(param, click.Option):
            args, wanted = [*path, "--wallet"], WALLETS
        else:
            args, wanted = list(path), expected[kind]
        offered = [item.value for item in completer.get_completions(args, "")]
        assert offered == wanted, (" ".join(path), param.name)
        checked.append(" ".join(path))
    assert len(checked) > 20
