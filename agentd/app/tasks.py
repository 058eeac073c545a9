"""`agentd improve harvest`, `validate` and `export`: the home's sessions as the improver's
tasks, and the agent's work written out for a trainer (and what of it no trainer gets,
which `improve env --serve` holds to as well).

improver/ never imports agentd/, so this module turns `SessionRecord`s into the
improver's own input types (`Session`, `Transcript`) and tells it where the home keeps
its files (the record of exports under `routes/`).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from agentd.app.ledger import open_ledger
from agentd.app.sessions import open_sessions
from agentd.errors import AgentdError, WrongValue
from agentd.home import Home
from agentd.profiles import list_profiles, load_profile
from agentd.providers import make_model
from agentd.runtime import ASK_PERSON_SCHEMA
from agentd.sessions import SessionRecord
from improver import (
    ASK_PERSON_TOOL,
    TASKS,
    VALIDATION_SHARE,
    Archive,
    Export,
    ExportRecord,
    Harvest,
    Separation,
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
    record_exported,
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
        tools=shown_tools(record),
        compacted=record.compacted,
        confidential=record.confidential,
        secrets=tuple(record.secrets),
        claim=record.claim_id,
        sealed=sealed,
    )


def shown_tools(record: SessionRecord) -> list[dict[str, Any]]:
    """The tools the session's model was shown, in OpenAI's function format: the profile's
    and, in a session agentd ran, asking a person, which the runtime offers every model (so
    a line that ends by asking offers what it calls, and every line offers it alike)."""
    tools = [tool_schema(t) for t in record.tools]
    if record.source == "live" and all(t.get("name") != ASK_PERSON_TOOL for t in record.tools):
        tools.append(ASK_PERSON_SCHEMA)
    return tools


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


@dataclass(frozen=True)
class Withheld:
    """What of a profile's work no trainer is ever given: sealed tasks and their twins, and
    every task of a session that is sealed (its task or a twin is), confidential or holds
    a secret; nor those sessions themselves."""

    separation: Separation
    sealed: set[str]  # sessions whose task is sealed
    private: set[str]  # those, and sessions confidential or holding a secret

    def sealed_why(self, task: Task) -> str | None:
        """How `task` is sealed (itself, a twin, or its session's task), or None."""
        by = self.separation.sealed_by(task)
        if by:
            return f"it is sealed, by {by}"
        session = task.source.get("session")
        return f"it comes from session {session}, whose task is sealed" if session in self.sealed else None


def withheld(home: Home, profile: str, operator: str, records: list[SessionRecord]) -> Withheld:
    """What of `profile`'s work (its sessions `records`) is withheld from trainers."""
    separation = separation_of(home, profile)
    now = harvest_sessions([session_of(r) for r in records], profile, operator, EXPORT_STEM).taskset.tasks
    sealed = separation.unexportable_sessions(now)
    private = {r.id for r in records if r.confidential or r.secrets} | sealed
    return Withheld(separation, sealed, private)


def export_profile(
    home: Home,
    profile_name: str,
    out: Path,
    validation: float = VALIDATION_SHARE,
    force: bool = False,
    tasks_file: Path | None = None,
    openai: bool = False,
) -> Export:
    """Exports the profile's sessions and tasks: those of `tasks_file` when given, else
    the current seal's tasks to choose on, else every task harvested and validated now.
    A sealed task is never exported, nor the session it came from, nor a task or session
    that asked the same (its twin: a model trained on it would pass the sealed task too).
    With `openai`, the SFT lines are as OpenAI's fine-tuning upload takes them."""
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
    kept = withheld(home, profile.name, profile.operator, records)
    tasks = TaskSet(
        taskset.profile,
        taskset.operator,
        kept.separation.exportable(taskset.tasks, kept.private),
        (),
        taskset.validated,
    )
    return export_work(
        out,
        [transcript_of(r, sealed=r.id in kept.sealed) for r in records],
        tasks,
        ENV_COMMAND,
        home.routes.exported(profile.name),
        validation,
        force,
        Archive.load(home.routes.archive(profile.name, taskset.digest), taskset.digest),
        openai,
    )


def served_to_trainers(home: Home | None, taskset: TaskSet, tasks_file: Path) -> Path | None:
    """Holds a task set `improve env --serve` is to serve to export's rule on seals: a
    sealed task (or a twin of one, or one from a session whose task is sealed) stops it, in
    one line naming the task and the seal. The set is then recorded as exported, before a
    trainer sees any of it, so that no later seal seals what a policy was trained on; the
    record's path (None without a home holding the profile, where no seal of it can be
    made: nothing is recorded)."""
    if home is None:
        return None  # no home, no seal here: nothing is known sealed, nowhere to record
    kept = withheld(home, taskset.profile, taskset.operator, open_sessions(home).list(profile=taskset.profile))
    for task in taskset.tasks:
        why = kept.sealed_why(task)
        if why:
            raise AgentdError(
                f"task {task.name} of {tasks_file} is not served: {why}, and no trainer is given a sealed task; "
                f"serve the {TASKS} an export writes (agentd improve export {taskset.profile} --out DIR)"
            )
    if taskset.profile not in list_profiles(home):
        return None
    path = home.routes.exported(taskset.profile)
    record_exported(path, [], taskset.tasks)
    return path
