"""`agentd improve practice`: a model writes practice tasks like the profile's own work."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from agentd.app.practice import Practiced, practise
from agentd.cli.completers import profiles
from agentd.cli.options import EXIT_ERROR, App, emit_json, json_option, pass_app
from improver import PracticeRequest


@click.command("practice")
@click.argument("profile", shell_complete=profiles)
@click.option(
    "--count", type=click.IntRange(min=1), default=4, show_default=True, help="Practice tasks to ask the writer for."
)
@click.option(
    "--runs", type=click.IntRange(min=1), default=2, show_default=True, help="Runs of the agent on each task."
)
@click.option("--writer", help="The model that writes them, provider:model (default: the profile's first model).")
@click.option(
    "--writer-turns",
    type=click.IntRange(min=1),
    default=PracticeRequest.turns,
    show_default=True,
    help="The writer's answers: its first and those mending what was refused.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the kept tasks (default: routes/PROFILE-practice-DIGEST.json).",
)
@json_option
@pass_app
def practice(
    app: App,
    profile: str,
    count: int,
    runs: int,
    writer: str | None,
    writer_turns: int,
    out: Path | None,
    as_json: bool,
) -> None:
    """Have a model write practice tasks for PROFILE, like its tasks to choose on. The
    writer is shown the operator's words and up to a dozen tasks to choose on (those the
    agent fails first, never a sealed one). A task is kept when its own solution and
    failures bear it out, it repeats no task, and the agent as it is does not pass it in
    every run; the kept ones are ranked by learnability, 4·p·(1−p). A refused task is
    answered with why, and the writer may mend it within --writer-turns answers. Exit 0
    when one was kept, 1 when none was (nothing is written) or a canary's code word
    stopped it."""
    done = practise(app.home, profile, PracticeRequest(count=count, runs=runs, turns=writer_turns), writer, out)
    if as_json:
        emit_json(_json(done, runs))
    else:
        for line in lines(done, profile, runs):
            click.echo(line)
    if done.path is None:
        raise click.exceptions.Exit(EXIT_ERROR)


def lines(done: Practiced, profile: str, runs: int) -> list[str]:
    """The operator's lines: what was written, refused, left out and kept, and why."""
    p, w = done.practice, done.practice.writing
    written = len(w.attempts)
    if not written:
        return [f"{done.writer} wrote no task (no write_task call); nothing was kept"]
    out = [
        f"{done.writer} wrote {written} {_tasks(written)} in {w.turns} {'turn' if w.turns == 1 else 'turns'}, "
        f"{w.borne_out} borne out by their own solutions and failures"
    ]
    out += [f"refused, as it was told: {told.removeprefix('refused: ')}" for told in w.refusals]
    for reason, n in p.left_out.items():
        out.append(f"left out: {n} {_reason(reason, runs)}")
    if not p.ranked:
        return [*out, "kept no practice task; nothing was written"]
    out.append(
        f"kept {len(p.ranked)} practice {_tasks(len(p.ranked))} the agent does not pass every time, ranked by "
        "learnability 4·p·(1−p), p its pass rate (near p = 0.5 teaches most):"
    )
    for r in p.ranked:
        out.append(f"  {r.task.name}  p = {r.passed}/{r.runs}  learnability {r.learnability:.2f}  {r.task.task}")
    out.append(f"wrote {done.path}")
    out.append(
        f"choose changes on them beside the seal's: agentd improve run {profile} --proposer MODEL --practice {done.path}"
    )
    return out


def _tasks(n: int) -> str:
    return "task" if n == 1 else "tasks"


def _reason(reason: str, runs: int) -> str:
    return f"{reason} of {runs}" if reason.endswith("in every run") else reason


def _json(done: Practiced, runs: int) -> dict[str, Any]:
    p, w = done.practice, done.practice.writing
    return {
        "writer": done.writer,
        "written": len(w.attempts),
        "turns": w.turns,
        "borne_out": w.borne_out,
        "refused": w.refusals,
        "left_out": dict(p.left_out),
        "runs": runs,
        "kept": [
            {
                "task": r.task.name,
                "asks": r.task.task,
                "passed": r.passed,
                "runs": r.runs,
                "learnability": r.learnability,
            }
            for r in p.ranked
        ],
        "ranked_by": "learnability 4·p·(1−p)",
        "file": str(done.path) if done.path else None,
        "digest": p.taskset.digest if p.taskset else None,
        "tokens": {"in": p.usage.tokens_in, "out": p.usage.tokens_out},
    }
