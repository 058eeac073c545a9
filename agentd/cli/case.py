"""`agentd case --stdio`: run the agent runtime as a candidate over JSON lines."""

from __future__ import annotations

import click

from agentd.app.case import main


@click.command("case", short_help="Run the agent runtime as a candidate over JSON lines.")
@click.option("--stdio", is_flag=True, required=True, help="Speak the candidate protocol on stdin/stdout.")
def command(stdio: bool) -> int:
    """Run the agent runtime as a candidate: the case arrives as the first line on stdin,
    then every model request and tool call goes out as a JSON line and waits for the
    harness's answer. Used by the harness (and, later, by built copies of agentd)."""
    return main()
