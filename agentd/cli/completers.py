"""Shell completion's answers for the arguments that name what a home holds: its profiles,
wallets and sessions, and a profile's kept steps (`_AGENTD_COMPLETE`, see the README).

click calls these while the shell waits for a TAB, with the home --home or AGENTD_HOME
names. So each reads only the names it lists, straight from where the home keeps them: a
folder's entries, the sessions table's ids through sqlite3 opened read-only, a lineage
file's kept lines. The usual readers would load the improver (numpy among it) or, for
sessions, SQLAlchemy, and the sessions store records interrupted sessions when it opens:
a completion never writes. Whatever cannot be read completes nothing, silently: a
traceback in the middle of a command line helps no one.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterable
from contextlib import closing

import click
from click.shell_completion import CompletionItem

from agentd.errors import AgentdError
from agentd.home import Home

Completer = Callable[[click.Context, click.Parameter, str], list[CompletionItem]]


def _home(ctx: click.Context) -> Home | None:
    """The home the command line names (--home, else AGENTD_HOME, else ~/.agentd), if it is one."""
    try:
        home = Home.resolve(ctx.find_root().params.get("home"))
    except AgentdError:
        return None
    return home if home.exists else None


def _completer(names: Callable[[Home, click.Context, str], Iterable[str]]) -> Completer:
    def complete(ctx: click.Context, param: click.Parameter, incomplete: str) -> list[CompletionItem]:
        home = _home(ctx)
        if home is None:
            return []
        try:
            found = list(names(home, ctx, incomplete))
        except (OSError, ValueError, sqlite3.Error):  # unreadable, damaged or half-written: nothing to offer
            return []
        return [CompletionItem(name) for name in found if name.startswith(incomplete)]

    return complete


def _profile_names(home: Home, ctx: click.Context, incomplete: str) -> list[str]:
    folder = home.profiles_dir
    return sorted(p.name for p in folder.iterdir() if (p / "profile.toml").is_file()) if folder.is_dir() else []


def _wallet_names(home: Home, ctx: click.Context, incomplete: str) -> list[str]:
    folder = home.wallets_dir
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []


def _session_ids(home: Home, ctx: click.Context, incomplete: str) -> list[str]:
    """The recorded sessions' ids starting with `incomplete`, oldest first (as `sessions list`)."""
    if not home.agentd_db.exists():
        return []
    with closing(sqlite3.connect(f"{home.agentd_db.as_uri()}?mode=ro", uri=True)) as db:
        # LIKE's own wildcards in what was typed so far are matched as themselves.
        typed = incomplete.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        rows = db.execute(
            "SELECT id FROM sessions WHERE id LIKE ? ESCAPE '\\' ORDER BY started_at", (typed + "%",)
        ).fetchall()
    return [str(row[0]) for row in rows]


def _kept_steps(home: Home, ctx: click.Context, incomplete: str) -> list[str]:
    """The kept steps of the profile named before, as `agentd lineage PROFILE` lists them."""
    # Completing an option's value (`eval PROFILE --variant `), click parses the option
    # first, finds it missing its value and leaves the arguments unparsed, in ctx.args.
    profile = ctx.params.get("profile") or next(iter(ctx.args), None)
    if not isinstance(profile, str) or "/" in profile:
        return []
    path = home.routes.lineage(profile)
    if not path.is_file():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    kept = [line for line in lines if isinstance(line, dict) and line.get("decision") == "kept"]
    return [str(line["step"]) for line in kept if line.get("step")]


profiles = _completer(_profile_names)
wallets = _completer(_wallet_names)
sessions = _completer(_session_ids)
steps = _completer(_kept_steps)
