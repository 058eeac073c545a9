"""`agentd improve harvest`, `validate` and `export`: the home's sessions as the improver's
tasks, and the agent's work written out for a trainer.

improver/ never imports agentd/, so this module turns `SessionRecord`s into the
improver's own input types (`Session`, `Transcript`) and tells it where the home keeps
its files (the record of exports under `routes/`).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from agentd.app.sessions import open_sessions
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.sessions import SessionRecord
from improver import (
    TASKS,
    VALIDATION_SHARE,
    Archive,
    Export,
    ExportRecord,
    Harvest,
    Session,
    Task,
    TaskSet,
    Transcript,
    Validation,
    check_out_dir,
    export_work,
    harvest_sessions,
    load_tasks,
    open_seal,
    read_exported,
    seals_of,
    tool_schema,
    validate_tasks,
)

ENV_COMMAND = ["agentd", "improve", "env"]
EXPORT_STEM = Path(TASKS).stem


@dataclass(frozen=True)
class Harvested:
    harvest: Harvest
    validation: Validation
    path: Path | None


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


def harvest_profile(home: Home, profile_name: str, out: Path | None, stem: str | None = None) -> Harvested:
    """Harvests and validates the profile's sessions; writes the set to `out` when given."""
    profile = load_profile(home, profile_name)
    records = open_sessions(home).list(profile=profile.name)
    harvested = harvest_sessions(
        [session_of(r) for r in records], profile.name, profile.operator, stem or (out.stem if out else "work"), profile.rubric
    )
    validation = asyncio.run(validate_tasks(harvested.taskset))
    if out is not None:
        validation.taskset.save(out)
    return Harvested(harvested, validation, out)


def validate_file(path: Path, out: Path | None = None) -> Validation:
    """Validates the tasks of a set file and writes the result to `out` (default: in place)."""
    validation = asyncio.run(validate_tasks(load_tasks(path)))
    validation.taskset.save(out or path)
    return validation


def exported(home: Home, profile: str) -> ExportRecord:
    """What has been exported of the profile so far: a seal must never seal it."""
    return read_exported(home.routes.exported(profile))


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
    seals = [open_seal(path) for path in seals_of(home.routes, profile.name)]
    sealed_tasks = [t for seal in seals for t in seal.real_tasks]
    if tasks_file:
        taskset = load_tasks(tasks_file)
    elif seals:
        taskset = seals[-1].train()
    else:
        taskset = harvest_profile(home, profile.name, None, EXPORT_STEM).validation.taskset
    if taskset.profile != profile.name:
        raise AgentdError(f"{tasks_file} holds tasks of profile {taskset.profile!r}, not {profile.name!r}")
    sealed = _sealed_sessions(records, sealed_tasks, profile.name, profile.operator)
    sealed_keys = {t.content_key for t in sealed_tasks}
    private = {r.id for r in records if r.confidential or r.secrets} | sealed
    shown = tuple(t for t in taskset.tasks if t.source.get("session") not in private and t.content_key not in sealed_keys)
    tasks = TaskSet(taskset.profile, taskset.operator, shown, (), taskset.validated)
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


def _sealed_sessions(records: list[SessionRecord], sealed_tasks: list[Task], profile: str, operator: str) -> set[str]:
    """The sessions whose task is sealed: each sealed task's own, and every session whose
    task, harvested now, has a sealed task's content."""
    if not sealed_tasks:
        return set()
    keys = {t.content_key for t in sealed_tasks}
    now = harvest_sessions([session_of(r) for r in records], profile, operator, EXPORT_STEM).taskset.tasks
    twins = {str(t.source["session"]) for t in now if t.content_key in keys}
    return {str(t.source["session"]) for t in sealed_tasks if t.source.get("session") is not None} | twins
