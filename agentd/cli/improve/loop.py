"""`agentd improve seal|run|adopt|undo|lineage` (and `agentd lineage`): the seal and the loop."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from agentd.app.adopt import adopt as adopt_step, undo as undo_step
from agentd.app.lineage import check_lineage, improvers_kept, lineage_here
from agentd.app.loop import RunRequest, run_improvement
from agentd.app.seals import Examiner, Sealed, seal_tasks
from agentd.cli.completers import profiles, steps, wallets
from agentd.cli.options import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    App,
    CheckFailed,
    baseline_runs_option,
    concurrency_option,
    emit_json,
    emit_json_line,
    json_option,
    pass_app,
    progress,
    queue_option,
)
from agentd.errors import WrongValue
from improver import (
    DEFAULT_TEST,
    TESTS,
    Event,
    ImproverError,
    Interrupted,
    SealRequest,
    Settings,
    improver_summary,
    summary,
)


@click.command("seal")
@click.argument("profile", shell_complete=profiles)
@click.option(
    "--tasks",
    "tasks_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A validated task set (agentd improve harvest / validate).",
)
@click.option(
    "--share", type=click.IntRange(1, 99), default=50, show_default=True, help="The percentage of tasks sealed (1-99)."
)
@click.option(
    "--sealed",
    "sealed_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Seal this validated set as it is (a benchmark's test split), and keep --tasks to choose on.",
)
@click.option(
    "--confirmations",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="Changes the seal may confirm; each at one-sided level 0.05/k.",
)
@click.option(
    "--canaries",
    type=click.IntRange(0, 100),
    default=2,
    show_default=True,
    help="Canary tasks added to the sealed part.",
)
@click.option(
    "--seed", help="The seed of the split (default: a random one, printed); the same set and seed give the same split."
)
@click.option("--reusable", is_flag=True, help="Make the sealed tasks a reusable holdout (Thresholdout) as well.")
@click.option(
    "--test",
    type=click.Choice(TESTS),
    default=DEFAULT_TEST,
    show_default=True,
    help="The test changes are held to: exact within each task (stratified), pooled Newcombe, or the task-paired "
    "sign-flip test.",
)
@click.option(
    "--wallet",
    shell_complete=wallets,
    help="Publish the seal's digests on the ledger (agent.seal/v1) with this wallet.",
)
@click.option(
    "--examiner",
    metavar="URL",
    help="Hand the sealed tasks, encrypted, to the examiner at URL (agentd examiner serve): only their digests "
    "stay here, and it confirms changes on them. Needs --wallet.",
)
@click.option("--examiner-wallet", metavar="ID", help="The wallet id the examiner's key must be signed by.")
@json_option
@pass_app
def seal(
    app: App,
    profile: str,
    tasks_file: Path,
    share: int,
    sealed_file: Path | None,
    confirmations: int,
    canaries: int,
    seed: str | None,
    reusable: bool,
    test: str,
    wallet: str | None,
    examiner: str | None,
    examiner_wallet: str | None,
    as_json: bool,
) -> None:
    """Split a validated task set into tasks to choose changes on and sealed tasks, which
    no proposer is ever shown, before anything is tried on them.

    A task an earlier seal had to choose on (here, or in any home sharing the ledger) was
    shown to a proposer: it stays to choose on and is never sealed, and the share is
    sealed from the other tasks; too few of those for --share is refused. With --sealed,
    the split is given (a benchmark's own test split): that set is sealed whole, --tasks
    is kept to choose on, and a task on both sides or shown to a proposer before is refused."""
    request = SealRequest(share, confirmations, canaries, seed, reusable, test)
    if sealed_file is not None and seed is not None:
        raise click.UsageError("--seed draws a split; --sealed gives one: give either")
    held_by = Examiner(examiner, examiner_wallet) if examiner else None
    if examiner_wallet and not examiner:
        raise click.UsageError("--examiner-wallet names the wallet of the examiner --examiner gives")
    sealed = seal_tasks(app.home, profile, tasks_file, request, wallet, sealed_file, held_by)
    if as_json:
        emit_json(_seal_json(sealed))
        return
    for line in _seal_lines(sealed):
        click.echo(line)


def _seal_lines(sealed: Sealed) -> list[str]:
    t = sealed.seal.terms
    first = (
        f"sealed {t.sealed_tasks} of {t.sealed_tasks + t.train_tasks} tasks for profile {t.profile} "
        f"(with {t.canaries} canaries), {t.train_tasks} left to choose changes on"
        + (f" ({sealed.shown} of them kept there for having been shown to a proposer before)" if sealed.shown else "")
        + f"; {t.confirmations} confirmations allowed ({t.test} test, each at one-sided level {t.level:.4g})"
    )
    if t.holdout:
        first += (
            f". As a reusable holdout, the sealed tasks turn down a change whose gain they answer at "
            f"{t.holdout['threshold']:.1%} or less (their noise {t.holdout['noise']:.1%}) without spending a confirmation, "
            f"and may disagree with the tasks to choose on {t.holdout['budget']} times"
        )
    lines = [
        first,
        f"seed: {t.seed}",
        f"tasks to choose on: {sealed.seal.train_path}",
        f"sealed tasks: {sealed.seal.path} (no proposer is shown them)",
    ]
    if sealed.claim:
        lines.append(f"published as claim {sealed.claim}, before anything was tried on it")
    return lines


def _seal_json(sealed: Sealed) -> dict[str, Any]:
    return {
        "seal": sealed.seal.id,
        **sealed.seal.terms.to_json(),
        "train_file": str(sealed.seal.train_path),
        "sealed_file": str(sealed.seal.path),
        "claim": sealed.claim,
        "pulse": sealed.pulse,
        "kept_shown": sealed.shown,
    }


@click.command("run")
@click.argument("profile", shell_complete=profiles)
@click.option("--proposer", required=True, help="The model that proposes changes, provider:model.")
@click.option("--rounds", type=click.IntRange(min=1), default=1, show_default=True, help="Rounds to run.")
@click.option("--runs", type=click.IntRange(min=1), default=4, show_default=True, help="Runs of each task per trial.")
@baseline_runs_option
@click.option("--apply", is_flag=True, help="Make each kept change the profile's (learned.json) at once.")
@click.option(
    "--wallet",
    shell_complete=wallets,
    help="Publish each kept change as an agent.improvement/v1 claim with this wallet.",
)
@click.option("--model", "models", multiple=True, help="A further model changes may run on (repeat).")
@click.option(
    "--max-tokens",
    type=click.IntRange(min=0),
    help="Stop before this many tokens (proposer and trials) would be passed.",
)
@concurrency_option
@click.option("--seed", type=int, help="Seed the draw of variants to build on (default: random).")
@click.option(
    "--practice",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Practice tasks (agentd improve practice) to choose on too; never sealed.",
)
@click.option(
    "--challenger",
    help="A model that writes variants of the tasks a change newly passes; a change not "
    "better on them too is turned down as a shortcut, before any confirmation is spent.",
)
@click.option(
    "--challenger-tasks",
    type=click.IntRange(min=1),
    default=4,
    show_default=True,
    help="With --challenger: the most tasks a change newly passes that get variants.",
)
@click.option(
    "--challenger-variants",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="With --challenger: the variants written of each.",
)
@click.option(
    "--challenger-turns",
    type=click.IntRange(min=1),
    default=RunRequest.challenger_turns,
    show_default=True,
    help="With --challenger: its answers, the first and those mending what was refused.",
)
@queue_option
@json_option
@pass_app
def run(
    app: App,
    profile: str,
    proposer: str,
    rounds: int,
    runs: int,
    baseline_runs: int | None,
    apply: bool,
    wallet: str | None,
    models: tuple[str, ...],
    max_tokens: int | None,
    concurrency: int,
    seed: int | None,
    practice: Path | None,
    challenger: str | None,
    challenger_tasks: int,
    challenger_variants: int,
    challenger_turns: int,
    queue: str | None,
    as_json: bool,
) -> None:
    """Let PROFILE's agent improve itself on its current seal: each round a proposer
    writes changes, which are tried on the tasks to choose on and kept only when better
    beyond chance there and then on the sealed tasks, losing no task the agent passes
    (with --challenger, on variants of the tasks it newly passes too, before the sealed tasks).
    Ctrl-C or SIGTERM stops cleanly; the next run goes on from the archive. Exit 0 when
    every round ran, 1 when it stopped early (a canary, a spent seal, the kill switch, the
    token budget), 130 when interrupted."""

    def show(event: Event) -> None:
        if as_json:
            emit_json_line({"event": event.kind, "text": event.text, **event.data})
        else:
            click.echo(event.text)

    ctx = click.get_current_context()
    given = [
        f"--{n.replace('_', '-')}"
        for n in ("challenger_tasks", "challenger_variants", "challenger_turns")
        if ctx.get_parameter_source(n) is not click.core.ParameterSource.DEFAULT
    ]
    if given and challenger is None:
        raise WrongValue(f"{' and '.join(given)} say how the challenger works: give --challenger MODEL too")
    request = RunRequest(
        proposer,
        rounds,
        runs,
        baseline_runs,
        apply,
        wallet,
        models,
        max_tokens,
        concurrency,
        seed,
        practice,
        challenger,
        challenger_tasks,
        challenger_variants,
        challenger_turns,
        queue,
    )
    stopped = run_improvement(app.home, profile, request, show, progress=progress if sys.stderr.isatty() else None)
    if stopped is not None:
        raise click.exceptions.Exit(EXIT_INTERRUPTED if isinstance(stopped, Interrupted) else EXIT_ERROR)


@click.command("adopt")
@click.argument("profile", shell_complete=profiles)
@click.argument("step", shell_complete=steps)
@json_option
@pass_app
def adopt(app: App, profile: str, step: str, as_json: bool) -> None:
    """Make kept step STEP (any unique prefix) what PROFILE has learned."""
    full, learned = adopt_step(app.home, profile, step)
    if as_json:
        emit_json({"profile": profile, "step": full, "learned": learned.to_json()})
    else:
        click.echo(f"profile {profile} now has learned what step {full} kept")


@click.command("undo")
@click.argument("profile", shell_complete=profiles)
@json_option
@pass_app
def undo(app: App, profile: str, as_json: bool) -> None:
    """Take back the last change made PROFILE's, restoring exactly what it replaced."""
    step, again = undo_step(app.home, profile)
    if isinstance(again, Settings):
        if as_json:
            emit_json({"profile": profile, "took_back": step, "improver": {"id": again.id, **again.to_json()}})
        else:
            click.echo(f"took back step {step}: profile {profile}'s improver is {again.id} again, the one it replaced")
        return
    if as_json:
        emit_json({"profile": profile, "took_back": step, "learned": again.to_json()})
        return
    now = f"step {again.step}" if again.step else "what it had learned before any step"
    click.echo(f"took back step {step}: profile {profile} has {now} again")


@click.command("lineage", short_help="A profile's kept changes with their evidence; --check proves them.")
@click.argument("profile", shell_complete=profiles)
@click.option("--check", "check_", is_flag=True, help="Hold each kept change to its claim and its seal on the ledger.")
@click.option(
    "--remote", metavar="URL", help="With --check: hold them to a daemon's ledger (http://HOST:PORT), read over HTTP."
)
@json_option
@pass_app
def lineage(app: App, profile: str, check_: bool, remote: str | None, as_json: bool) -> None:
    """List PROFILE's kept changes with their evidence; with --check, prove them against
    the ledger: each claim matches its line, names a seal published before it whose
    tasks here hash to what it published, and no seal spent more than it allowed."""
    if remote and not check_:
        raise click.UsageError("--remote goes with --check")
    lineage_found = lineage_here(app.home, profile)
    report = check_lineage(app.home, profile, remote) if check_ else None
    try:
        kept = [line for _, line in lineage_found.kept()]
    except ImproverError:
        if report is None:
            raise
        kept = []  # the check's report names the damaged line
    improvers = improvers_kept(app.home, profile)
    if as_json:
        emit_json(
            {
                "kept": kept,
                "improvers": improvers,
                **({"check": report.lines, "problems": report.problems} if report else {}),
            }
        )
    else:
        for line in kept:
            click.echo(summary(line))
        if not kept:
            click.echo(f"profile {profile} has kept no change yet")
        for line in improvers:
            click.echo(improver_summary(line))
        for text in report.lines if report else []:
            click.echo(text)
    if report and report.problems:
        for problem in report.problems:
            progress(f"agentd: {problem}")
        raise CheckFailed(f"{len(report.problems)} problem(s) in the lineage of {profile}")
