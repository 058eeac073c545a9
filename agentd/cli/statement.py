"""`agentd verify-statement`: an in-toto statement's DSSE envelope checked offline."""

from __future__ import annotations

from pathlib import Path

import click

from agentd.app.statements import check_file, public_key
from agentd.cli.options import CheckFailed, emit_json, json_option
from improver import BadStatement


@click.command("verify-statement", short_help="Check an in-toto statement's DSSE envelope offline.")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--key",
    "key",
    required=True,
    help="The signer's public key: hex, base64 (as `agentd wallet show` prints it), "
    "a verifier key, or a file holding one or a wallet's key file.",
)
@json_option
def command(file: Path, key: str, as_json: bool) -> None:
    """Check the DSSE envelope in FILE offline: its signature by --key, its payload type,
    that it holds an in-toto Statement v1, and its subjects. Prints the subjects and the
    predicate type. Exit 0 when it holds, 3 when it does not."""
    try:
        verified = check_file(file, public_key(key))
    except BadStatement as exc:
        raise CheckFailed(str(exc)) from None
    if as_json:
        emit_json({"keyid": verified.keyid, "predicateType": verified.predicate_type, "subject": verified.subjects})
        return
    click.echo(f"signed by {verified.keyid}: an in-toto statement of type {verified.predicate_type}")
    for subject in verified.subjects:
        click.echo(f"subject {subject['name']}: sha256 {subject['digest']['sha256']}")
