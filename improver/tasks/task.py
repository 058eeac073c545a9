"""Tasks and task sets, as JSON files whose digests are checked on every load.

A task: its `name`, the `profile`, what was asked (`task`), the `tools` offered (each
`{name, description, parameters, changes, match}`), its `standins` (`{tool, arguments,
answer}`), its `checks` (improver.tasks.checks), where it came from (`source`: `{session,
outcome, claim}` for a harvested task), a `solution` (a run that passes every check:
`{calls: [{tool, arguments}], answer, ended}`), its `failures` (runs of the same shape,
each with a `why`, that must each fail a check), a `rubric` when its profile declares
one (improver.tasks.rubric; absent otherwise), for a conversation its simulated `user`
(`{model, said}`, improver.tasks.simuser; absent otherwise), for a task whose tools a
domain's own code answers its `world` (`{kind, domain}`, improver.tasks.worlds; absent
otherwise), and its `digest`: SHA-256 of the task's RFC 8785 canonical JSON without the
digest.

A task set file: `{profile, operator, tasks, excluded: [{task, reason}], validated,
digest}`. The set's digest is SHA-256 of the canonical JSON of `{profile, operator,
validated, tasks: [each task's digest, in order], excluded: [{task: its digest,
reason}]}`: it covers the task digests rather than the tasks themselves, so a part of a
set (a seal's) is named by digests anyone can recompute from the tasks.

A file whose digests do not match, or with a field missing or of the wrong kind, is
refused with one line naming the task and the field.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from improver.base.digests import canonical, digest
from improver.base.errors import ImproverError
from improver.base.files import write_atomic
from improver.base.nesting import loads_bounded
from improver.tasks import checks, twins
from improver.tasks.rubric import Rubric, parse_rubric
from improver.tasks.runs import RUN_ENDINGS, Run
from improver.tasks.simuser import SimulatedUser
from improver.tasks.standins import StandIns
from improver.tasks.worlds import world_problem

TASK_FIELDS: dict[str, type] = {
    "name": str,
    "profile": str,
    "task": str,
    "tools": list,
    "standins": list,
    "checks": list,
    "source": dict,
    "solution": dict,
    "failures": list,
    "digest": str,
}
SET_FIELDS: dict[str, type] = {
    "profile": str,
    "operator": str,
    "tasks": list,
    "excluded": list,
    "validated": bool,
    "digest": str,
}
# How checks match a tool's calls: by their exact input, or by the tool's name alone.
MATCHES = ("input", "name")


@dataclass(frozen=True)
class Task:
    name: str
    profile: str
    task: str
    tools: list[dict[str, Any]]
    standins: list[dict[str, Any]]
    checks: list[dict[str, Any]]
    source: dict[str, Any]
    solution: Run
    failures: tuple[Run, ...]
    rubric: Rubric | None = None  # the profile's, when it declares one (improver.tasks.rubric)
    user: SimulatedUser | None = None  # a conversation's simulated user (improver.tasks.simuser)
    world: dict[str, Any] | None = None  # what answers its tools instead of stand-ins (improver.tasks.worlds)

    def content(self) -> dict[str, Any]:
        """The task as JSON, without its digest: what the digest is taken over. A task
        without a rubric has no "rubric" field, so its digest is what it always was."""
        rubric = {"rubric": self.rubric.to_json()} if self.rubric is not None else {}
        user = {"user": self.user.to_json()} if self.user is not None else {}
        world = {"world": self.world} if self.world is not None else {}
        return {
            "name": self.name,
            "profile": self.profile,
            "task": self.task,
            "tools": self.tools,
            "standins": self.standins,
            "checks": self.checks,
            "source": self.source,
            "solution": self.solution.to_json(),
            "failures": [f.to_json() for f in self.failures],
            **rubric,
            **user,
            **world,
        }

    @cached_property
    def digest(self) -> str:
        return digest(self.content())

    @cached_property
    def stand_ins(self) -> StandIns:
        """The task's tools as its stand-ins answer them (made once: a task never changes)."""
        return StandIns(self.tools, self.standins)

    def to_json(self) -> dict[str, Any]:
        return {**self.content(), "digest": self.digest}

    @cached_property
    def content_key(self) -> str:
        """What identical tasks share whatever they are named and wherever they came from:
        a digest of what was asked, the stand-ins and the checks, each list in any order.
        A seal keeps identical tasks on one side, and export records it, by this key."""
        return digest(
            {
                "task": self.task,
                "standins": sorted(self.standins, key=canonical),
                "checks": sorted(self.checks, key=canonical),
            }
        )

    @cached_property
    def twin_key(self) -> str:
        """What tasks differing only in case, spacing and punctuation share (improver.tasks.twins)."""
        return twins.twin_key(self.task, self.standins, self.checks)

    @cached_property
    def sketch(self) -> twins.Sketch:
        """The task's checks key and MinHash sketch: near-twins share the one and agree in
        most places of the other (improver.tasks.twins)."""
        return twins.checks_key(self.checks), twins.sketch(twins.shingles(self.task, self.standins, self.checks))

    def schemas(self) -> list[dict[str, Any]]:
        return [tool_schema(t) for t in self.tools]


