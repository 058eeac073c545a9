"""Each profile's schedule: which jobs run when, kept in a job store in the home.

A profile's `profile.toml` may say, under `[schedule]`, a cron expression (five fields,
UTC) for each job (`improve`, `harvest`, `code`) and the runs' options: `rounds`, `runs`,
`apply`, `wallet`, `max_tokens` for both the improve and the code job, `grace` seconds
for every job; the improve job's `proposer`, `auto_seal`, `auto_seal_min`, and
`challenger`, `challenger_tasks`, `challenger_variants`, `challenger_turns` as `improve
run` takes them; the code job's `coder`, `source` (a git checkout: relative to the
profile's folder, or absolute), `build`, `test`, `candidate`, `allow`, `readable` (paths
as `source`), `env` (VAR=VALUE), `max_files`, `max_lines` as `improve code` takes them; `queue`, the trial
queue both jobs' runs go to (as `--queue`; default the home's `[trials] queue`).
A code job without `coder` and `source` is not scheduled. `agentd schedule add` adds jobs of its own. Both
live in APScheduler's SQLAlchemy job store in the home's database (`agentd.db`), so the
daemon finds its jobs, their next runs and their missed runs after a restart. Each
run's outcome is kept beside it (see `last_runs`).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock
from sqlalchemy import create_engine, inspect
from sqlalchemy.pool import NullPool

from agentd.app.runners import sandbox_extras
from agentd.errors import AgentdError, WrongValue
from agentd.home import PRIVATE_FILE, Home, load_toml
from agentd.profiles import list_profiles, profile_dir
from agentd.sessions import read_only_url
from improver import write_atomic

JOBS = ("improve", "harvest", "code")
OPTIONS = {
    "proposer": str,
    "rounds": int,
    "runs": int,
    "apply": bool,
    "wallet": str,
    "max_tokens": int,
    "grace": int,
    "auto_seal": bool,
    "auto_seal_min": int,
    "challenger": str,
    "challenger_tasks": int,
    "challenger_variants": int,
    "challenger_turns": int,
    "coder": str,
    "source": str,
    "build": str,
    "test": str,
    "candidate": str,
    "allow": list,
    "readable": list,
    "env": list,
    "max_files": int,
    "max_lines": int,
    "queue": str,
}
# How the challenger works: nothing without one.
CHALLENGER_COUNTS = ("challenger_tasks", "challenger_variants", "challenger_turns")
AT_LEAST_ONE = (*CHALLENGER_COUNTS, "max_files", "max_lines")
CODE_NEEDS = {"coder": "MODEL", "source": "DIR"}  # what the code job cannot run without, as the line shows it
TABLE = "agentd_schedule"
RUN = "agentd.app.nightly:scheduled_run"
DEFAULT_GRACE = 3600  # a run missed by less than an hour (a restart, a busy night) still runs once


@dataclass(frozen=True)
class JobSpec:
    profile: str
    job: str
    cron: str
    source: str  # "profile" (profile.toml) or "cli" (`agentd schedule add`)

    @property
    def id(self) -> str:
        return f"{self.profile}.{self.job}"


@dataclass
class Plan:
    """What the home's profiles ask to be scheduled, and what is wrong with the rest."""

    jobs: list[JobSpec] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def trigger(cron: str) -> Any:
    """The cron expression as APScheduler's trigger (UTC); WrongValue naming what is wrong."""
    from apscheduler.triggers.cron import CronTrigger

    try:
        return CronTrigger.from_crontab(cron, timezone=UTC)
    except ValueError as exc:
        raise WrongValue(f"{cron!r} is not a cron expression (minute hour day month weekday): {exc}") from None


def schedule_section(home: Home, profile: str) -> dict[str, Any]:
    """The profile's [schedule] table, its options checked; {} when it has none."""
    path = profile_dir(home, profile) / "profile.toml"
    section = load_toml(path).get("schedule", {}) if path.exists() else {}
    if not isinstance(section, dict):
        raise AgentdError(f"{path}: [schedule] must be a table")
    for key, value in section.items():
        kind = str if key in JOBS else OPTIONS.get(key)
        if kind is None:
            raise AgentdError(f"{path}: [schedule] has no option {key!r}; it takes {', '.join([*JOBS, *OPTIONS])}")
        if not _is_a(value, kind):
            raise AgentdError(
                f"{path}: [schedule] {key} must be a {'list of strings' if kind is list else kind.__name__}"
            )
        if key in AT_LEAST_ONE and value < 1:
            raise AgentdError(f"{path}: [schedule] {key} must be at least 1")
    for pair in section.get("env", ()):
        try:
            sandbox_extras((), (pair,))
        except WrongValue:
            raise AgentdError(f"{path}: [schedule] env {pair!r}: give VAR=VALUE") from None
    given = [key for key in CHALLENGER_COUNTS if key in section]
    if given and "challenger" not in section:
        raise AgentdError(
            f'{path}: [schedule] {" and ".join(given)} say how the challenger works: give challenger = "MODEL" too'
        )
    return section


def _is_a(value: object, kind: type) -> bool:
    """Whether an option's value is exactly of `kind` (a boolean is no int) and, as a list, holds only strings."""
    if type(value) is not kind:
        return False
    return not isinstance(value, list) or all(type(each) is str for each in value)


def code_lacks(section: dict[str, Any]) -> str | None:
    """What the code job lacks in a [schedule] table, as the lines to add; None when it
    has what it needs."""
    missing = [f'{key} = "{shown}"' for key, shown in CODE_NEEDS.items() if key not in section]
    return " and ".join(missing) or None


