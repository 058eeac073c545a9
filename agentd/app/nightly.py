"""A scheduled job's run: harvest the profile's sessions, run the loop's rounds on its
current seal, or run the code loop's rounds on it (the library call `agentd improve code`
makes, its options from [schedule]); either loop says loudly when that seal is spent
rather than doing nothing.

`scheduled_run` is what the job store names (APScheduler calls it by reference, so a
restarted daemon finds it again). Runs of one profile take turns, in this process (a
lock per profile) and against `improve run` and `improve code` from the CLI (the loop's
own lock); SIGTERM stops either loop at its next step boundary (see stop_all). Every
run's outcome is kept (see agentd.app.schedules.record_run) and logged.
"""

from __future__ import annotations

import logging
import tempfile
import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agentd.app import killswitch
from agentd.app.code import CodeRequest, run_code
from agentd.app.loop import RunRequest, Stopper, run_improvement
from agentd.app.schedules import CHALLENGER_COUNTS, record_run as keep_outcome, require_code, schedule_section
from agentd.app.seals import left_of, seal_tasks, spent_of
from agentd.app.tasks import exported, harvest_profile
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import profile_dir
from improver import DEFAULT_ALLOW, Event, ImproverError, SealRequest, Stop, TaskSet, current_seal, open_seal, seals_of

log = logging.getLogger("agentd.jobs")
SPENT = "SEAL SPENT"
AUTO_SEAL_MIN = 8  # fresh tasks auto_seal needs before it seals them: enough for both parts to mean something
# [schedule] options the code job passes on as they are, under CodeRequest's own names
CODE_OPTIONS = (
    "build",
    "test",
    "candidate",
    "max_files",
    "max_lines",
    "rounds",
    "runs",
    "apply",
    "wallet",
    "max_tokens",
    "queue",
)

_profile_locks: defaultdict[str, threading.Lock] = defaultdict(threading.Lock)
_running: set[Stopper] = set()
_running_lock = threading.Lock()
# Set by stop_all: a job that had started but not yet reached its loop stops at its first step.
_stopping = threading.Event()


def stop_all() -> None:
    """Asks every loop running here, and any about to start, to stop at its next step
    boundary (SIGTERM): the daemon is going away."""
    with _running_lock:
        _stopping.set()
        for stopper in _running:
            stopper.request()


def scheduled_run(home_root: str, profile: str, job: str, source: str = "profile", cron: str = "") -> str:
    """Runs `job` of `profile` now and returns its outcome in one line (also kept and logged)."""
    home = Home.resolve(home_root)
    job_id = f"{profile}.{job}"
    with _profile_locks[profile]:
        log.info("job %s started", job_id)
        try:
            outcome = _run(home, profile, job)
        except (AgentdError, ImproverError) as exc:
            outcome = f"failed: {exc}"
        except Exception as exc:  # a job's bug must not take the daemon down: said, kept, and the next run goes on
            log.exception("job %s crashed", job_id)
            outcome = f"crashed: {type(exc).__name__}: {exc}"
        keep_outcome(home, job_id, outcome)  # first: a logged outcome is one `schedule list` shows
        (log.error if outcome.startswith(("failed", "crashed", SPENT)) else log.info)("job %s: %s", job_id, outcome)
        return outcome


def _run(home: Home, profile: str, job: str) -> str:
    killswitch.refuse_if_on(home, f"scheduled {job} job")
    if job == "harvest":
        return _harvest(home, profile)
    if job == "code":
        return _code(home, profile)
    return _improve(home, profile)


def _harvest(home: Home, profile: str) -> str:
    found = harvest_profile(home, profile, None)
    return f"harvested {len(found.validation.taskset.tasks)} validated task(s) from the sessions of {profile}"


def seal_spent(home: Home, profile: str) -> str | None:
    """Why the profile's loop cannot confirm anything now, loud enough to be seen; None
    when its current seal has confirmations left."""
    try:
        seal = current_seal(home.routes, profile)
    except ImproverError as exc:
        return f"{SPENT}: {exc}"
    if left_of(home, seal):
        return None
    spent, allowed = spent_of(home, seal), seal.terms.confirmations
    what = f"has spent its {allowed} confirmations" if spent >= allowed else f"was retired ({spent} of {allowed} spent)"
    return (
        f"{SPENT}: seal {seal.id} of profile {profile} {what}; nothing can be kept "
        f"until fresh tasks are sealed (agentd improve seal {profile} --tasks FILE)"
    )


