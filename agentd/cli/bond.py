"""`agentd bond`, `agentd challenge` and `agentd rule`: funds an attester locks behind
its attestations, the challenges that dispute them, and the adjudicator's rulings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from agentd.app import bonds as app
from agentd.cli.completers import wallets
from agentd.cli.options import (
    NUMBERS,
    App,
    Usd,
    emit_json,
    emit_table,
    format_usd,
    json_option,
    pass_app,
    progress,
    warn_skipped,
)
from agentd.errors import WrongValue
from agentd.home import Home
from agentd.wallets import wallet_names
from ledger import Bond, Challenge


@click.group("bond", short_help="Bonds: funds locked behind attestations, slashed when one is shown false.")
def command() -> None:
    """Bonds: funds a wallet locks behind the attestations it issues on them.

    A bond names the adjudicator who rules on challenges to what it backs. An upheld
    challenge shows the attestation false and slashes the bond: the challenger gets its
    deposit back and the bond's funds, and the bond stands behind nothing from then on,
    even for attestations issued on it later. A dismissed challenge's deposit goes to the
    bond's owner. A bond is withdrawn (its funds returned) only while no challenge on it
    is open. All of it is on the ledger, checked on append and by `agentd ledger verify`.
    """


@command.command("post", short_help="Lock USD of wallet W in a bond under an adjudicator.", context_settings=NUMBERS)
@click.argument("wallet", metavar="W", shell_complete=wallets)
@click.argument("cents", metavar="USD", type=Usd())
@click.option(
    "--adjudicator",
    required=True,
    metavar="WALLET",
    shell_complete=wallets,
    help="Who rules on challenges (a wallet name or id).",
)
@click.option("--memo", default="", help="A note recorded with the bond (up to 500 characters).")
@json_option
@pass_app
def post(app_: App, wallet: str, cents: int, adjudicator: str, memo: str, as_json: bool) -> None:
    """Post a bond (bond.post/v1): USD of wallet W locked, under ADJUDICATOR."""
    written = app.post_bond(app_.home, wallet, cents, adjudicator, memo)
    _written(
        app_.home,
        written,
        as_json,
        f"posted bond {written.entry.claim_id[:16]}: {format_usd(cents)} of {wallet} locked",
    )


@command.command("withdraw", short_help="Withdraw wallet W's bond, its funds returned.")
@click.argument("wallet", metavar="W", shell_complete=wallets)
@click.argument("bond", metavar="BOND")
@json_option
@pass_app
def withdraw(app_: App, wallet: str, bond: str, as_json: bool) -> None:
    """Withdraw BOND (bond.withdraw/v1; a claim id or a prefix of 4+ hex digits): its
    funds go back to W, and it stands behind nothing from then on. Refused while a
    challenge on it is open."""
    written = app.withdraw_bond(app_.home, wallet, bond)
    _written(
        app_.home,
        written,
        as_json,
        f"withdrew bond {written.bond.id[:16]}: {format_usd(written.bond.cents)} back to {wallet}",
    )


@command.command("list", short_help="List bonds, their funds and state.")
@click.option("--owner", metavar="WALLET", shell_complete=wallets, help="Only this wallet's bonds.")
@json_option
@pass_app
def list_(app_: App, owner: str | None, as_json: bool) -> None:
    """List the log's bonds: id, owner, funds, adjudicator, state, claims on it and
    challenges still open. A wallet this home holds is named beside its id."""
    found = app.bonds(app_.home, owner)
    names = _names(app_.home)
    if as_json:
        emit_json([_bond_json(b, names) for b in found])
        return
    if not found:
        progress("no bonds yet: post one with `agentd bond post W USD --adjudicator WALLET`")
        return
    rows: list[tuple[Any, ...]] = [("BOND", "OWNER", "FUNDS", "ADJUDICATOR", "STATE", "CLAIMS", "OPEN CHALLENGES")]
    rows += [
        (
            b.id[:16],
            _who(b.owner, names, 8),
            format_usd(b.cents),
            _who(b.adjudicator, names, 8),
            b.status,
            len(b.claims),
            len(b.open_challenges),
        )
        for b in found
    ]
    emit_table(rows)


@command.command("show", short_help="Show one bond with its claims and challenges.")
@click.argument("bond", metavar="BOND")
@json_option
@pass_app
def show(app_: App, bond: str, as_json: bool) -> None:
    """Show BOND: its funds, adjudicator and state, the claims issued on it, and every
    challenge to them with its ruling. A wallet this home holds is named beside its id."""
    found, challenges = app.bond_with_challenges(app_.home, bond)
    names = _names(app_.home)
    if as_json:
        emit_json({**_bond_json(found, names), "challenges": [_challenge_json(c, names) for c in challenges]})
        return
    emit_table(
        [
            ("bond", found.id),
            ("owner", _who(found.owner, names)),
            ("funds", format_usd(found.cents)),
            ("adjudicator", _who(found.adjudicator, names)),
            ("state", _state(found)),
            ("posted at", f"Pulse {found.pulse}"),
        ]
    )
    for claim in found.claims:
        click.echo(f"backs claim {claim}")
    for c in challenges:
        ruled = f", ruling {c.ruling[:16]}" if c.ruling else ""
        click.echo(
            f"challenge {c.id[:16]} of claim {c.claim[:16]} by {_who(c.challenger, names)}: {format_usd(c.cents)} deposit, {c.status}{ruled}"
        )


@click.command(
    "challenge",
    short_help="Challenge an attestation or an examination on its bond, with a deposit.",
    context_settings=NUMBERS,
)
@click.argument("wallet", metavar="W", shell_complete=wallets)
@click.argument("claim", metavar="CLAIM")
@click.argument("bond", metavar="BOND")
@click.option("--deposit", "cents", type=Usd(), required=True, help="USD of W locked until the ruling.")
@click.option(
    "--evidence", default="", help="What you found on rebuilding the release, or on rerunning the examination."
)
@click.option(
    "--evidence-file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Read the evidence from this file.",
)
@click.option(
    "--recipe",
    is_flag=True,
    help="Carry the rebuild recipe (release, commit, patch, sealed tasks, commands) for `rule --rerun`.",
)
@json_option
@pass_app
def challenge(
    app_: App,
    wallet: str,
    claim: str,
    bond: str,
    cents: int,
    evidence: str,
    evidence_file: Path | None,
    recipe: bool,
    as_json: bool,
) -> None:
    """Challenge attestation or examination CLAIM on BOND (bond.challenge/v1), signed by W,
    with a deposit. The bond's adjudicator rules on it: upheld, W gets the deposit back and the
    bond's funds; dismissed, the deposit goes to the bond's owner."""
    if evidence_file is not None:
        if evidence:
            raise WrongValue("give the evidence once: --evidence or --evidence-file, not both")
        evidence = evidence_file.read_text(errors="replace")
    written = app.challenge(app_.home, wallet, claim, bond, cents, evidence, recipe)
    _written(
        app_.home,
        written,
        as_json,
        f"challenged claim {written.entry.body['claim'][:16]} on bond {written.bond.id[:16]} as {written.entry.claim_id[:16]}: "
        f"{format_usd(cents)} of {wallet} deposited until the adjudicator rules",
    )


@click.command("rule", short_help="Rule on a challenge, as the bond's adjudicator.")
@click.argument("wallet", metavar="W", shell_complete=wallets)
@click.argument("challenge_ref", metavar="CHALLENGE")
@click.option("--uphold/--dismiss", default=None, help="Uphold the challenge (the claim is false) or dismiss it.")
@click.option("--note", default="", help="Why (recorded with the ruling, up to 500 characters).")
@click.option("--rerun", is_flag=True, help="First rerun the challenge's rebuild recipe here and print what it finds.")
@click.option(
    "--source", type=click.Path(exists=True, file_okay=False, path_type=Path), help="With --rerun: the checkout."
)
@click.option(
    "--patch", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="With --rerun: the release's patch."
)
@click.option(
    "--tasks", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="With --rerun: the sealed tasks."
)
@click.option(
    "--revealed",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="With --rerun, for a challenged examination: its revealed seal (agentd improve reveal keeps it); "
    "with --source too for a code change's.",
)
@click.option(
    "--models",
    "models_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="With --revealed: the folder `script:` models are read from.",
)
@json_option
@pass_app
def rule(
    app_: App,
    wallet: str,
    challenge_ref: str,
    uphold: bool | None,
    note: str,
    rerun: bool,
    source: Path | None,
    patch: Path | None,
    tasks: Path | None,
    revealed: Path | None,
    models_dir: Path | None,
    as_json: bool,
) -> None:
    """Rule on CHALLENGE (bond.ruling/v1) as W, the adjudicator its bond names; once.
    Upheld: the attestation is shown false and the bond slashed, its funds and the
    deposit to the challenger. Dismissed: the deposit to the bond's owner.

    With --rerun (and --source, --patch, --tasks: the checkout, the release's patch and
    the sealed tasks), the challenge's rebuild recipe is first rerun in this home's own
    sandbox and what it found printed beside what the attestation claimed; without
    --uphold or --dismiss nothing is ruled yet, so you can decide on it. The rerun runs
    the release's own published commands (the recipe's only for a step the release
    leaves empty; each difference is printed) and at most 64 runs of each sealed task:
    a recipe asking more is refused. A challenged examination is rerun instead from its
    revealed seal (--rerun --revealed FILE), its two arms on this home's models."""
    if rerun and revealed is not None:
        _reexamine(app_, challenge_ref, revealed, models_dir, source, as_json and uphold is None)
        if uphold is None:
            return
    elif rerun:
        _rerun(app_, challenge_ref, source, patch, tasks, as_json and uphold is None)
        if uphold is None:
            return
    elif source or patch or tasks or revealed:
        raise WrongValue("--source, --patch, --tasks and --revealed are for --rerun")
    if uphold is None:
        raise WrongValue("say how you rule: --uphold or --dismiss (or --rerun first, to see what a rebuild finds)")
    written = app.rule(app_.home, wallet, challenge_ref, uphold, note)
    if uphold:
        said = f"upheld challenge {written.entry.body['challenge'][:16]}: the claim is shown false, bond {written.bond.id[:16]} slashed"
    else:
        said = f"dismissed challenge {written.entry.body['challenge'][:16]}: its deposit goes to the bond's owner"
    _written(app_.home, written, as_json, said)


