"""`agentd init`: create the home and the log's own key, and say where they are."""

from __future__ import annotations

import click

from agentd.app.examples import EXAMPLES, install_example
from agentd.app.init import initialise
from agentd.cli.options import App, emit_json, json_option, pass_app, progress
from agentd.profiles import load_profile
from agentd.wallets import create_wallet, wallet_exists


@click.command("init", short_help="Create the home and the log's own key.")
@click.option(
    "--example",
    type=click.Choice(EXAMPLES),
    help="Also create an example profile (and its wallet); invoices-local also pulls its local model.",
)
@json_option
@pass_app
def command(app: App, example: str | None, as_json: bool) -> None:
    """Create the home (config.toml with every setting at its default, wallets/,
    profiles/, routes/) and the log's own key, which starts the ledger and signs its
    checkpoints. Safe to run again: what exists is kept. Only `init` and `demo` create a
    home; every other command needs one."""
    home = app.place
    done = initialise(home)
    made: dict[str, str] = {}
    if example:
        folder = install_example(home, example, progress)
        profile = load_profile(home, example)
        if not wallet_exists(home, profile.wallet):
            create_wallet(home, profile.wallet)
        made = {"profile": example, "folder": str(folder), "wallet": profile.wallet}
    if as_json:
        emit_json({**done.to_json(), "example": made or None})
        return
    for line in done.lines():
        click.echo(line)
    if made:
        click.echo(f"profile {example}: {made['folder']} (wallet {made['wallet']})")