def require_code(profile: str, section: dict[str, Any]) -> None:
    """AgentdError naming what the code job lacks in the profile's [schedule], if anything."""
    lacks = code_lacks(section)
    if lacks:
        raise AgentdError(f"profile {profile}: [schedule] needs {lacks} to run the code job")


def planned(home: Home) -> Plan:
    """The jobs every profile's profile.toml asks for; a profile whose schedule is wrong
    is named in the warnings and the others go on."""
    plan = Plan()
    for profile in list_profiles(home):
        try:
            section = schedule_section(home, profile)
        except AgentdError as exc:
            plan.warnings.append(f"profile {profile}: {exc}")
            continue
        for job in JOBS:
            if job not in section:
                continue
            try:
                trigger(section[job])
            except WrongValue as exc:
                plan.warnings.append(f"profile {profile}: [schedule] {job}: {exc}; not scheduled")
                continue
            lacks = code_lacks(section) if job == "code" else None
            if lacks:
                plan.warnings.append(f"profile {profile}: [schedule] code needs {lacks}; not scheduled")
                continue
            plan.jobs.append(JobSpec(profile, job, section[job], "profile"))
    return plan


def job_store(home: Home) -> Any:
    from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore

    if not home.writable:  # a read-only copy or mount: read the jobs, never create or change one
        return SQLAlchemyJobStore(url=read_only_url(home.agentd_db), tablename=TABLE)
    home.ensure()
    return SQLAlchemyJobStore(url=f"sqlite:///{home.agentd_db}", tablename=TABLE)


def add_job(target: Any, home: Home, spec: JobSpec) -> None:
    """Adds `spec` to a scheduler (or replaces it there), with one run at a time, missed
    runs within the grace time run once on start."""
    grace = schedule_section(home, spec.profile).get("grace", DEFAULT_GRACE)
    target.add_job(
        RUN,
        trigger(spec.cron),
        args=[str(home.root), spec.profile, spec.job],
        kwargs={"source": spec.source, "cron": spec.cron},
        id=spec.id,
        name=spec.id,
        jobstore="home",
        replace_existing=True,
        coalesce=True,
        max_instances=1,
        misfire_grace_time=grace,
    )


def sync(scheduler: Any, home: Home) -> Plan:
    """Makes the scheduler hold what profile.toml asks for: its jobs added or updated,
    the ones a profile.toml no longer asks for removed; jobs `schedule add` made stay."""
    plan = planned(home)
    wanted = {spec.id for spec in plan.jobs}
    for job in scheduler.get_jobs(jobstore="home"):
        if job.kwargs.get("source") == "profile" and job.id not in wanted:
            scheduler.remove_job(job.id, jobstore="home")
    for spec in plan.jobs:
        existing = scheduler.get_job(spec.id, jobstore="home")
        if existing is None or existing.kwargs.get("cron") != spec.cron:
            add_job(scheduler, home, spec)
    return plan


@contextmanager
def offline(home: Home, *, write: bool = False) -> Iterator[Any]:
    """A scheduler over the home's job store that has no thread and so never runs or
    moves a job: for the CLI and the status to read and change the jobs whether the
    daemon runs or not (both use the same store; the daemon reads it again every tick).
    A read-only home (a copy or a mount an auditor was given) is read as it is, and
    refused to a command that would change its jobs (`write`)."""
    if write and not home.writable:
        raise AgentdError(f"the home {home.root} is read-only here: its scheduled jobs cannot be changed")
    from apscheduler.jobstores.memory import MemoryJobStore
    from apscheduler.schedulers.base import BaseScheduler

    class Offline(BaseScheduler):  # type: ignore[misc]  # apscheduler ships no types: BaseScheduler is Any
        def wakeup(self) -> None:
            """Nothing to wake: this scheduler never processes jobs."""

        def shutdown(self, wait: bool = True) -> None:
            super().shutdown(wait)

    scheduler = Offline(timezone=UTC)
    scheduler.add_jobstore(job_store(home) if _has_jobs_table(home) else MemoryJobStore(), "home")
    scheduler.start(paused=True)
    try:
        yield scheduler
    finally:
        scheduler.shutdown(wait=False)


def _has_jobs_table(home: Home) -> bool:
    """Whether the job store can be opened: always in a home this process may change (it
    makes the table), and in a read-only one only when a daemon made it there before."""
    if home.writable:
        return True
    if not home.agentd_db.exists():
        return False
    engine = create_engine(read_only_url(home.agentd_db), poolclass=NullPool)
    try:
        return inspect(engine).has_table(TABLE)
    finally:
        engine.dispose()


# The outcome of each job's last run, kept in the home beside the job store.


def runs_path(home: Home) -> Path:
    return home.root / "schedule-runs.json"


def last_runs(home: Home) -> dict[str, dict[str, str]]:
    """{job id: {"at", "result"}} for every job that has run."""
    path = runs_path(home)
    if not path.exists():
        return {}
    try:
        found = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def record_run(home: Home, job_id: str, result: str) -> None:
    with FileLock(f"{runs_path(home)}.lock", mode=PRIVATE_FILE):
        runs = last_runs(home)
        runs[job_id] = {"at": datetime.now(UTC).isoformat(timespec="seconds"), "result": result}
        write_atomic(runs_path(home), json.dumps(runs, indent=2, sort_keys=True) + "\n")
