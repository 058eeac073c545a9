"""`agentd improve install`: a release applied to a checkout only when your own checks hold; --undo."""

from __future__ import annotations

from pathlib import Path

import click

from agentd.app.install import InstallRequest, install, undo
from agentd.cli.completers import profiles, wallets
from agentd.cli.options import NUMBERS, App, CheckFailed, Usd, emit_json, format_usd, json_option, pass_app, users_umask
from agentd.errors import WrongValue
from improver import DEFAULT_ALLOW, LEAST_BOND


@click.command("install", context_settings=NUMBERS)
@click.argument("profile", shell_complete=profiles)
@click.argument("release")
@click.option(
    "--source",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The git checkout to apply the release to, at the release's commit.",
)
@click.option(
    "--patch", "patch", type=click.Path(exists=True, dir_okay=False, path_type=Path), help="The release's patch file."
)
@click.option("--attestation", "attestations", multiple=True, help="An attestation's claim id or prefix (repeat).")
@click.option(
    "--verifier", "verifiers", multiple=True, help="A wallet (name here, or id) whose attestation you require (repeat)."
)
@click.option(
    "--allow", multiple=True, help=f"A path the patch may touch (repeat; default {', '.join(DEFAULT_ALLOW)})."
)
@click.option("--bonded", is_flag=True, help="Count only attestations on an open bond under an --adjudicator you name.")
@click.option(
    "--adjudicator",
    "adjudicators",
    multiple=True,
    shell_complete=wallets,
    help="A wallet whose rulings you trust (repeat).",
)
@click.option("--least-bond", type=Usd(), help=f"USD a bond must hold  [default: {format_usd(LEAST_BOND)}]")
@click.option("--undo", "take_out", is_flag=True, help="Take the installed release back out of its checkout.")
@json_option
@pass_app
def install_command(
    app: App,
    profile: str,
    release: str,
    source: Path | None,
    patch: Path | None,
    attestations: tuple[str, ...],
    verifiers: tuple[str, ...],
    allow: tuple[str, ...],
    bonded: bool,
    adjudicators: tuple[str, ...],
    least_bond: int | None,
    take_out: bool,
    as_json: bool,
) -> None:
    """Apply RELEASE's patch to the --source checkout for PROFILE only when four checks
    hold: the patch is the one published (patch), every path it touches is within
    --allow, read from the patch itself (allow), the checkout stands at the release's
    commit (commit), and each --verifier has an attestation among those given that
    counts (attestations). Nothing is built or run. Exit 3 when a check fails, with
    nothing changed; 2 for a bad value. --undo takes an installed release back out."""
    if take_out:
        with users_umask():
            record = undo(app.home, profile, release, source)
        if as_json:
            emit_json({"release": release, "undone": True, "checkout": record["checkout"]})
        else:
            click.echo(f"took release {release} back out of {record['checkout']}")
        return
    if source is None or patch is None:
        raise WrongValue("give --source CHECKOUT and --patch FILE (or --undo to take an installed release back out)")
    request = InstallRequest(
        source=source,
        patch=patch,
        attestations=attestations,
        verifiers=verifiers,
        allow=allow or DEFAULT_ALLOW,
        bonded=bonded,
        adjudicators=adjudicators,
        least_bond=least_bond,
    )
    with users_umask():  # the checkout is the user's: files git rewrites keep the user's modes
        done = install(app.home, profile, release, request)
    found = done.review
    if as_json:
        emit_json(
            {
                "release": release,
                "installed": done.installed,
                "checks": [{"name": c.name, "ok": c.ok, "detail": c.detail} for c in found.checks],
                "attestations": [
                    {"claim": w.claim, "author": w.author, "counts": w.counts, "why": w.why} for w in found.attestations
                ],
                "record": str(done.record_path) if done.installed else None,
            }
        )
    else:
        for w in found.attestations:
            click.echo(f"attestation {w.claim[:12]}: {w.why}")
        for c in found.checks:
            click.echo(f"{'ok' if c.ok else 'FAILED'} {c.name}: {c.detail}")
        if done.installed:
            click.echo(
                f"installed release {release} into {source}; take it back out with: "
                f"agentd improve install {profile} {release} --undo"
            )
    if not done.installed:
        raise CheckFailed(f"release {release} not installed ({', '.join(found.failed)} failed); nothing was changed")
