"""`agentd improve mark|harvest|validate|env|export`: marks, and the agent's work as tasks."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from agentd.app.agent import run_env
from agentd.app.envserver import serve_tasks
from agentd.app.judge import accept
from agentd.app.marks import mark_line, mark_session
from agentd.app.tasks import export_profile, harvest_profile, validate_file
from agentd.cli.completers import profiles, sessions, wallets
from agentd.cli.options import App, emit_json, json_option, pass_app
from improver import (
    DEFAULT_ENV_HOST,
    DEFAULT_ENV_PORT,
    ENV_IDLE_SECONDS,
    ENVIRONMENTS,
    EXPORT_PASS_OVER,
    GROUPS,
    HARVEST_PASS_OVER,
    LEFT_OUT,
    MAX_ENV_SESSIONS,
    SFT,
    SFT_VALIDATION,
    TASKS,
    VALIDATION_SHARE,
    TaskSet,
    Validation,
)


@click.command("mark")
@click.argument("session", shell_complete=sessions)
@click.option("--good/--bad", default=None, help="How the session went.")
@click.option(
    "--accept-judged",
    is_flag=True,
    help="Mark it as the judge proposed (agentd improve judge), accepted by your wallet.",
)
@click.option("--note", default="", help="What went well or badly, for the record.")
@click.option("--wallet", shell_complete=wallets, help="Sign the mark with this wallet (default: the profile's).")
@json_option
@pass_app
def mark(
    app: App, session: str, good: bool | None, accept_judged: bool, note: str, wallet: str | None, as_json: bool
) -> None:
    """Mark SESSION (any unique prefix of its id) as having gone well or badly, or as
    its judge proposed (--accept-judged: the mark is recorded as the judge's, accepted
    by the signing wallet, the judge's reason as its note).

    A later mark supersedes an earlier one; both stay on the ledger (agent.mark/v1).
    """
    if (good is None) == (not accept_judged):
        raise click.UsageError("give --good or --bad, or --accept-judged")
    if accept_judged:
        record, proposal = accept(app.home, session, wallet)
        note = proposal.reason
    else:
        record = mark_session(app.home, session, bool(good), note, wallet)
    if as_json:
        emit_json(
            {"session": record.id, "outcome": record.mark, "note": note}
            | ({"by": f"judge:{proposal.model}"} if accept_judged else {})
        )
    else:
        click.echo(mark_line(record))


@click.command("harvest")
@click.argument("profile", shell_complete=profiles)
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The task set file to write; its name's stem names the tasks (work.json: work-1, work-2, ...).",
)
@click.option(
    "--simulate-users",
    "simulate",
    metavar="MODEL",
    help="Make conversations into tasks too: MODEL (provider:model) plays the person after their first message.",
)
@json_option
@pass_app
def harvest(app: App, profile: str, out: Path, simulate: str | None, as_json: bool) -> None:
    """Turn PROFILE's sessions with a known outcome into tasks, validate them, and write
    the set to --out.

    A session's outcome is known when a person marked it (a mark wins) or its check
    passed or failed. Conversations (more than one message from a person), compacted
    sessions, errored sessions, sessions without a known outcome and malformed ones (a
    recorded message not in the chat format: each is named on stderr) are passed over
    and counted; with --simulate-users, conversations make tasks whose first message is
    the person's first and whose later ones MODEL plays, holding what the person said. Tasks sealed before (here, or by any home sharing the ledger) or exported
    for training are left out and counted, so the set can be sealed. A task is kept only
    when its solution passes and its failures fail; the others stay in the file under
    "excluded", each with its reason.
    """
    done = harvest_profile(app.home, profile, out, simulate=simulate)
    taskset = done.validation.taskset
    over = done.harvest.passed_over
    for session, wrong in done.harvest.malformed.items():
        click.echo(f"agentd: warning: session {session}: {wrong}; passed over", err=True)
    if as_json:
        emit_json(
            {
                "file": str(out),
                "digest": taskset.digest,
                "sessions": done.harvest.sessions,
                "harvested": len(done.harvest.taskset.tasks),
                "kept": [t.name for t in taskset.tasks],
                "excluded": [{"task": e.task.name, "reason": e.reason} for e in taskset.excluded],
                "passed_over": {reason: over[reason] for reason in HARVEST_PASS_OVER},
                "left_out": {reason: done.left_out[reason] for reason in LEFT_OUT},
                "malformed": done.harvest.malformed,
            }
        )
        return
    click.echo(
        f"harvested {_n(len(done.harvest.taskset.tasks), 'task')} from {_n(done.harvest.sessions, 'session')} of profile {profile}"
    )
    counts = [
        _n(over["conversation"], "conversation"),
        f"{over['compacted']} compacted",
        f"{over['errored']} errored",
        f"{over['unknown outcome']} without a known outcome",
    ]
    click.echo("passed over: " + ", ".join(counts + ([f"{over['malformed']} malformed"] if over["malformed"] else [])))
    click.echo(
        f"left out: {done.left_out['sealed']} sealed before, {done.left_out['exported']} exported for training "
        "(a seal takes only fresh tasks)"
    )
    _validation_lines(done.validation)
    click.echo(f"wrote {out} (set digest {taskset.digest[:16]})")


@click.command("validate")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the validated set here instead of back into FILE.",
)
@json_option
@pass_app
def validate(app: App, file: Path, out: Path | None, as_json: bool) -> None:
    """Validate the tasks of FILE: keep a task only when its solution, replayed through
    the harness against its own stand-ins, passes, and every one of its failures fails.

    Tasks that do not are moved under "excluded" with the reason, so the exclusion can be
    audited. Harvest does this by itself; run it on a task set written another way.
    """
    result = validate_file(file, out)
    taskset = result.taskset
    if as_json:
        emit_json(
            {
                "file": str(out or file),
                "digest": taskset.digest,
                "kept": [t.name for t in taskset.tasks],
                "excluded": [{"task": e.task.name, "reason": e.reason} for e in taskset.excluded],
                "newly_excluded": [e.task.name for e in result.newly_excluded],
            }
        )
        return
    _validation_lines(result)
    click.echo(f"wrote {out or file} (set digest {taskset.digest[:16]})")


def _validation_lines(result: Validation) -> None:
    taskset = result.taskset
    earlier = len(taskset.excluded) - len(result.newly_excluded)
    click.echo(
        f"validated: {_n(len(taskset.tasks), 'task')} kept, {len(result.newly_excluded)} excluded"
        + (f" (and {earlier} excluded before)" if earlier else "")
    )
    for exclusion in result.newly_excluded:
        click.echo(f"excluded {exclusion.task.name}: {exclusion.reason}")


@click.command("env")
@click.option(
    "--tasks",
    "tasks_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The task set file.",
)
@click.option("--case", "case", help="The name of the task to run as one episode over stdin and stdout.")
@click.option("--serve", is_flag=True, help="Serve every task of the set as an OpenEnv environment instead.")
@click.option("--host", default=DEFAULT_ENV_HOST, show_default=True, help="With --serve: the address to listen on.")
@click.option(
    "--port",
    default=DEFAULT_ENV_PORT,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="With --serve: the port (0: any free one).",
)
@click.option(
    "--max-sessions",
    default=MAX_ENV_SESSIONS,
    show_default=True,
    type=click.IntRange(1),
    help="With --serve: WebSocket sessions at once; one more is refused with CAPACITY_REACHED.",
)
@click.option(
    "--idle-timeout",
    "idle_seconds",
    default=ENV_IDLE_SECONDS,
    show_default=True,
    type=click.FloatRange(0, min_open=True),
    help="With --serve: seconds a WebSocket connection with no episode under way may send nothing"
    " before it is closed (code 1008).",
)
@pass_app
def env(
    app: App,
    tasks_file: Path,
    case: str | None,
    serve: bool,
    host: str,
    port: int,
    max_sessions: int,
    idle_seconds: float,
) -> int:
    """Run tasks as episodes for a trainer: the policy being trained gives the model's
    turns; the reward is the share of the task's checks that held (or its rubric's
    reward, when it has one).

    With --case, one task over stdio: each turn this writes {"request": {"messages",
    "tools", "max_tokens"}} and reads back {"message": {"role": "assistant", ...}} (text,
    or tool calls the task's stand-ins answer). At the end it writes {"done": {"case",
    "reward", "passed", "failures", "calls", "ended"}}. A malformed line from the policy
    ends the episode with {"error": ...} and exit status 1.

    With --serve, every task as an OpenEnv environment on http://HOST:PORT (the address
    is printed on stderr once it listens; Ctrl-C stops it): the WebSocket session at
    /ws (reset, step, state, close), GET /health, /metadata, /schema, /state and the
    stateless POST /reset and /step. An episode that could not be run (not the
    policy's doing) ends with outcome "errored" and reward null. A connection with no
    episode under way that sends nothing for --idle-timeout seconds is closed with
    code 1008; in an episode, the turn timeout (the profile's wall_seconds) applies.
    See the README.

    The task file's operator words are used and, when there is a home holding the
    profile, its current lessons and limits; no home is needed.
    """
    if serve == (case is not None):
        raise click.UsageError("give --case NAME (one episode over stdio) or --serve (an OpenEnv server), not both")
    if case is not None:
        return run_env(app.home_if_any(), tasks_file, case, sys.stdin.buffer, sys.stdout.buffer)

    def listening(address: str, taskset: TaskSet, record: Path | None) -> None:
        click.echo(
            f"serving {_n(len(taskset.tasks), 'task')} of profile {taskset.profile} as an OpenEnv environment on {address}",
            err=True,
        )
        if record is not None:
            click.echo(f"recorded as exported for training in {record}: no later seal takes them", err=True)

    serve_tasks(app.home_if_any(), tasks_file, host, port, max_sessions, idle_seconds, listening)
    return 0


@click.command("export")
@click.argument("profile", shell_complete=profiles)
@click.option(
    "--out",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="The directory to write (new or empty).",
)
@click.option(
    "--validation",
    default=VALIDATION_SHARE,
    show_default=True,
    type=click.FloatRange(0, 1, max_open=True),
    help="The share of sessions held apart in sft-validation.jsonl, chosen by a hash of each session's id.",
)
@click.option(
    "--tasks",
    "tasks_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Export these tasks (e.g. a seal's tasks to choose on) instead of every task harvested now.",
)
@click.option("--force", is_flag=True, help="Write into --out even when it is not empty, replacing the export's files.")
@click.option(
    "--openai",
    is_flag=True,
    help="Write the SFT lines as OpenAI's fine-tuning upload takes them: messages and tools, no metadata.",
)
@json_option
@pass_app
def export(
    app: App,
    profile: str,
    out: Path,
    validation: float,
    tasks_file: Path | None,
    force: bool,
    openai: bool,
    as_json: bool,
) -> None:
    """Write PROFILE's work out for a trainer: sft.jsonl (sessions that went well, those
    that ended by asking a person among them, in OpenAI's chat fine-tuning format; with
    --openai, lines its upload takes as they are), sft-validation.jsonl (held apart), tasks.json and
    environments.jsonl (tasks to reinforce in), groups.jsonl (each task's runs in the
    loop's archive with group-relative advantages, for GRPO-style training), and a
    README.md saying what each is.

    Sessions that did not finish (neither done nor asked), were compacted, are confidential, hold a secret this
    machine keeps, whose task is sealed or whose transcript is malformed are passed over.
    What goes out is recorded in $AGENTD_HOME/routes/PROFILE-exported.json before any
    file is written (its sessions, and each task's content whatever its name), so a later
    seal never seals it.
    """
    report = export_profile(app.home, profile, out, validation, force, tasks_file, openai)
    record = app.home.routes.exported(profile)
    if as_json:
        emit_json(
            {
                "out": str(out),
                "sft": report.sft,
                "sft_validation": report.held_apart,
                "tasks": report.tasks,
                "not_good": report.not_good,
                "groups": report.groups,
                "groups_without_signal": report.flat_groups,
                "passed_over": {reason: report.passed_over[reason] for reason in EXPORT_PASS_OVER},
                "record": str(record),
            }
        )
        return
    click.echo(f"exported profile {profile} into {out}")
    click.echo(f"  {SFT}: {_n(report.sft, 'session')} that went well")
    click.echo(f"  {SFT_VALIDATION}: {_n(report.held_apart, 'session')} held apart for validation")
    click.echo(f"  {TASKS}, {ENVIRONMENTS}: {_n(report.tasks, 'task')}")
    click.echo(
        f"  {GROUPS}: {_n(report.groups, 'task')} with runs in the loop's archive ({report.flat_groups} with no signal)"
    )
    click.echo("passed over: " + ", ".join(f"{report.passed_over[r]} {r}" for r in EXPORT_PASS_OVER))
    if report.not_good:
        click.echo(f"not in {SFT}: {_n(report.not_good, 'session')} that did not go well or whose outcome is unknown")
    click.echo(f"recorded in {record}")


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"
