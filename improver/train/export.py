"""Export: the agent's own work, written out for a trainer of one's own.

- `sft.jsonl`: sessions that went well, a line each in OpenAI's chat fine-tuning format
  (`{"messages", "tools", "metadata"}`, tool calls included, the tools shown beside; for
  OpenAI's upload, `openai`: `{"messages", "tools"}` alone, `tools` only when there are
  some). A session that ended by asking a person, and went well, goes too: asking is
  what it teaches.
- `sft-validation.jsonl`: the share held apart, chosen by a hash of each session's id,
  so a session stays on its side from one export to the next.
- `tasks.json` and `environments.jsonl`: the tasks to reinforce in (a task set file, and
  one line per task naming the command that runs it as an episode).
- `groups.jsonl`: each task's runs in the loop's archive, with group-relative advantages (improver.train.groups).
- `README.md`: what each file is.

Passed over: sessions that did not finish (neither done nor asked), were compacted, held confidential content,
hold a secret this machine keeps, whose task is sealed, or whose transcript is not in
the chat format. What is exported is recorded, merged across exports, before any file
is written and under a lock, so that neither a crash nor two exports at once loses
any of it: the sessions (each line's, and each task's source), the tasks' digests and
their content keys (improver.tasks.task.Task.content_key, the same whatever a task is named).
A later seal refuses a task the record covers: a model that has seen a task would pass
it by memory.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from improver.base.errors import ImproverError
from improver.base.files import write_atomic
from improver.base.locks import holding
from improver.decide.archive import Archive
from improver.tasks.chat import transcript_problem
from improver.tasks.task import Task, TaskSet
from improver.tasks.twins import Twins, sketch_of_text, sketch_text
from improver.train.groups import GROUPS, make_groups, readme_section

SFT = "sft.jsonl"
SFT_VALIDATION = "sft-validation.jsonl"
TASKS = "tasks.json"
ENVIRONMENTS = "environments.jsonl"
README = "README.md"
VALIDATION_SHARE = 0.1
EXPORT_PASS_OVER = ("unfinished", "compacted", "confidential", "holds a secret", "sealed", "malformed")
# How a session ends when it finished: with its answer, or by asking a person, which is
# how one that must not go on without a person ends well.
FINISHED = ("done", "asked")


@dataclass(frozen=True)
class Transcript:
    """A recorded session as export sees it (agentd.app.tasks makes these)."""

    id: str
    profile: str
    outcome: str  # good | bad | unknown | errored
    ended: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]  # as the model was shown them (OpenAI function format)
    compacted: bool = False
    confidential: bool = False
    secrets: tuple[str, ...] = ()
    claim: str | None = None
    sealed: bool = False  # its task is sealed: a model trained on it would pass it by memory


@dataclass(frozen=True)
class ExportRecord:
    """What has been exported for a profile, across every export."""

    sessions: frozenset[str] = frozenset()  # sft lines' sessions and exported tasks' sources
    tasks: frozenset[str] = frozenset()  # task digests
    contents: frozenset[str] = frozenset()  # task content keys: a task under any name
    twins: frozenset[str] = frozenset()  # task twin keys (improver.tasks.twins)
    sketches: tuple[str, ...] = ()  # the exported tasks' sketches (improver.tasks.twins), for near-twins

    def covers(self, task: Task) -> bool:
        """Whether a model may have been trained on `task`: the session it came from went
        out (as a line of sft.jsonl or as an exported task's source), or a task with the
        same content did, under whatever name (export names tasks tasks-N, harvest work-N),
        or its twin or near-twin did (improver.tasks.twins)."""
        return (
            task.digest in self.tasks  # what a record from before content keys holds
            or task.content_key in self.contents
            or task.twin_key in self.twins
            or task.source.get("session") in self.sessions
            or self.near.near(task.sketch) is not None
        )

    @cached_property
    def near(self) -> Twins[str]:
        """The exported tasks' sketches, indexed (made once per record)."""
        found: Twins[str] = Twins()
        for text in self.sketches:
            sketch = sketch_of_text(text)
            if sketch is not None:
                found.add(sketch, "exported")
        return found


@dataclass
class Export:
    out: Path
    sft: int = 0
    held_apart: int = 0
    tasks: int = 0
    not_good: int = 0  # sessions that did not go well (or whose outcome is unknown)
    passed_over: Counter[str] = field(default_factory=Counter)
    record: ExportRecord = ExportRecord()
    groups: int = 0  # tasks in groups.jsonl
    flat_groups: int = 0  # of them, groups with no signal


def pass_over_reason(t: Transcript) -> str | None:
    if transcript_problem(t.messages):
        return "malformed"
    if t.ended not in FINISHED:
        return "unfinished"
    if t.compacted:
        return "compacted"
    if t.confidential:
        return "confidential"
    if t.secrets:
        return "holds a secret"
    if t.sealed:
        return "sealed"
    return None


def held_apart(session_id: str, share: float) -> bool:
    """Whether a session goes to validation: a hash of its id, not a draw, so it stays
    on its side in every export with the same share."""
    point = int.from_bytes(hashlib.sha256(session_id.encode()).digest()[:8], "big") / 2**64
    return point < share


def sft_line(t: Transcript, openai: bool = False) -> dict[str, Any]:
    """A line of sft.jsonl; for OpenAI's upload (`openai`), only what it takes."""
    if openai:
        return {"messages": t.messages, **({"tools": t.tools} if t.tools else {})}
    return {
        "messages": t.messages,
        "tools": t.tools,
        "metadata": {"session": t.id, "profile": t.profile, "outcome": t.outcome, "claim": t.claim},
    }


def check_out_dir(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ImproverError(f"{out} is a file; export writes a directory: name another path")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ImproverError(
            f"{out} is not empty: export into a new or empty directory, or pass --force to overwrite its files"
        )


def export(
    out: Path,
    transcripts: list[Transcript],
    taskset: TaskSet,
    env_command: list[str],
    record_path: Path,
    validation: float = VALIDATION_SHARE,
    force: bool = False,
    archive: Archive | None = None,
    openai: bool = False,
) -> Export:
    """Records what goes out in `record_path`, then writes the files into `out`
    (groups.jsonl from `archive`, the loop's record of the runs on these tasks; the SFT
    lines as OpenAI's upload takes them with `openai`).

    The record comes first: an export that stops half-way has recorded more than it
    wrote, which only makes a later seal refuse more, never seal what was trained on."""
    if not 0 <= validation < 1:
        raise ImproverError(f"--validation {validation:g} is not a share: give a number from 0 up to (not including) 1")
    check_out_dir(out, force)
    report = Export(out)
    train: list[Transcript] = []
    held: list[Transcript] = []
    for t in transcripts:
        reason = pass_over_reason(t)
        if reason:
            report.passed_over[reason] += 1
        elif t.outcome != "good":
            report.not_good += 1
        else:
            (held if held_apart(t.id, validation) else train).append(t)
    report.sft, report.held_apart, report.tasks = len(train), len(held), len(taskset.tasks)
    report.record = record_exported(record_path, [t.id for t in train + held], taskset.tasks)
    groups = make_groups(archive, taskset.tasks)
    report.groups, report.flat_groups = len(groups.lines), groups.flat
    try:
        out.mkdir(parents=True, exist_ok=True)
        write_atomic(out / SFT, _jsonl(sft_line(t, openai) for t in train))
        write_atomic(out / SFT_VALIDATION, _jsonl(sft_line(t, openai) for t in held))
        taskset.save(out / TASKS)
        write_atomic(out / ENVIRONMENTS, _jsonl(_environment(task, env_command) for task in taskset.tasks))
        write_atomic(out / GROUPS, groups.jsonl())
        write_atomic(out / README, readme(report, taskset, env_command, validation, openai) + readme_section(groups))
    except OSError as exc:
        raise ImproverError(
            f"cannot write the export into {out}: {exc.strerror or exc}; what it holds is recorded in {record_path} already"
        ) from None
    return report


def _environment(task: Task, env_command: list[str]) -> dict[str, Any]:
    return {
        "case": task.name,
        "digest": task.digest,
        "profile": task.profile,
        "task": task.task,
        "command": [*env_command, "--tasks", TASKS, "--case", task.name],
    }


def _jsonl(rows: Any) -> str:
    return "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in rows)


def read_exported(path: Path) -> ExportRecord:
    """What was exported so far; an empty record when nothing was. A record written
    before content keys were kept has none."""
    if not path.exists():
        return ExportRecord()
    try:
        data = json.loads(path.read_text())
        return ExportRecord(
            frozenset(map(str, data["sessions"])),
            frozenset(map(str, data["tasks"])),
            frozenset(map(str, data.get("contents", []))),
            frozenset(map(str, data.get("twins", []))),
            tuple(map(str, data.get("sketches", []))),
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ImproverError(
            f"{path}: not a record of exports ({exc}); restore it from a backup, never delete it"
        ) from None


def record_exported(path: Path, sessions: list[str], tasks: Sequence[Task]) -> ExportRecord:
    """Merges an export into the record under its lock (written whole, or not at all):
    the sessions of its lines, and each task's digest, content and twin keys, sketch and
    source session."""
    sources = {str(t.source["session"]) for t in tasks if t.source.get("session") is not None}
    with holding(path):
        before = read_exported(path)
        after = ExportRecord(
            before.sessions | set(sessions) | sources,
            before.tasks | {t.digest for t in tasks},
            before.contents | {t.content_key for t in tasks},
            before.twins | {t.twin_key for t in tasks},
            tuple(sorted(set(before.sketches) | {sketch_text(t.sketch) for t in tasks})),
        )
        body = {
            "sessions": sorted(after.sessions),
            "tasks": sorted(after.tasks),
            "contents": sorted(after.contents),
            "twins": sorted(after.twins),
            "sketches": list(after.sketches),
        }
        write_atomic(path, json.dumps(body, indent=2) + "\n")
    return after


def readme(report: Export, taskset: TaskSet, env_command: list[str], validation: float, openai: bool = False) -> str:
    example = " ".join([*env_command, "--tasks", TASKS, "--case", taskset.tasks[0].name if taskset.tasks else "NAME"])
    return f"""# Training data exported from profile {taskset.profile}

What the agent did well, and tasks to reinforce in. Nothing here trains a model: it is
what a trainer of your own reads.

## {SFT} ({report.sft} sessions)

Sessions that went well (a person marked them good, or their check passed), one per
line in OpenAI's chat fine-tuning format: {_line_format(openai)}. `messages` is the
transcript (system prompt, the task, the assistant's tool calls and the tools' answers,
its last words, or its question to a person when it ended by asking one); `tools` are
the tools the model was shown{_metadata(openai)}.

## {SFT_VALIDATION} ({report.held_apart} sessions)

The same format, held apart for validation: a session goes here when the SHA-256 of
its id, read as a number in [0, 1), is below {validation:g}. It is not a random draw, so
a session stays on its side from one export to the next.

## {TASKS} ({report.tasks} tasks)

A task set: each task is what a session was asked, stand-ins that answer its tools as
the real tools did, and checks that score a run (reward = the share of checks that
held). Every task, and the set, carries a SHA-256 digest of its canonical JSON (RFC
8785); the set's digest covers the task digests, and a file whose digests do not match
is refused.

## {ENVIRONMENTS}

One line per task in {TASKS}: its name (`case`), digest and text, and the command that
runs it as an episode, from this directory:

    {example}

The episode writes `{{"request": ...}}` lines (the messages and tools, as a chat model
gets them) and reads the policy's `{{"message": ...}}` replies, a line at a time, until
it writes `{{"done": {{"case", "reward", "passed", "failures", "calls", "ended"}}}}`. A
malformed reply ends it with `{{"error": ...}}`.

## Passed over

Sessions that did not finish (neither done nor asked), were compacted, held confidential
content, hold a secret this machine keeps, whose task is sealed (a model trained on it would pass the sealed
task by memory) or whose transcript is not in the chat format are in neither {SFT} nor
{SFT_VALIDATION}; no task of a confidential, secret-holding or sealed session is in
{TASKS}. This export passed over {_counts(report.passed_over) or "none"}.
"""


def _line_format(openai: bool) -> str:
    if openai:
        return '`{"messages": [...], "tools": [...]}`, as OpenAI\'s upload takes it (`tools` only when there are some)'
    return '`{"messages": [...], "tools": [...], "metadata": {...}}`'


def _metadata(openai: bool) -> str:
    if openai:
        return " (OpenAI's upload takes no other key: the sessions exported are named in the home's record of exports)"
    return "; `metadata` names the session and its claim on the ledger"


def _counts(counts: Counter[str]) -> str:
    return ", ".join(f"{counts[reason]} {reason}" for reason in EXPORT_PASS_OVER if counts[reason])