@dataclass(frozen=True)
class Exclusion:
    """A task validation left out, kept with the reason so the exclusion can be audited."""

    task: Task
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"task": self.task.to_json(), "reason": self.reason}


@dataclass(frozen=True)
class TaskSet:
    profile: str
    operator: str
    tasks: tuple[Task, ...]
    excluded: tuple[Exclusion, ...] = ()
    validated: bool = False
    names: dict[str, Task] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "names", {t.name: t for t in self.tasks})

    @property
    def digest(self) -> str:
        return digest(
            {
                "profile": self.profile,
                "operator": self.operator,
                "validated": self.validated,
                "tasks": [t.digest for t in self.tasks],
                "excluded": [{"task": e.task.digest, "reason": e.reason} for e in self.excluded],
            }
        )

    def get(self, name: str) -> Task:
        task = self.names.get(name)
        if task is None:
            known = ", ".join(t.name for t in self.tasks[:8]) + (" ..." if len(self.tasks) > 8 else "")
            raise ImproverError(f"no task named {name!r} in the set (its tasks: {known or 'none'})")
        return task

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "operator": self.operator,
            "tasks": [t.to_json() for t in self.tasks],
            "excluded": [e.to_json() for e in self.excluded],
            "validated": self.validated,
            "digest": self.digest,
        }

    def save(self, path: Path) -> None:
        write_atomic(path, json.dumps(self.to_json(), indent=2, ensure_ascii=False) + "\n")


def tool_schema(info: dict[str, Any]) -> dict[str, Any]:
    """A tool as a model is shown it (OpenAI function format), from a task's tool info."""
    return {
        "type": "function",
        "function": {
            "name": info["name"],
            "description": info.get("description", ""),
            "parameters": info["parameters"],
        },
    }


def load_tasks(path: Path) -> TaskSet:
    """Reads a task set, refusing it whole if any digest or field is wrong."""
    try:
        data = loads_bounded(path.read_text())
    except OSError as exc:
        raise ImproverError(f"cannot read {path}: {exc.strerror}") from None
    except ValueError as exc:  # not JSON, not UTF-8, or nested too deep to read (TooDeep)
        raise ImproverError(f"{path}: not a JSON task set ({exc})") from None
    return parse_set(data, str(path))


def parse_set(data: Any, where: str) -> TaskSet:
    if not isinstance(data, dict):
        raise ImproverError(f"{where}: a task set must be a JSON object")
    for name, kind in SET_FIELDS.items():
        _field(data, name, kind, where)
    tasks = tuple(parse_task(t, where, i + 1, data["profile"]) for i, t in enumerate(data["tasks"]))
    excluded = tuple(
        _exclusion(e, f"{where}: excluded #{i + 1}", data["profile"]) for i, e in enumerate(data["excluded"])
    )
    names = [t.name for t in tasks]
    duplicate = next((n for n in names if names.count(n) > 1), None)
    if duplicate:
        raise ImproverError(f"{where}: two tasks are named {duplicate!r}; each task needs its own name")
    taskset = TaskSet(data["profile"], data["operator"], tasks, excluded, data["validated"])
    if taskset.digest != data["digest"]:
        raise ImproverError(
            f"{where}: the set's digest does not match its tasks (recorded {data['digest'][:16]}, "
            f"computed {taskset.digest[:16]}): the file was changed after it was written; harvest it again"
        )
    return taskset


def parse_task(data: Any, where: str, index: int = 1, profile: str | None = None) -> Task:
    """One task; `where` and `index` place it in errors until its name is known."""
    task = build_task(data, where, index, profile)
    where = f"{where}: task {task.name}"
    _field(data, "digest", str, where)
    if task.digest != data["digest"]:
        raise ImproverError(
            f"{where}: field 'digest' does not match the task (recorded {data['digest'][:16]}, "
            f"computed {task.digest[:16]}): the task was changed after it was written"
        )
    return task


