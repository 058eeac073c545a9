"""`agentd kill-switch`: stop every session and loop step from starting."""

from __future__ import annotations

import click

from agentd.app import killswitch
from agentd.cli.options import App, emit_json, json_option, pass_app


@click.command("kill-switch", short_help="Stop every session, proposal and trial from starting.")
@click.argument("state", metavar="STATE", type=click.Choice(["on", "off", "status"]), default="status")
@click.option("--reason", default="", help="Why it was turned on (kept beside it).")
@json_option
@pass_app
def command(app: App, state: str, reason: str, as_json: bool) -> None:
    """Turn the kill switch on or off, or show it. While on, no session, proposal or
    trial starts; a running loop stops before its next one."""
    if state == "on":
        killswitch.turn_on(app.home, reason)
    elif state == "off":
        killswitch.turn_off(app.home)
    on = killswitch.is_on(app.home)
    if as_json:
        emit_json({"on": on, "since": killswitch.since(app.home)})
    else:
        click.echo(f"kill switch is on (since {killswitch.since(app.home)})" if on else "kill switch is off")