def _rerun(
    app_: App, challenge_ref: str, source: Path | None, patch: Path | None, tasks: Path | None, as_json: bool
) -> None:
    from agentd.app.attest import rerun_challenge  # loads the harness and the sandbox only when asked

    if source is None or patch is None or tasks is None:
        raise WrongValue(
            "--rerun needs --source CHECKOUT, --patch FILE and --tasks SEALED: what the recipe is rebuilt from"
        )
    done = rerun_challenge(app_.home, challenge_ref, source, patch, tasks, progress)
    if as_json:
        emit_json(
            {
                "challenge": done.challenge.id,
                "claimed": done.claimed,
                "differs": list(done.differs),
                "found": done.found.body("", done.claimed["expires"]),
            }
        )
        return
    for line in done.lines():
        click.echo(line)


def _reexamine(
    app_: App, challenge_ref: str, revealed: Path, models_dir: Path | None, source: Path | None, as_json: bool
) -> None:
    from agentd.app.reexamine import reexamine_challenged  # loads the harness only when asked

    done = reexamine_challenged(app_.home, challenge_ref, revealed, models_dir, progress, source)
    if as_json:
        emit_json(done.to_json())
        return
    for line in done.lines():
        click.echo(line)


def _written(home: Home, written: app.Written, as_json: bool, said: str) -> None:
    if as_json:
        bond = _bond_json(written.bond, _names(home))
        emit_json({"pulse": written.entry.pulse, "claim": written.entry.claim_id, "bond": bond})
        return
    click.echo(f"{said} (Pulse {written.entry.pulse}, claim {written.entry.claim_id[:16]})")


