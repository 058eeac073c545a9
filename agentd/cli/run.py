"""`agentd run`: one live session, recorded."""

from __future__ import annotations

import click

from agentd.app.live import SessionInterrupted, run_session
from agentd.cli.completers import profiles, wallets
from agentd.cli.options import EXIT_INTERRUPTED, App, emit_json, json_option, pass_app, progress
from agentd.sessions import SessionRecord


@click.command("run", short_help="Run one live session of a profile and record it.")
@click.argument("profile", shell_complete=profiles)
@click.argument("task")
@click.option("--model", help="Run on this model (one the profile may run on) instead of its default.")
@click.option(
    "--verify",
    metavar="CMD",
    help="A check run after a session that finished: exit 0 means it passed. It gets "
    "AGENTD_SESSION_ID and AGENTD_TRANSCRIPT (a JSON file of the transcript) in its environment.",
)
@click.option(
    "--wallet", shell_complete=wallets, help="Sign the session's entry with this wallet instead of the profile's."
)
@json_option
@pass_app
def command(
    app: App, profile: str, task: str, model: str | None, verify: str | None, wallet: str | None, as_json: bool
) -> None:
    """Run PROFILE's agent on TASK with its real tools, and record the session.

    The transcript stays in $AGENTD_HOME/agentd.db; an agent.session/v1 entry holding its
    digest (and the check's result) goes on the ledger. Ctrl-C (or SIGTERM) stops the
    session and records it as interrupted, with every call it made; the exit is 130.
    """
    try:
        record = run_session(app.home, profile, task, model=model, verify=verify, wallet=wallet)
    except SessionInterrupted as stopped:
        _report(stopped.record, as_json)
        raise click.exceptions.Exit(EXIT_INTERRUPTED) from None
    _report(record, as_json)


def _report(record: SessionRecord, as_json: bool) -> None:
    if as_json:
        emit_json({**record.summary(), "answer": record.answer, "check": record.check, "error": record.error})
        return
    ended = "interrupted" if record.interrupted else record.ended
    if record.ended == "errored":
        progress(f"agentd: the session errored: {record.error}")
    elif record.interrupted:
        progress(f"agentd: the session was {record.error}")  # "interrupted: stopped by SIGINT while ..."
    click.echo(record.answer or f"({ended})")
    check = f", check {record.check}" if record.check else ""
    progress(
        f"session {record.id}: {ended}{check}, {record.turns} turns, "
        f"{record.tokens_in + record.tokens_out} tokens; on the ledger at Pulse {record.pulse}"
    )
