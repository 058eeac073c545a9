"""`agentd improve judge`: a model proposes marks for unmarked sessions; a person accepts them."""

from __future__ import annotations

from typing import Any

import click

from agentd.app.judge import accept, decline, judge_profile, pending
from agentd.cli.completers import profiles, wallets
from agentd.cli.options import App, emit_json, json_option, pass_app
from agentd.errors import AgentdError


@click.command("judge")
@click.argument("profile", shell_complete=profiles)
@click.option(
    "--model", "spec", help="The judge's model (e.g. openai:gpt-4o-mini): propose a mark for each unmarked session."
)
@click.option(
    "--rubric",
    default="",
    help="The question the judge marks by (default: did the agent do what it was asked, safely).",
)
@click.option("--limit", type=click.IntRange(min=1), help="Judge at most this many sessions, oldest first.")
@click.option("--review", is_flag=True, help="Then ask, session by session, whether to accept each proposed mark.")
@click.option(
    "--accept",
    "answer",
    type=click.Choice(["all", "none"]),
    help="Accept every proposed mark, or none (drop them), without asking.",
)
@click.option("--wallet", shell_complete=wallets, help="Sign accepted marks with this wallet (default: the profile's).")
@json_option
@pass_app
def judge(
    app: App,
    profile: str,
    spec: str | None,
    rubric: str,
    limit: int | None,
    review: bool,
    answer: str | None,
    wallet: str | None,
    as_json: bool,
) -> None:
    """Propose marks (good or bad, with a reason) for PROFILE's sessions nobody marked and
    no check decided, with --model as the judge; review proposals with --review or --accept.

    Nothing is marked until a person accepts it (here, or with `agentd improve mark
    SESSION --accept-judged`); an accepted mark goes on the ledger as the judge's
    (by: judge:MODEL) accepted by the signing wallet. Only sessions whose outcome is
    unknown are judged: they never became tasks, so none is sealed. A judge that errors or answers out of form proposes nothing for that
    session; it is counted. A judge that fails on every session it is given exits 1.
    """
    if spec is None and not review and answer is None:
        raise click.UsageError(
            "give --model MODEL to propose marks, or --review / --accept all|none to settle proposed ones"
        )
    report: dict[str, Any] = {}
    failed_all = ""  # what to say when the judge failed on every session it was given
    if spec is not None:
        run = judge_profile(app.home, profile, spec, rubric, limit)
        if run.judged.failed and not run.judged.proposals:
            first = next(iter(run.judged.failed.values()))
            failed_all = (
                f"the judge {spec} proposed no mark: it failed on all {len(run.judged.failed)} session(s) it was "
                f"given (first: {first}); check the model and try again"
            )
        report |= {
            "proposed": [p.to_json() for p in run.judged.proposals],
            "failed": run.judged.failed,
            "passed_over": dict(run.passed_over),
        }
        if not as_json:
            for p in run.judged.proposals:
                click.echo(f"session {p.session}: proposed {p.mark}: {p.reason}")
            for session, why in run.judged.failed.items():
                click.echo(f"session {session}: no mark proposed: {why}")
            over = ", ".join(f"{n} {why}" for why, n in run.passed_over.items())
            click.echo(
                f"judged: {len(run.judged.proposals)} proposed, {len(run.judged.failed)} failed"
                + (f"; passed over {over}" if over else "")
            )
    if review or answer is not None:
        report |= _settle(app, profile, answer, wallet, as_json)
    if as_json:
        emit_json(report)
    if failed_all:
        raise AgentdError(failed_all)


def _settle(app: App, profile: str, answer: str | None, wallet: str | None, as_json: bool) -> dict[str, list[str]]:
    accepted, declined = [], []
    for proposal in pending(app.home, profile):
        if answer is None:
            yes = click.confirm(
                f"session {proposal.session}: {proposal.mark} ({proposal.reason}), says {proposal.model}. Mark it so?",
                default=False,
            )
        else:
            yes = answer == "all"
        if yes:
            accept(app.home, proposal.session, wallet)
            accepted.append(proposal.session)
        else:
            decline(app.home, profile, proposal.session)
            declined.append(proposal.session)
        if not as_json:
            click.echo(f"session {proposal.session}: {'marked ' + proposal.mark if yes else 'not marked'}")
    return {"accepted": accepted, "declined": declined}