def _state(bond: Bond) -> str:
    return bond.status if bond.ended is None else f"{bond.status} at Pulse {bond.ended}"


def _names(home: Home) -> dict[str, str]:
    """The names this home gives wallet ids; names are only a help, so a wallet file
    that cannot be read is passed over with a warning."""
    return wallet_names(home, skip=warn_skipped)


def _who(wallet_id: str, names: dict[str, str], digits: int = 32) -> str:
    """A wallet as a person reads it: `bob (3f2a9c1e…)` when this home names it (its id
    cut to `digits`), else its whole id, the only handle on it there is."""
    if wallet_id not in names:
        return wallet_id
    return f"{names[wallet_id]} ({wallet_id if digits >= len(wallet_id) else wallet_id[:digits] + '…'})"


def _bond_json(bond: Bond, names: dict[str, str]) -> dict[str, Any]:
    return {
        "bond": bond.id,
        "owner": bond.owner,
        "owner_name": names.get(bond.owner),
        "cents": bond.cents,
        "adjudicator": bond.adjudicator,
        "adjudicator_name": names.get(bond.adjudicator),
        "pulse": bond.pulse,
        "status": bond.status,
        "ended": bond.ended,
        "claims": list(bond.claims),
        "open_challenges": list(bond.open_challenges),
    }


def _challenge_json(c: Challenge, names: dict[str, str]) -> dict[str, Any]:
    return {
        "challenge": c.id,
        "bond": c.bond,
        "claim": c.claim,
        "challenger": c.challenger,
        "challenger_name": names.get(c.challenger),
        "cents": c.cents,
        "pulse": c.pulse,
        "status": c.status,
        "ruling": c.ruling,
        "evidence": c.evidence,
        "recipe": c.recipe,
    }
