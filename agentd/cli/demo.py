"""`agentd demo`: the whole path on the invoices example, offline, in seconds."""

from __future__ import annotations

import tempfile

import click
from click.core import ParameterSource

from agentd.app.demo import run_demo
from agentd.cli.options import App, CheckFailed, pass_app, progress
from agentd.home import Home


@click.command("demo", short_help="Run the invoices example end to end in a fresh home.")
@pass_app
@click.pass_context
def command(ctx: click.Context, app: App) -> None:
    """Run the example end to end in a fresh home of its own (or the empty one
    `agentd --home DIR demo` names): sessions of the invoices profile, one kind marked bad, harvest and validation,
    a seal published with a wallet, two rounds of the loop with a scripted proposer, and
    `lineage --check`; then two rounds of `improve code` on the invoices-code example,
    in the sandbox, keeping and publishing a release, which others attest on bonds,
    challenge and install (`install --bonded` refusing a slashed bond's attestation).
    Nothing leaves this machine."""
    root = ctx.find_root()
    # Only an explicit --home is taken: AGENTD_HOME names the home one works in, not a demo's.
    given = root.get_parameter_source("home") == ParameterSource.COMMANDLINE
    home = app.place if given else Home.resolve(tempfile.mkdtemp(prefix="agentd-demo-"))
    if not run_demo(home, click.echo, progress):
        raise CheckFailed(
            "lineage --check or ledger verify found problems, or an install went otherwise than it should"
        )
    progress(f"== done; look around with: agentd --home {home.root} sessions list")
