"""`agentd sessions`: list, show, import and recover recorded sessions."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from agentd.app.intake import import_file
from agentd.app.sessions import open_sessions, recover
from agentd.cli.completers import profiles, sessions
from agentd.cli.options import App, emit_json, emit_table, json_option, pass_app, progress
from agentd.errors import WrongValue
from agentd.profiles import list_profiles
from agentd.sessions import OUTCOMES, SessionRecord


@click.group("sessions", short_help="Recorded sessions: list, show, import.")
def command() -> None:
    """The agent's recorded sessions."""


@command.command("list")
@click.option("--profile", shell_complete=profiles, help="Only this profile's sessions.")
@click.option("--outcome", type=click.Choice(OUTCOMES), help="Only sessions with this outcome.")
@json_option
@pass_app
def list_(app: App, profile: str | None, outcome: str | None, as_json: bool) -> None:
    """List sessions, oldest first: id, profile, when, how it ended, outcome, task."""
    store = open_sessions(app.home)
    rows = store.list(profile=profile, outcome=outcome)
    if profile and not rows and profile not in list_profiles(app.home) and not store.list(profile=profile):
        raise WrongValue(
            f"--profile {profile!r} names no profile of this home: {', '.join(list_profiles(app.home)) or 'it has none yet'}"
        )
    if as_json:
        emit_json([r.summary() for r in rows])
    elif rows:
        emit_table(
            [("ID", "PROFILE", "STARTED", "ENDED", "OUTCOME", "TASK")]
            + [(r.id[:12], r.profile, r.started_at[:19], r.ended, r.outcome, _short(r.task)) for r in rows]
        )
    if not rows:
        progress("no sessions" + (" match" if profile or outcome else " yet: record one with agentd run PROFILE TASK"))


@command.command("show")
@click.argument("session", shell_complete=sessions)
@json_option
@pass_app
def show(app: App, session: str, as_json: bool) -> None:
    """Show a session (any unique prefix of its id) with its transcript."""
    r = open_sessions(app.home).get(session)
    if as_json:
        emit_json(_shown(r))
        return
    click.echo(f"session {r.id} ({r.source}) of profile {r.profile}")
    click.echo(f"task: {r.task}")
    click.echo(f"started {r.started_at}, ended {r.ended_at}: {r.ended}" + (f" ({r.error})" if r.error else ""))
    click.echo(
        f"outcome: {r.outcome}"
        + (f" (check {r.check})" if r.check else "")
        + (f"; marked {r.mark}: {r.mark_note}" if r.mark else "")
    )
    click.echo(f"models: {', '.join(r.models) or '-'}; tokens in {r.tokens_in}, out {r.tokens_out}; {r.turns} turns")
    flags = [f"held {', '.join(r.secrets)}"] if r.secrets else []
    flags += ["confidential"] if r.confidential else []
    flags += ["compacted"] if r.compacted else []
    if flags:
        click.echo(f"flags: {'; '.join(flags)}")
    click.echo(f"ledger: claim {r.claim_id}, Pulse {r.pulse}" if r.claim_id else "ledger: not recorded")
    click.echo("transcript:")
    for m in r.transcript:
        click.echo(f"  [{m.get('role')}] {_message_text(m)}")


@command.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--profile", required=True, shell_complete=profiles, help="The profile the sessions belong to.")
@json_option
@pass_app
def import_(app: App, file: Path, profile: str, as_json: bool) -> None:
    """Import transcripts in OpenAI chat format recorded by another agent framework.

    FILE holds {"messages": [...], "tools": [...], "metadata": {...}}, a list of messages, or
    JSON lines of such objects. Each becomes a session, on the ledger like any other.
    """
    result = import_file(app.home, file, profile)
    for warning in result.warnings:
        progress(f"agentd: warning: {warning}")
    if as_json:
        emit_json([r.summary() for r in result.records])
    else:
        for r in result.records:
            click.echo(f"imported session {r.id} ({r.ended}, {r.outcome}) at Pulse {r.pulse}")
    if not result.records:
        progress(f"nothing new to import from {file}")


@command.command("recover")
@json_option
@pass_app
def recover_(app: App, as_json: bool) -> None:
    """Record live sessions whose process ended before recording them, as interrupted.

    Each is recorded with every call it made, signed by the wallet it was to be signed
    by. Any command that opens the sessions store does this already for sessions whose
    wallet opens without a passphrase; this one asks for a sealed wallet's passphrase
    (or reads AGENTD_WALLET_PASSPHRASE). A session running on another host is left alone.
    """
    store = open_sessions(app.home, write=True, recovering=False)
    recorded = recover(app.home, store, ask=True).recorded
    if as_json:
        emit_json([{**r.summary(), "error": r.error} for r in recorded])
        return
    for r in recorded:
        click.echo(f"session {r.id} of profile {r.profile}: {r.error}; recorded at Pulse {r.pulse}")
    if not recorded:
        progress("no interrupted session waits to be recorded")


# The record's fields the summary names otherwise (started, claim, tokens: {in, out}).
_SUMMARIZED = ("started_at", "claim_id", "tokens_in", "tokens_out")


def _shown(r: SessionRecord) -> dict[str, Any]:
    """A session as `show --json` prints it: its summary, keyed as `list` (and `run`,
    `import`, the ledger entry) key it, then the rest of its record, transcript included."""
    rest = {key: value for key, value in r.model_dump().items() if key not in _SUMMARIZED}
    return {**r.summary(), **rest}


def _short(text: str, width: int = 60) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1] + "…"


def _message_text(m: dict[str, Any]) -> str:
    parts = [str(m["content"])] if m.get("content") else []
    for c in m.get("tool_calls") or []:
        parts.append(f"calls {c['function']['name']}({c['function']['arguments']})")
    return " ".join(parts).replace("\n", " ") or json.dumps(m)
