"""`agentd improve harvest`, `validate` and `export`: the home's sessions as the improver's
tasks, and the agent's work written out for a trainer.

improver/ never imports agentd/, so this module turns `SessionRecord`s into the
improver's own input types (`Session`, `Transcript`) and tells it where the home keeps
its files (the record of exports under `routes/`).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from agentd.app.ledger import open_ledger
from agentd.app.sessions import open_sessions
from agentd.errors import AgentdError, WrongValue
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.providers import make_model
from agentd.sessions import SessionRecord
from improver import (
    TASKS,
    VALIDATION_SHARE,
    Archive,
    Export,
    ExportRecord,
    Harvest,
    Separation,
    Session,
    TaskSet,
    Transcript,
    Validation,
    check_out_dir,
    export_work,
    harvest_sessions,
    load_tasks,
    open_seal,
    read_exported,
    seal_claims,
    seals_of,
    tool_schema,
    validate_tasks,
)
from ledger import Ledger

ENV_COMMAND = ["agentd", "improve", "env"]
EXPORT_STEM = Path(TASKS).stem


@dataclass(frozen=True)
class Harvested:
    harvest: Harvest
    validation: Validation
    path: Path | None
    left_out: Counter[str] = field(default_factory=Counter)  # tasks sealed or exported before, by reason


def session_of(record: SessionRecord) -> Session:
    return Session(
        id=record.id,
        task=record.task,
        transcript=record.transcript,
        tools=record.tools,
        ended=record.ended,
        answer=record.answer,
        outcome=record.outcome,
        person_messages=record.person_messages,
        compacted=record.compacted,
        claim=record.claim_id,
    )


def transcript_of(record: SessionRecord, sealed: bool = False) -> Transcript:
    return Transcript(
        id=record.id,
        profile=record.profile,
        outcome=record.outcome,
        ended=record.ended,
        messages=record.transcript,
        tools=[tool_schema(t) for t in record.tools],
        compacted=record.compacted,
        confidential=record.confidential,
        secrets=tuple(record.secrets),
        claim=record.claim_id,
        sealed=sealed,
    )


def harvest_profile(
    home: Home,
    profile_name: str,
    out: Path | None,
    stem: str | None = None,
    fresh: bool = True,
    simulate: str | None = None,
) -> Harvested:
    """Harvests and validates the profile's sessions; writes the set to `out` when given.
    With `fresh`, tasks sealed or exported before are left out and counted, so the set
    can be sealed. With `simulate` (a model spec), conversations make tasks whose later
    messages that model plays (improver.tasks.simuser)."""
    profile = load_profile(home, profile_name)
    if simulate is not None:
        try:  # a model that cannot be made is refused before anything is written
            make_model(simulate, home, base_dir=profile.dir)
        except AgentdError as exc:
            raise WrongValue(f"--simulate-users: {exc}") from None
    records = open_sessions(home).list(profile=profile.name)
    stem = stem or (out.stem if out else "work")
    harvested = harvest_sessions(
        [session_of(r) for r in records], profile.name, profile.operator, stem, profile.rubric, simulate
    )
    left_out: Counter[str] = Counter()
    taskset = harvested.taskset
    if fresh:
        kept, left_out = separation_of(home, profile.name).fresh(taskset.tasks)
        taskset = replace(taskset, tasks=kept)
    validation = asyncio.run(validate_tasks(taskset))
    if out is not None:
        validation.taskset.save(out)
    return Harvested(harvested, validation, out, left_out)


def validate_file(path: Path, out: Path | None = None) -> Validation:
    """Validates the tasks of a set file and writes the result to `out` (default: in place)."""
    validation = asyncio.run(validate_tasks(load_tasks(path)))
    validation.taskset.save(out or path)
    return validation


def exported(home: Home, profile: str) -> ExportRecord:
    """What has been exported of the profile so far: a seal must never seal it."""
    return read_exported(home.routes.exported(profile))


def separation_of(home: Home, profile: str, ledger: Ledger | None = None) -> Separation:
    """What is sealed and what a proposer was shown (this home's seals of the profile
    and every seal claim on the ledger, `ledger` or the home's, read alone) and what was
    exported."""
    seals = [open_seal(path) for path in seals_of(home.routes, profile)]
    local = [(seal.id, seal.state().claim, seal.real_tasks, seal.train().tasks) for seal in seals]
    if ledger is not None:
        claims = seal_claims(ledger)
    elif home.ledger_url == f"sqlite:///{home.ledger_db}" and not home.ledger_db.exists():
        claims = []  # the home's own ledger is not started yet, so it holds no claim
    else:
        with open_ledger(home, read_only=True) as opened:
            claims = seal_claims(opened)
    return Separation.of(local, claims, exported(home, profile))


def export_profile(
    home: Home,
    profile_name: str,
    out: Path,
    validation: float = VALIDATION_SHARE,
    force: bool = False,
    tasks_file: Path | None = None,
) -> Export:
    """Exports the profile's sessions and tasks: those of `tasks_file` when given, else
    the current seal's tasks to choose on, else every task harvested and validated now.
    A sealed task is never exported, nor the session it came from, nor a task or session
    that asked the same (its twin: a model trained on it would pass the sealed task too)."""
    profile = load_profile(home, profile_name)
    check_out_dir(out, force)
    records = open_sessions(home).list(profile=profile.name)
    paths = seals_of(home.routes, profile.name)
    if tasks_file:
        taskset = load_tasks(tasks_file)
    elif paths:
        taskset = open_seal(paths[-1]).train()
    else:
        taskset = harvest_profile(home, profile.name, None, EXPORT_STEM, fresh=False).validation.taskset
    if taskset.profile != profile.name:
        raise AgentdError(f"{tasks_file} holds tasks of profile {taskset.profile!r}, not {profile.name!r}")
    separation = separation_of(home, profile.name)
    now = harvest_sessions([session_of(r) for r in records], profile.name, profile.operator, EXPORT_STEM).taskset.tasks
    sealed = separation.unexportable_sessions(now)
    private = {r.id for r in records if r.confidential or r.secrets} | sealed
    tasks = TaskSet(
        taskset.profile, taskset.operator, separation.exportable(taskset.tasks, private), (), taskset.validated
    )
    return export_work(
        out,
        [transcript_of(r, sealed=r.id in sealed) for r in records],
        tasks,
        ENV_COMMAND,
        home.routes.exported(profile.name),
        validation,
        force,
        Archive.load(home.routes.archive(profile.name, taskset.digest), taskset.digest),
    )
