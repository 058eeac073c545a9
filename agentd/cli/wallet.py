"""`agentd wallet`: create, list, show and fund wallets."""

from __future__ import annotations

import base64
from typing import Any

import click

from agentd.app.ledger import open_ledger
from agentd.cli.completers import wallets
from agentd.cli.options import NUMBERS, App, Usd, emit_json, emit_table, format_usd, json_option, pass_app
from agentd.errors import AgentdError
from agentd.wallets import create_wallet, list_wallets, load_wallet, log_key, seal_log_key, wallet_id_of, wallet_info
from ledger import MINT, TRANSFER, Entry, KeyFile


@click.group("wallet", short_help="Wallets: keys that sign entries and hold funds.")
def command() -> None:
    """Wallets: Ed25519 keys that sign ledger entries and hold funds (integer cents).

    A wallet's seed is encrypted (scrypt, n=2^17, + ChaCha20-Poly1305) with
    AGENTD_WALLET_PASSPHRASE when it is set, or a passphrase asked for on a terminal;
    without either it is stored unencrypted, readable only by you (mode 0600). The
    log's own key is sealed the same way with AGENTD_LOG_PASSPHRASE when it is set.

    With --json, fund and transfer print the entry's receipt: the checkpoint the log
    signed that covers it, or the log's signed promise of one.
    """


@command.command("new")
@click.argument("name")
@json_option
@pass_app
def new(app: App, name: str, as_json: bool) -> None:
    """Create wallet NAME with a fresh key; prints its id."""
    wallet = create_wallet(app.home, name)
    info = wallet_info(app.home, wallet.name)
    if as_json:
        emit_json(_describe(info, 0))
        return
    sealed = "encrypted" if info.encrypted else "unencrypted, mode 0600"
    click.echo(f"wallet {name}: id {wallet.id}")
    click.echo(f"key file: {info.path} ({sealed})")


@command.command("list")
@json_option
@pass_app
def list_(app: App, as_json: bool) -> None:
    """List the home's wallets with their ids and balances."""
    wallets = list_wallets(app.home)
    with open_ledger(app.home, read_only=True) as ledger:
        balances = ledger.state().balances
    if as_json:
        emit_json([_describe(w, balances.get(w.id, 0)) for w in wallets])
        return
    if not wallets:
        click.echo("no wallets yet: create one with `agentd wallet new NAME`", err=True)
        return
    rows = [("NAME", "ID", "BALANCE", "KEY")]
    rows += [(w.name, w.id, format_usd(balances.get(w.id, 0)), _sealed(w)) for w in wallets]
    emit_table(rows)


@command.command("show")
@click.argument("name", shell_complete=wallets)
@json_option
@pass_app
def show(app: App, name: str, as_json: bool) -> None:
    """Show wallet NAME: its id, public key and balance on the ledger."""
    info = wallet_info(app.home, name)
    with open_ledger(app.home, read_only=True) as ledger:
        balance = ledger.balance(info.id)
    described = _describe(info, balance)
    if as_json:
        emit_json(described)
        return
    emit_table(
        [
            ("name", info.name),
            ("id", info.id),
            ("public key", described["public_key"]),
            ("balance", format_usd(balance)),
            ("key file", f"{info.path} ({_sealed(info)})"),
        ]
    )


@command.command("fund", short_help="Mint USD to wallet NAME (signed by the log's key).", context_settings=NUMBERS)
@click.argument("name", shell_complete=wallets)
@click.argument("cents", metavar="USD", type=Usd())
@json_option
@pass_app
def fund(app: App, name: str, cents: int, as_json: bool) -> None:
    """Mint USD (a decimal like 12.50) to wallet NAME, signed by the log's key.

    Only the key that started the log may mint: the ledger refuses a funds.mint/v1
    entry from any other wallet.
    """
    info = wallet_info(app.home, name)
    with open_ledger(app.home) as ledger:
        entry = ledger.append(log_key(app.home), MINT, {"to": info.id, "cents": cents})
        balance = ledger.balance(info.id)
    if as_json:
        emit_json(
            {
                "pulse": entry.pulse,
                "claim": entry.claim_id,
                "wallet": info.id,
                "cents": cents,
                "balance": balance,
                **_receipt(entry),
            }
        )
        return
    click.echo(f"minted {format_usd(cents)} to {name}: Pulse {entry.pulse}, claim {entry.claim_id[:16]}")
    click.echo(f"balance of {name}: {format_usd(balance)}")


@command.command("transfer", short_help="Send USD from wallet FROM to TO.", context_settings=NUMBERS)
@click.argument("sender", metavar="FROM", shell_complete=wallets)
@click.argument("to", shell_complete=wallets)
@click.argument("cents", metavar="USD", type=Usd())
@click.option("--memo", default="", help="A note recorded with the transfer (up to 500 characters).")
@json_option
@pass_app
def transfer(app: App, sender: str, to: str, cents: int, memo: str, as_json: bool) -> None:
    """Send USD from wallet FROM to TO (a wallet name in this home, or a wallet id),
    signed by FROM's key. The ledger refuses an overdraft."""
    to_id = wallet_id_of(app.home, to)
    signer = load_wallet(app.home, sender)
    body: dict[str, Any] = {"to": to_id, "cents": cents, **({"memo": memo} if memo else {})}
    with open_ledger(app.home) as ledger:
        held = ledger.balance(signer.id)
        if cents > held:
            # Said here in the user's words; the ledger's own rule still holds on append.
            raise AgentdError(
                f"{sender} holds {format_usd(held)}, less than the {format_usd(cents)} to send; "
                f"fund it first (agentd wallet fund {sender} USD)"
            )
        entry = ledger.append(signer, TRANSFER, body)
        balance = ledger.balance(signer.id)
    if as_json:
        emit_json(
            {
                "pulse": entry.pulse,
                "claim": entry.claim_id,
                "from": signer.id,
                "to": to_id,
                "cents": cents,
                "balance": balance,
                **_receipt(entry),
            }
        )
        return
    click.echo(f"sent {format_usd(cents)} from {sender} to {to}: Pulse {entry.pulse}, claim {entry.claim_id[:16]}")
    click.echo(f"balance of {sender}: {format_usd(balance)}")


@command.command("seal-log-key", short_help="Seal the log's key with AGENTD_LOG_PASSPHRASE.")
@json_option
@pass_app
def seal_log_key_(app: App, as_json: bool) -> None:
    """Seal the home's unencrypted log key (log-key.json) with AGENTD_LOG_PASSPHRASE, in
    place. Every command that signs for the log then needs the variable set."""
    path = seal_log_key(app.home)
    if as_json:
        emit_json({"sealed": str(path)})
    else:
        click.echo(f"sealed {path} with AGENTD_LOG_PASSPHRASE")


def _receipt(entry: Entry) -> dict[str, Any]:
    return {"receipt": entry.receipt.to_json()} if entry.receipt else {}


def _sealed(info: KeyFile) -> str:
    return "encrypted" if info.encrypted else "unencrypted"


def _describe(info: KeyFile, balance: int) -> dict[str, Any]:
    return {
        "name": info.name,
        "id": info.id,
        "public_key": base64.b64encode(info.public_key).decode(),
        "balance_cents": balance,
        "encrypted": info.encrypted,
        "path": str(info.path),
    }
