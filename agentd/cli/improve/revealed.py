"""`agentd improve reveal` and `agentd improve reexamine`: a seal an examiner held,
retired and revealed, and any of its examinations run again to check the examiner."""

from __future__ import annotations

from pathlib import Path

import click

from agentd.cli.completers import profiles, wallets
from agentd.cli.options import App, CheckFailed, emit_json, json_option, pass_app, progress


@click.command("reveal", short_help="Retire an examiner's seal and reveal its tasks and examinations.")
@click.argument("profile", shell_complete=profiles)
@click.option(
    "--wallet",
    required=True,
    shell_complete=wallets,
    help="The seal's publisher: it signs the retirement, and the ledger takes the reveal.",
)
@click.option("--seal", "seal_id", metavar="ID", help="The seal to reveal (default: the profile's current seal).")
@click.option(
    "--retire",
    is_flag=True,
    help="Retire the seal first though it has confirmations left: it then confirms no more changes.",
)
@json_option
@pass_app
def reveal(app: App, profile: str, wallet: str, seal_id: str | None, retire: bool, as_json: bool) -> None:
    """Ask the examiner that holds PROFILE's seal to reveal it: its sealed tasks, and every
    examination it made with what it was asked, in a bundle whose digest it signs
    (agent.seal-reveal/v1, appended here). It does so only once the seal's confirmations
    are spent, or when its publisher retires it (--retire, agent.seal-retirement/v1).
    The bundle is checked against the seal's claim and kept in routes/; anyone may rerun
    an examination on it (agentd improve reexamine)."""
    from agentd.app.examining import reveal_seal

    done = reveal_seal(app.home, profile, wallet, seal_id, retire)
    if as_json:
        emit_json(
            {
                "seal": done.seal,
                "revealed": str(done.path),
                "tasks": done.tasks,
                "canaries": done.canaries,
                "examinations": done.examinations,
                "retired": done.retired,
                "claim": done.claim,
            }
        )
        return
    if done.retired:
        click.echo(f"retired seal {done.seal}: it confirms no more changes")
    click.echo(
        f"revealed seal {done.seal}: {done.tasks} sealed tasks, {done.canaries} canaries and {done.examinations} "
        f"examination(s), as claim {done.claim[:16]}; they match the seal's claim"
    )
    click.echo(f"kept in {done.path}")


@click.command("reexamine", short_help="Run an examiner's examination again on its revealed seal.")
@click.argument("examination")
@click.option(
    "--revealed",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    required=True,
    help="The revealed seal (agentd improve reveal keeps it; the examiner serves it at /v1/examiner/seals/ID/revealed).",
)
@click.option(
    "--models",
    "models_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The folder `script:` models are read from (default: none; other providers use this home's keys).",
)
@click.option(
    "--source",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="For a code change: a checkout holding its commit, both arms rebuilt from it in this home's sandbox.",
)
@json_option
@pass_app
def reexamine(
    app: App, examination: str, revealed: Path, models_dir: Path | None, source: Path | None, as_json: bool
) -> None:
    """Run EXAMINATION (an agent.examination/v1 claim id, or a prefix) again on the revealed
    seal: the bundle is held against the seal's claim and the reveal's digest, both arms
    run here on this home's models, and the decision is made again at the level of the
    confirmation it spent. Exit 0 when the examiner's decision holds up, 3 when it does
    not (challenge it on its bond: agentd challenge). Nothing is spent or published."""
    from agentd.app.reexamine import reexamine as run_again

    done = run_again(app.home, examination, revealed, models_dir, progress, source)
    if as_json:
        emit_json(done.to_json())
    else:
        for line in done.lines():
            click.echo(line)
    if not done.holds:
        raise CheckFailed(f"examination {done.examination.claim_id[:16]} does not hold up on its revealed seal")