def build_task(data: Any, where: str, index: int = 1, profile: str | None = None) -> Task:
    """A task from its fields, every one checked, before it has a digest (a task a model
    writes has none yet); parse_task holds a stored task to its digest as well."""
    if not isinstance(data, dict):
        raise ImproverError(f"{where}: task #{index}: a task must be a JSON object")
    name = data.get("name")
    where = f"{where}: task {name}" if isinstance(name, str) and name else f"{where}: task #{index}"
    for name, kind in TASK_FIELDS.items():
        if name != "digest":
            _field(data, name, kind, where)
    if not data["name"].strip():
        raise ImproverError(f"{where}: field 'name' must not be empty")
    if profile is not None and data["profile"] != profile:
        raise ImproverError(f"{where}: field 'profile' is {data['profile']!r}, but the set is profile {profile!r}")
    for i, tool in enumerate(data["tools"]):
        _tool(tool, f"{where}: field 'tools': tool #{i + 1}")
    for i, standin in enumerate(data["standins"]):
        _standin(standin, f"{where}: field 'standins': stand-in #{i + 1}")
    for i, check in enumerate(data["checks"]):
        wrong = checks.problem(check)
        if wrong:
            raise ImproverError(f"{where}: field 'checks': check #{i + 1}: {wrong}")
    rubric = None
    if "rubric" in data:
        try:
            # Its selectors' tools are the profile's, checked when harvest wrote it: a
            # session recorded before a tool was added need not offer it.
            rubric = parse_rubric(data["rubric"])
        except ImproverError as exc:
            raise ImproverError(f"{where}: field 'rubric': {exc}") from None
    user = SimulatedUser.from_json(data["user"], where) if "user" in data else None
    wrong = world_problem(data["world"]) if "world" in data else None
    if wrong:
        raise ImproverError(f"{where}: field 'world': {wrong}")
    _run(data["solution"], f"{where}: field 'solution'")
    for i, failure in enumerate(data["failures"]):
        _run(failure, f"{where}: field 'failures': failure #{i + 1}", why=True)
    return Task(
        name=data["name"],
        profile=data["profile"],
        task=data["task"],
        tools=data["tools"],
        standins=data["standins"],
        checks=data["checks"],
        source=data["source"],
        solution=Run.from_json(data["solution"]),
        failures=tuple(Run.from_json(f) for f in data["failures"]),
        rubric=rubric,
        user=user,
        world=data.get("world"),
    )


def _exclusion(data: Any, where: str, profile: str) -> Exclusion:
    if not isinstance(data, dict):
        raise ImproverError(f'{where}: an exclusion must be {{"task": ..., "reason": ...}}')
    _field(data, "task", dict, where)
    _field(data, "reason", str, where)
    return Exclusion(parse_task(data["task"], where, 1, profile), data["reason"])


def _field(data: dict[str, Any], name: str, kind: type, where: str) -> None:
    if name not in data:
        raise ImproverError(f"{where}: missing field {name!r}")
    value = data[name]
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ImproverError(f"{where}: field {name!r} must be a {_kind_name(kind)}")


def _kind_name(kind: type) -> str:
    return {str: "string", list: "list", dict: "JSON object", bool: "true or false"}.get(kind, kind.__name__)


def _tool(data: Any, where: str) -> None:
    if not isinstance(data, dict):
        raise ImproverError(f"{where}: a tool must be a JSON object")
    _field(data, "name", str, where)
    _field(data, "parameters", dict, where)
    _field(data, "changes", bool, where)
    if data.get("match", "input") not in MATCHES:
        raise ImproverError(f"{where}: field 'match' must be one of {', '.join(MATCHES)}")


def _standin(data: Any, where: str) -> None:
    if not isinstance(data, dict):
        raise ImproverError(f"{where}: a stand-in must be a JSON object")
    _field(data, "tool", str, where)
    _field(data, "arguments", dict, where)
    _field(data, "answer", str, where)


def _run(data: Any, where: str, why: bool = False) -> None:
    if not isinstance(data, dict):
        raise ImproverError(f"{where}: a run must be a JSON object")
    _field(data, "calls", list, where)
    _field(data, "answer", str, where)
    _field(data, "ended", str, where)
    if why:
        _field(data, "why", str, where)
    if data["ended"] not in RUN_ENDINGS:
        raise ImproverError(f"{where}: field 'ended' must be one of {', '.join(RUN_ENDINGS)}")
    for i, call in enumerate(data["calls"]):
        at = f"{where}: call #{i + 1}"
        if not isinstance(call, dict):
            raise ImproverError(f"{at}: a call must be a JSON object")
        _field(call, "tool", str, at)
        if not isinstance(call.get("arguments"), (dict, str)):
            raise ImproverError(f"{at}: missing field 'arguments' (a JSON object, or the raw text sent)")
