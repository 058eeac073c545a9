"""`agentd improve improver`: the improver that writes the agent's changes, improved on
problems, or shown as it is (`--show`)."""

from __future__ import annotations

import sys

import click

from agentd.app.improver import ImproverRequest, improve_improver, improver_of
from agentd.cli.completers import profiles, wallets
from agentd.cli.options import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    App,
    emit_json,
    emit_json_line,
    json_option,
    pass_app,
    progress,
)
from agentd.errors import WrongValue
from improver import REPLICATIONS, Event, Interrupted


@click.command("improver")
@click.argument("profile", shell_complete=profiles)
@click.option("--proposer", help="The model that proposes changes, to the agent and to the improver, provider:model.")
@click.option(
    "--problem",
    "problems",
    multiple=True,
    metavar="TRAIN,HELD",
    help="Two task files: the loop chooses changes on TRAIN, the agent is measured on HELD (repeat).",
)
@click.option(
    "--held-out-problem",
    "held_out",
    multiple=True,
    metavar="TRAIN,HELD",
    help="A problem a kept improver is confirmed on, never one of the --problem ones (repeat).",
)
@click.option("--runs", type=click.IntRange(min=1), default=4, show_default=True, help="Runs of each task per trial.")
@click.option(
    "--rounds", type=click.IntRange(min=1), default=1, show_default=True, help="Rounds of changes to the improver."
)
@click.option(
    "--loop-rounds",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Rounds of the lesson loop on each problem's TRAIN tasks, grading an improver.",
)
@click.option(
    "--confirmations",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Improvers the held-out problems, and each of their tasks, may confirm; each at one-sided level 0.05/k.",
)
@click.option(
    "--replications",
    type=click.IntRange(min=1),
    default=REPLICATIONS,
    show_default=True,
    help="Replications of each problem's grading loop, seeded alike, on which both improvers of a comparison are "
    "graded afresh; each is one draw of whether the loop left the agent better. Fewer than 5 with one held-out "
    "problem can confirm nothing at the default --confirmations.",
)
@click.option(
    "--max-tokens",
    type=click.IntRange(min=0),
    help="Stop before this many tokens (proposals, grading loops and trials together) would be passed.",
)
@click.option("--apply", is_flag=True, help="Make each kept improver the profile's (its improver.json) at once.")
@click.option(
    "--wallet",
    shell_complete=wallets,
    help="Publish each kept improver as an agent.improver/v1 claim with this wallet.",
)
@click.option(
    "--seed", type=int, help="Seed every replication of the grading loops (default: random); the lineage names them."
)
@click.option("--show", is_flag=True, help="Print the profile's improver as it is: its instructions and settings.")
@json_option
@pass_app
def improver(
    app: App,
    profile: str,
    proposer: str | None,
    problems: tuple[str, ...],
    held_out: tuple[str, ...],
    runs: int,
    rounds: int,
    loop_rounds: int,
    confirmations: int,
    replications: int,
    max_tokens: int | None,
    apply: bool,
    wallet: str | None,
    seed: int | None,
    show: bool,
    as_json: bool,
) -> None:
    """Improve what writes PROFILE's changes: the proposer's instructions and three
    settings. Each round the improver proposes changes to itself; one is kept when the
    agent improves more with it, beyond chance, on the held tasks of the --problem
    problems and then of the --held-out-problem ones: both improvers graded afresh on the
    same --replications of each problem's grading loop, each replication one draw. Exit 0
    when every round ran, 1 when it stopped early, 130 when interrupted."""
    if show:
        _show(app, profile, as_json)
        return
    if not proposer:
        raise WrongValue("--proposer is missing: name the model that proposes changes (or give --show)")
    if not problems:
        raise WrongValue("--problem is missing: give at least one TRAIN,HELD pair of task files")

    def say(event: Event) -> None:
        if as_json:
            emit_json_line({"event": event.kind, "text": event.text, **event.data})
        else:
            click.echo(event.text)

    request = ImproverRequest(
        proposer,
        problems,
        held_out,
        runs,
        rounds,
        loop_rounds,
        confirmations,
        apply,
        wallet,
        seed,
        replications=replications,
        max_tokens=max_tokens,
    )
    stopped = improve_improver(app.home, profile, request, say, progress=progress if sys.stderr.isatty() else None)
    if stopped is not None:
        raise click.exceptions.Exit(EXIT_INTERRUPTED if isinstance(stopped, Interrupted) else EXIT_ERROR)


def _show(app: App, profile: str, as_json: bool) -> None:
    settings, path = improver_of(app.home, profile)
    if as_json:
        emit_json(
            {
                "profile": profile,
                "improver": settings.id,
                "file": str(path),
                "exists": path.exists(),
                **settings.to_json(),
            }
        )
        return
    click.echo(
        f"profile {profile}'s improver {settings.id} ({path if path.exists() else 'the default: no ' + path.name + ' yet'})"
    )
    click.echo(f"settings: {settings.describe()}; at most {settings.max_lessons} characters of lessons a change")
    click.echo("instructions:")
    for line in settings.instructions.splitlines():
        click.echo(f"    {line}" if line else "")
