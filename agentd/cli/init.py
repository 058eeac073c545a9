"""`agentd init`: create the home and the log's own key, and say where they are."""

from __future__ import annotations

import click

from agentd.app.examples import EXAMPLES, install_example
from agentd.app.init import initialise
from agentd.cli.options import App, pass_app
from agentd.profiles import load_profile
from agentd.wallets import create_wallet, wallet_exists


@click.command("init", short_help="Create the home and the log's own key.")
@click.option("--example", type=click.Choice(EXAMPLES), help="Also create an example profile (and its wallet).")
@pass_app
def command(app: App, example: str | None) -> None:
    """Create the home (config, wallets, profiles, routes) and the log's own key, which
    starts the ledger and signs its checkpoints. Safe to run again: what exists is kept."""
    for line in initialise(app.home):
        click.echo(line)
    if example:
        folder = install_example(app.home, example)
        profile = load_profile(app.home, example)
        if not wallet_exists(app.home, profile.wallet):
            create_wallet(app.home, profile.wallet)
        click.echo(f"profile {example}: {folder} (wallet {profile.wallet})")
