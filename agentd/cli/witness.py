"""`agentd witness`: keep a witness's key in the home and cosign logs' checkpoints."""

from __future__ import annotations

import json
import os
from pathlib import Path

import click

from agentd.app.ledger import rule_set
from agentd.cli.options import App, CheckFailed, emit_json, emit_table, json_option, pass_app, progress
from agentd.errors import AgentdError
from ledger import (
    CheckpointError,
    ConsistencyProof,
    Forked,
    Ledger,
    LedgerError,
    Witness,
    parse_checkpoint,
    parse_vkey,
)

PASSPHRASE_ENV = "AGENTD_WITNESS_PASSPHRASE"


@click.group("witness", short_help="A witness: cosign logs' checkpoints after checking they only grew.")
def command() -> None:
    """A witness keeps its own key (in the home's witness/ folder, sealed with
    AGENTD_WITNESS_PASSPHRASE when it is set) and, for each log it has seen, the log's
    key and the last checkpoint it cosigned. It cosigns a checkpoint (C2SP
    tlog-cosignature) only with a consistency proof from that one; one that contradicts
    it is refused with a fork proof (JSON on stdout, exit 3), which anyone holding the
    log's key can check with `agentd ledger fork-proof --check`."""


def _directory(app: App) -> Path:
    return app.home.root / "witness"


def _open(app: App) -> Witness:
    try:
        return Witness.open(_directory(app), os.environ.get(PASSPHRASE_ENV) or None)
    except LedgerError as exc:
        raise AgentdError(f"{exc}{'' if 'passphrase' not in str(exc) else f' (set {PASSPHRASE_ENV})'}") from None


@command.command("new", short_help="Create this home's witness key.")
@click.option(
    "--name", help="The witness's name on its cosignatures, like example.org/w1 (default: agentd.witness/<key id>)."
)
@json_option
@pass_app
def new(app: App, name: str | None, as_json: bool) -> None:
    """Create the home's witness: a fresh key, named on its cosignatures. Prints its
    verifier key, which auditors give to `agentd ledger verify --witness-key`."""
    if (_directory(app) / "witness-key.json").exists():
        raise AgentdError(f"this home has a witness already ({_directory(app)}): `agentd witness show` prints it")
    witness = Witness.create(_directory(app), name, os.environ.get(PASSPHRASE_ENV) or None)
    if as_json:
        emit_json({"name": witness.name, "vkey": witness.vkey})
        return
    click.echo(f"witness {witness.name}")
    click.echo(f"verifier key: {witness.vkey}")


@command.command("show", short_help="The witness's name, verifier key and the logs it has seen.")
@json_option
@pass_app
def show(app: App, as_json: bool) -> None:
    """Print the witness's name and verifier key, and each log it has cosigned for with
    the size of the last checkpoint it cosigned."""
    witness = _open(app)
    logs = [(seen.origin, seen.checkpoint.size, seen.checkpoint.root.hex()) for seen in witness.logs()]
    if as_json:
        emit_json(
            {
                "name": witness.name,
                "vkey": witness.vkey,
                "logs": [dict(zip(("origin", "size", "root"), x, strict=False)) for x in logs],
            }
        )
        return
    emit_table([("name", witness.name), ("verifier key", witness.vkey)])
    if logs:
        emit_table([("LOG", "SIZE", "ROOT"), *((o, s, r[:16]) for o, s, r in logs)])


