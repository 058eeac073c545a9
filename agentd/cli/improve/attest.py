"""`agentd improve attest`: rebuild someone else's release, score it, and publish what was found."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from agentd.app.attest import EXPIRES_DAYS, RUNS, Attested, AttestRequest, attest
from agentd.cli.completers import wallets
from agentd.cli.options import (
    NUMBERS,
    App,
    CheckFailed,
    Usd,
    emit_json,
    json_option,
    pass_app,
    progress,
    sandbox_options,
)


@click.command("attest", context_settings=NUMBERS)
@click.argument("release")
@click.option(
    "--source",
    required=True,
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="A git checkout holding the release's commit, its changes committed.",
)
@click.option(
    "--patch",
    "patch",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The release's patch, as its publisher handed it over.",
)
@click.option(
    "--tasks",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The sealed tasks the publisher handed over (a task set or the seal file).",
)
@click.option(
    "--wallet", required=True, shell_complete=wallets, help="The attester's wallet, which signs the attestation."
)
@click.option(
    "--adjudicator",
    shell_complete=wallets,
    help="Attest on your open bond under this adjudicator (a wallet name or id).",
)
@click.option(
    "--bond",
    "bond",
    type=Usd(),
    help="Post a bond of this many USD under --adjudicator with the attestation, on it (both or neither).",
)
@sandbox_options
@click.option(
    "--runs", type=click.IntRange(min=1), default=RUNS, show_default=True, help="Runs of each sealed task per tree."
)
@click.option(
    "--publish-failure", is_flag=True, help="Publish a negative attestation (holds: false) when it does not hold up."
)
@click.option(
    "--expires-in",
    "expires_in",
    type=click.IntRange(min=1),
    default=EXPIRES_DAYS,
    show_default=True,
    help="Days until the attestation expires.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the attestation as an in-toto statement (DSSE) here.",
)
@json_option
@pass_app
def attest_command(
    app: App,
    release: str,
    source: Path,
    patch: Path,
    tasks: Path,
    wallet: str,
    adjudicator: str | None,
    bond: int | None,
    readable: tuple[Path, ...],
    env: tuple[str, ...],
    runs: int,
    publish_failure: bool,
    expires_in: int,
    out: Path | None,
    as_json: bool,
) -> None:
    """Rebuild RELEASE (its id, or its claim id) from --source at its commit, once as it
    stood and once with --patch, build and test both in this home's sandbox, score both on
    the sealed --tasks, and decide as the loop decided to keep it, at its seal's level.
    --readable and --env add to the sandbox as for `improve code`.
    When it holds up, publish agent.release-attestation/v1 signed by --wallet. A publisher
    cannot attest its own release. Exit 0 when it holds up, 3 when it does not (nothing
    published unless --publish-failure), 1 when refused, 2 for a bad value."""
    request = AttestRequest(
        release=release,
        source=source,
        patch=patch,
        tasks=tasks,
        wallet=wallet,
        adjudicator=adjudicator,
        bond_cents=bond,
        runs=runs,
        publish_failure=publish_failure,
        expires_days=expires_in,
        out=out,
        readable=readable,
        env=env,
    )
    done = attest(app.home, request, progress)
    if as_json:
        emit_json(_json(done))
    else:
        click.echo(_line(done))
    if not done.finding.holds:
        raise click.exceptions.Exit(CheckFailed.exit_code)


def _line(done: Attested) -> str:
    f = done.finding
    rid = f.release.id
    on = f" on bond {done.bond}" if done.bond else ""
    wrote = f"; its in-toto statement is {done.out}" if done.out else ""
    if f.holds:
        return f"attested release {rid} as claim {done.claim}{on}: {f.why}{wrote}"
    said = f"; published as negative attestation claim {done.claim}{on}{wrote}" if done.claim else "; nothing published"
    return f"release {rid} does not hold up: {f.why}{said}"


def _json(done: Attested) -> dict[str, Any]:
    f = done.finding
    return {
        "release": f.release.id,
        "release_claim": f.release.claim,
        "holds": f.holds,
        "why": f.why,
        "before": {"passed": f.before[0], "runs": f.before[1]},
        "after": {"passed": f.after[0], "runs": f.after[1]},
        "interval": list(f.interval) if f.interval else None,
        "level": f.release.level,
        "runs": f.runs,
        "claim": done.claim,
        "pulse": done.pulse,
        "bond": done.bond,
        "adjudicator": done.adjudicator,
        "out": str(done.out) if done.out else None,
    }