def fresh_tasks(home: Home, profile: str) -> TaskSet:
    """The profile's validated tasks that no seal of it ever held (sealed or to choose
    on) and that were never exported for training: what may be sealed next."""
    found = harvest_profile(home, profile, None).validation.taskset
    used: set[str] = set()
    for path in seals_of(home.routes, profile):
        seal = open_seal(path)
        used |= {t.content_key for t in (*seal.real_tasks, *seal.train().tasks)}
    trained = exported(home, profile)
    tasks = tuple(t for t in found.tasks if t.content_key not in used and not trained.covers(t))
    return TaskSet(found.profile, found.operator, tasks, validated=True)


def _auto_seal(home: Home, profile: str, options: dict[str, Any]) -> str | None:
    """Seals the profile's fresh tasks (published with the schedule's wallet) when there
    are at least `auto_seal_min` of them; what it did, or None when there were too few."""
    fresh = fresh_tasks(home, profile)
    if len(fresh.tasks) < options.get("auto_seal_min", AUTO_SEAL_MIN):
        return None
    with tempfile.TemporaryDirectory(dir=home.root, prefix=".auto-seal-") as folder:
        path = Path(folder) / "fresh.json"
        fresh.save(path)
        made = seal_tasks(home, profile, path, SealRequest(), options.get("wallet"))
    published = f", published as claim {made.claim}" if made.claim else ""
    return f"auto_seal: sealed {len(fresh.tasks)} fresh task(s) as seal {made.seal.id}{published}"


def _improve(home: Home, profile: str) -> str:
    options = schedule_section(home, profile)
    spent = seal_spent(home, profile)
    if spent and options.get("auto_seal"):
        sealed = _auto_seal(home, profile, options)
        log.error("job %s.improve: %s", profile, spent)
        if sealed is None:
            return (
                f"{spent}; auto_seal found fewer than {options.get('auto_seal_min', AUTO_SEAL_MIN)} fresh tasks to seal"
            )
        log.info("job %s.improve: %s", profile, sealed)
        spent = None
    if spent:
        return spent
    if "proposer" not in options:
        raise AgentdError(f'profile {profile}: [schedule] needs proposer = "MODEL" to run the improve job')
    request = RunRequest(
        proposer=options["proposer"],
        rounds=options.get("rounds", 1),
        runs=options.get("runs", 4),
        apply=options.get("apply", False),
        wallet=options.get("wallet"),
        max_tokens=options.get("max_tokens"),
        queue=options.get("queue"),
        **{
            key: options[key] for key in ("challenger", *CHALLENGER_COUNTS) if key in options
        },  # as improve run passes them
    )
    kept: list[str] = []

    def on_event(event: Event) -> None:
        log.info("job %s.improve: %s", profile, event.text)
        if event.kind == "kept":
            kept.append(event.text)

    with _stoppable() as stopper:
        stopped = run_improvement(home, profile, request, on_event, stopper=stopper)
    return _outcome(stopped, f"{request.rounds} round(s), {len(kept)} change(s) kept")


def _code(home: Home, profile: str) -> str:
    options = schedule_section(home, profile)
    require_code(profile, options)
    spent = seal_spent(home, profile)
    if spent:
        return spent
    folder = profile_dir(home, profile)

    def where(path: str) -> Path:  # as [schedule] says a path: relative to the profile's folder, or absolute
        return folder / Path(path).expanduser()

    request = CodeRequest(
        coder=options["coder"],
        source=where(options["source"]),
        allow=tuple(options.get("allow") or DEFAULT_ALLOW),  # as improve code without --allow
        readable=tuple(where(path) for path in options.get("readable", ())),
        env=tuple(options.get("env", ())),
        **{key: options[key] for key in CODE_OPTIONS if key in options},
    )
    released: list[str] = []

    def on_event(event: Event) -> None:
        log.info("job %s.code: %s", profile, event.text)
        if event.kind == "release":
            released.append(event.data["release"])

    with _stoppable() as stopper:
        stopped = run_code(home, profile, request, on_event, stopper=stopper)
    kept = f"{len(released)} release(s) kept" + (f" ({', '.join(released)})" if released else "")
    return _outcome(stopped, f"{request.rounds} round(s), {kept}")


@contextmanager
def _stoppable() -> Iterator[Stopper]:
    """A stopper stop_all reaches while the loop it is given to runs (asked already when
    stop_all came first)."""
    stopper = Stopper()
    with _running_lock:
        _running.add(stopper)
        if _stopping.is_set():
            stopper.request()
    try:
        yield stopper
    finally:
        with _running_lock:
            _running.discard(stopper)


def _outcome(stopped: Stop | None, done: str) -> str:
    return f"stopped: {stopped} ({done} before)" if stopped else done
