"""What an operator looks at in the morning: each profile's jobs with their last and next
runs, its current seal with the confirmations left, the warnings worth acting on, and
the kill switch. `GET /v1/status` serves it and the dashboard shows it."""

from __future__ import annotations

from contextlib import nullcontext
from datetime import UTC, datetime
from typing import Any

from agentd.app import killswitch
from agentd.app.nightly import seal_spent
from agentd.app.schedules import last_runs, offline, planned, trigger
from agentd.app.seals import left_of, spent_of
from agentd.home import Home
from agentd.profiles import list_profiles
from improver import ImproverError, current_seal


def status(home: Home, scheduler: Any = None) -> dict[str, Any]:
    """The status as JSON-ready data; `scheduler` is the daemon's running one, else the
    home's job store is read."""
    plan = planned(home)
    runs = last_runs(home)
    with nullcontext(scheduler) if scheduler is not None else offline(home) as source:
        jobs = {job.id: (job.kwargs.get("cron", ""), job.next_run_time) for job in source.get_jobs(jobstore="home")}
    now = datetime.now(UTC)
    for spec in plan.jobs:  # asked for in profile.toml, and in the store once the daemon has started
        jobs.setdefault(spec.id, (spec.cron, trigger(spec.cron).get_next_fire_time(None, now)))
    profiles = []
    for name in list_profiles(home):
        schedules = []
        for job_id, (cron, next_run) in sorted(jobs.items()):
            if job_id.split(".", 1)[0] != name:
                continue
            last = runs.get(job_id, {})
            schedules.append(
                {
                    "job": job_id.split(".", 1)[1],
                    "cron": cron,
                    "next_run": next_run.isoformat() if next_run else None,
                    "last_run": last.get("at"),
                    "last_result": last.get("result"),
                }
            )
        warnings = [w.removeprefix(f"profile {name}: ") for w in plan.warnings if w.startswith(f"profile {name}: ")]
        spent = seal_spent(home, name) if schedules or _seal(home, name) else None
        if spent:
            warnings.append(spent)
        profiles.append({"name": name, "schedules": schedules, "seal": _seal(home, name), "warnings": warnings})
    return {"home": str(home.root), "kill_switch": killswitch.is_on(home), "profiles": profiles}


def _seal(home: Home, profile: str) -> dict[str, Any] | None:
    try:
        seal = current_seal(home.routes, profile)
    except ImproverError:
        return None
    left = left_of(home, seal)
    return {
        "id": seal.id,
        "claim": seal.state().claim,
        "confirmations_spent": spent_of(home, seal),
        "confirmations_left": left,
        "spent": not left,
    }