@command.command("cosign", short_help="Cosign a checkpoint once it is shown to extend the last one seen.")
@click.argument(
    "checkpoint_file",
    metavar="[CHECKPOINT]",
    required=False,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
)
@click.option(
    "--proof",
    "proof_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A consistency proof from the last checkpoint this witness cosigned (`agentd ledger prove --from-size M`).",
)
@click.option(
    "--log-key", "log_vkey", metavar="VKEY", help="The log's verifier key, needed the first time a log is seen."
)
@click.option(
    "--ledger",
    "ledger_url",
    metavar="URL",
    help="Instead: cosign the latest checkpoint of the ledger at URL, with the proof it gives, and keep the cosignature in it.",
)
@json_option
@pass_app
def cosign(
    app: App,
    checkpoint_file: Path | None,
    proof_file: Path | None,
    log_vkey: str | None,
    ledger_url: str | None,
    as_json: bool,
) -> None:
    """Cosign CHECKPOINT (a file holding the log's signed note) and print it with the
    cosignature added; the log keeps it with `agentd ledger checkpoint --add FILE`. The
    first checkpoint of a log needs --log-key (from `agentd ledger checkpoint --json`);
    each later one needs --proof, a consistency proof from the last one cosigned.

    With --ledger URL, the witness reads the ledger itself (SQLite or PostgreSQL): its
    latest checkpoint, the consistency proof, and, the first time, the log's key from
    its genesis entry; the cosignature is kept in that ledger."""
    if (checkpoint_file is None) == (ledger_url is None):
        raise click.UsageError("give a CHECKPOINT file, or --ledger URL")
    witness = _open(app)
    key = _log_key(log_vkey)
    if ledger_url is not None:
        if proof_file is not None:
            raise click.UsageError("--ledger gives its own consistency proof: leave out --proof")
        _say_cosigned(_cosign_ledger(witness, ledger_url, key), as_json)
        return
    assert checkpoint_file is not None
    note = _read(checkpoint_file)
    proof = _read_proof(proof_file) if proof_file else None
    _say_cosigned(_cosigned(witness, note, proof, key), as_json)


def _say_cosigned(note: str, as_json: bool) -> None:
    if as_json:
        signed = parse_checkpoint(note)
        emit_json({"origin": signed.origin, "size": signed.size, "root": signed.root.hex(), "note": note})
    else:
        click.echo(note, nl=False)


def _cosign_ledger(witness: Witness, url: str, key: bytes | None) -> str:
    with Ledger.open(url, rule_set()) as ledger:
        note = ledger.latest_checkpoint()
        if note is None:
            raise AgentdError(f"the ledger at {ledger.url} has signed no checkpoint yet")
        signed = parse_checkpoint(note)
        seen = witness.seen(signed.origin)
        proof = (
            ledger.consistency_proof(seen.checkpoint.size, signed.size)
            if seen and seen.checkpoint.size < signed.size
            else None
        )
        if seen is None and key is None:
            key = ledger.public_key
            progress(f"agentd: first checkpoint of {signed.origin}: trusting the log's key its genesis entry names")
        cosigned = _cosigned(witness, note, proof, key)
        return ledger.add_cosignatures(cosigned)


def _cosigned(witness: Witness, note: str, proof: ConsistencyProof | None, key: bytes | None) -> str:
    try:
        return witness.cosign(note, proof, key)
    except Forked as refused:
        click.echo(json.dumps(refused.proof.to_json(), indent=2))
        raise CheckFailed(f"{refused} (the fork proof is on stdout)") from None


def _log_key(log_vkey: str | None) -> bytes | None:
    if log_vkey is None:
        return None
    try:
        return parse_vkey(log_vkey)[1]
    except CheckpointError as exc:
        raise click.BadParameter(str(exc), param_hint="--log-key") from None


def _read(path: Path) -> str:
    try:
        note = path.read_text()
        parse_checkpoint(note)
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentdError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    except CheckpointError as exc:
        raise AgentdError(f"{path} is not a checkpoint: {exc}") from None
    return note


def _read_proof(path: Path) -> ConsistencyProof:
    """A consistency proof as `agentd ledger prove --from-size` prints it."""
    try:
        return ConsistencyProof.from_json(json.loads(path.read_text()))
    except (OSError, UnicodeDecodeError, ValueError, LedgerError) as exc:
        raise AgentdError(f"{path} is not a consistency proof (`agentd ledger prove --from-size M`): {exc}") from None
