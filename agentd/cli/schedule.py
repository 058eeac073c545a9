"""`agentd schedule`: each profile's scheduled jobs, as the daemon runs them."""

from __future__ import annotations

from datetime import UTC, datetime

import click

from agentd.app.nightly import scheduled_run
from agentd.app.schedules import JOBS, JobSpec, add_job, offline, require_code, schedule_section, trigger
from agentd.app.status import status
from agentd.cli.completers import profiles
from agentd.cli.options import App, emit_json, emit_table, json_option, pass_app, progress
from agentd.errors import AgentdError
from agentd.profiles import load_profile, require_profile
from agentd.server.daemon import running_pid


@click.group("schedule", short_help="Scheduled jobs: list, add, remove, run now.")
def command() -> None:
    """Each profile's scheduled jobs (`improve`, `harvest`, `code`), kept in the home's job store:
    from `[schedule]` in profile.toml, or added here. `agentd serve` runs them."""


@command.command("list", short_help="List the jobs with their next and last runs.")
@click.argument("profile", required=False, shell_complete=profiles)
@json_option
@pass_app
def list_(app: App, profile: str | None, as_json: bool) -> None:
    """List the scheduled jobs (of PROFILE, or all), with their next run, their last run
    and how it ended. Jobs profile.toml asks for show once `agentd serve` has started."""
    found = [p for p in status(app.home)["profiles"] if profile in (None, p["name"])]
    if profile is not None and not found:
        load_profile(app.home, profile)
    jobs = [{"profile": p["name"], **s} for p in found for s in p["schedules"]]
    if as_json:
        emit_json(jobs)
        return
    rows = [("PROFILE", "JOB", "CRON", "NEXT RUN", "LAST RUN", "LAST RESULT")]
    rows += [
        (j["profile"], j["job"], j["cron"], j["next_run"] or "-", j["last_run"] or "-", j["last_result"] or "-")
        for j in jobs
    ]
    if jobs:
        emit_table(rows)
    else:
        progress("no scheduled jobs")
    for p in found:
        for warning in p["warnings"]:
            progress(f"agentd: warning: profile {p['name']}: {warning}")


@command.command("add", short_help="Schedule a job of PROFILE.")
@click.argument("profile", shell_complete=profiles)
@click.argument("job", type=click.Choice(JOBS))
@click.argument("cron")
@json_option
@pass_app
def add(app: App, profile: str, job: str, cron: str, as_json: bool) -> None:
    """Run JOB of PROFILE at CRON (five fields, UTC, quoted: "0 3 * * *"). Its options
    come from [schedule] in profile.toml when it runs (the code job needs coder and
    source there)."""
    load_profile(app.home, profile)
    section = schedule_section(app.home, profile)
    trigger(cron)
    if job == "code":
        require_code(profile, section)
    spec = JobSpec(profile, job, cron, "cli")
    with offline(app.home, write=True) as scheduler:
        add_job(scheduler, app.home, spec)
        found = scheduler.get_job(spec.id, jobstore="home").next_run_time
    next_run = found.isoformat() if found else None
    if as_json:
        emit_json({"profile": profile, "job": job, "cron": cron, "next_run": next_run})
    else:
        click.echo(f"scheduled {spec.id} at {cron!r} (UTC); next run {next_run or '-'}")


@command.command("remove", short_help="Unschedule a job of PROFILE.")
@click.argument("profile", shell_complete=profiles)
@click.argument("job", type=click.Choice(JOBS))
@json_option
@pass_app
def remove(app: App, profile: str, job: str, as_json: bool) -> None:
    """Take JOB of PROFILE off the schedule. A job profile.toml's [schedule] asks for is
    removed there (the daemon schedules it again at its next start otherwise)."""
    if job in schedule_section(app.home, profile):
        raise AgentdError(f"{profile}.{job} comes from [schedule] in {profile}'s profile.toml: remove the line there")
    with offline(app.home, write=True) as scheduler:
        if scheduler.get_job(f"{profile}.{job}", jobstore="home") is None:
            # Only here: a job of a profile removed since is still taken off.
            require_profile(app.home, profile)
            raise AgentdError(f"no job {profile}.{job} is scheduled (see: agentd schedule list)")
        scheduler.remove_job(f"{profile}.{job}", jobstore="home")
    if as_json:
        emit_json({"profile": profile, "job": job, "removed": True})
    else:
        click.echo(f"removed {profile}.{job}")


@command.command("run-now", short_help="Run a job of PROFILE now.")
@click.argument("profile", shell_complete=profiles)
@click.argument("job", type=click.Choice(JOBS), default="improve")
@json_option
@pass_app
def run_now(app: App, profile: str, job: str, as_json: bool) -> None:
    """Run JOB of PROFILE now: the running daemon runs it within a few seconds when it
    schedules it; otherwise it runs here, in the foreground."""
    load_profile(app.home, profile)
    pid = running_pid(app.home)
    if pid is not None:
        with offline(app.home, write=True) as scheduler:
            found = scheduler.get_job(f"{profile}.{job}", jobstore="home")
            if found is not None:
                found.modify(next_run_time=datetime.now(UTC))
                if as_json:
                    emit_json({"profile": profile, "job": job, "daemon": pid, "outcome": None})
                else:
                    click.echo(f"{profile}.{job} is due now: the daemon (pid {pid}) runs it within a few seconds")
                return
    outcome = scheduled_run(str(app.home.root), profile, job)
    if as_json:
        emit_json({"profile": profile, "job": job, "daemon": None, "outcome": outcome})
    else:
        click.echo(f"{profile}.{job}: {outcome}")
    if outcome.startswith(("failed", "crashed")):
        raise AgentdError(f"the {job} job of {profile} did not succeed")
