"""`agentd examiner`: this home as an examiner, holding other agents' sealed tasks (see
agentd/app/examiner.py)."""

from __future__ import annotations

from pathlib import Path

import click

from agentd.app.examiner import open_examiner
from agentd.cli.completers import wallets
from agentd.cli.options import App, emit_json, json_option, pass_app
from agentd.wallets import load_wallet


@click.group("examiner", short_help="Hold other agents' sealed tasks and confirm changes on them.")
def command() -> None:
    """This home as an examiner: it holds the sealed tasks agents hand it (`agentd improve
    seal --examiner URL`), which never live on their machines, and confirms changes on them
    with its own models, signing what it found for their ledgers."""


@command.command("key")
@click.option("--wallet", required=True, shell_complete=wallets, help="The examiner's wallet, which signs its key.")
@json_option
@pass_app
def key(app: App, wallet: str, as_json: bool) -> None:
    """Show the examiner's key (X25519, for HPKE), which its wallet signs; --json prints
    the signed key document agents fetch from GET /v1/examiner/key."""
    document = open_examiner(app.home, load_wallet(app.home, wallet)).key_document()
    if as_json:
        emit_json(document)
        return
    click.echo(f"examiner wallet {document['wallet']}: key {document['key']} ({document['suite']})")


@command.command("serve")
@click.option(
    "--wallet",
    required=True,
    shell_complete=wallets,
    help="The examiner's wallet: it signs the key, receipts and examinations.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="The address to listen on.")
@click.option("--port", type=click.IntRange(1, 65535), default=8471, show_default=True, help="The port to listen on.")
@click.option(
    "--models",
    "models_dir",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="The folder `script:` models are read from (default: none; other providers use this home's keys).",
)
@click.option(
    "--bond",
    metavar="CLAIM",
    help="A bond of this wallet's on the agents' ledger (its bond.post/v1 claim id): its receipts and every "
    "examination are issued on it, so anyone who reruns one on the revealed seal and finds it false can challenge it.",
)
@click.option(
    "--source",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="A checkout of the agents' code: code changes are rebuilt from it in this home's sandbox, as "
    "`improve attest` rebuilds a release (without it, only lesson changes are confirmed).",
)
@pass_app
def serve(
    app: App, wallet: str, host: str, port: int, models_dir: Path | None, bond: str | None, source: Path | None
) -> None:
    """Serve the examiner's HTTP API in the foreground until SIGTERM or Ctrl-C."""
    from agentd.server.examiner import serve as serve_examiner

    examiner = open_examiner(app.home, load_wallet(app.home, wallet), models_dir, bond, source)
    click.echo(f"examiner {examiner.wallet.id} serving on http://{host}:{port}", err=True)
    serve_examiner(examiner, host, port)
