"""`agentd improve eval`: pass@k, mean reward and best-of-n of the agent on a task set."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from agentd.app.evaluate import evaluate_profile
from agentd.cli.completers import profiles, steps
from agentd.cli.options import (
    App,
    concurrency_option,
    emit_json,
    emit_table,
    json_option,
    pass_app,
    progress,
    queue_option,
)
from improver import Evaluation, ImproverError, RunResult, parse_ks


@click.command("eval")
@click.argument("profile", shell_complete=profiles)
@click.option(
    "--tasks",
    "tasks_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The task set file.",
)
@click.option("--runs", required=True, type=click.IntRange(min=1), help="Runs of each task (the n of pass@k).")
@click.option(
    "--k",
    "k_text",
    default="1",
    show_default=True,
    help="The ks to report pass@k for, e.g. 1,5,10 (each at most --runs).",
)
@click.option(
    "--variant",
    "step",
    shell_complete=steps,
    help="Evaluate the agent as this kept step (or a unique prefix) made it, not as it is now.",
)
@concurrency_option
@click.option(
    "--runs-out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write every run's JSON to this file, one line a run (its calls, answer, tokens, and a "
    "conversation's simulated replies), once all have finished.",
)
@queue_option
@json_option
@pass_app
def eval_command(
    app: App,
    profile: str,
    tasks_file: Path,
    runs: int,
    k_text: str,
    step: str | None,
    concurrency: int,
    runs_out: Path | None,
    queue: str | None,
    as_json: bool,
) -> None:
    """Run PROFILE's agent --runs times on each task of --tasks and report pass@k (the
    unbiased estimator of Chen et al., 2021, averaged over the tasks), the mean reward
    and best-of-n (each task's best reward, averaged), with per-task pass counts.

    Runs are scored as the loop scores them, through the same trials and per-task
    tallies. Errored runs (a provider's or the harness's fault) are left out and
    counted; a task left with fewer judged runs than k is left out of pass@k for that k
    and counted.
    """
    try:
        ks = parse_ks(k_text, runs)
    except ImproverError as exc:
        raise click.BadParameter(str(exc), param_hint="--k") from None
    total = 0

    def ran(result: RunResult) -> None:
        nonlocal total
        total += 1
        progress(f"run {total}: {result.task} {result.outcome}")

    evaluation, what = evaluate_profile(
        app.home,
        profile,
        tasks_file,
        runs,
        ks,
        step,
        concurrency,
        ran if sys.stderr.isatty() else None,
        runs_out,
        queue,
        progress,
    )
    if runs_out is not None:
        progress(f"each run's JSON is in {runs_out}, one line a run")
    if as_json:
        emit_json({"profile": profile, "evaluated": what, **evaluation.to_json()})
        return
    _report(evaluation, profile, what)


def _report(evaluation: Evaluation, profile: str, what: str) -> None:
    click.echo(
        f"evaluated {what} (variant {evaluation.variant.id}) of profile {profile}: {len(evaluation.tasks)} tasks x {evaluation.runs} runs"
    )
    for k in evaluation.ks:
        left_out = evaluation.left_out[k]
        note = (
            f" ({left_out} task{'s' if left_out != 1 else ''} with fewer than {k} judged runs left out)"
            if left_out
            else ""
        )
        click.echo(f"pass@{k}: {_figure(evaluation.pass_at[k])}{note}")
    click.echo(
        f"mean reward: {_figure(evaluation.mean_reward)} over {evaluation.judged} judged runs; best-of-{evaluation.runs}: {_figure(evaluation.best_of_n)}"
    )
    if evaluation.errored:
        click.echo(f"errored: {evaluation.errored} runs, left out ({'; '.join(evaluation.errors[:3])})")
    rows = [["task", "passed", *(f"pass@{k}" for k in evaluation.ks), "best reward"]]
    for t in evaluation.tasks:
        counts = f"{t.passed}/{t.judged}" + (f" ({t.errored} errored)" if t.errored else "")
        rows.append([t.task, counts, *(_figure(t.pass_at[k]) for k in evaluation.ks), _figure(t.best_reward)])
    emit_table(rows)


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
