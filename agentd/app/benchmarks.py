"""`agentd improve import bfcl|tau2`: public benchmarks' tasks in agentd's own format,
validated as every task is (the solution passes, the failures fail), what fails kept
under "excluded" with its reason, what could not be imported named and counted."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path

from agentd.errors import WrongValue
from improver import (
    Imported,
    Skipped,
    TaskSet,
    bfcl_set_problem,
    import_bfcl_set,
    import_tau2_domain,
    tau2_domain_problem,
    validate_tasks,
    write_atomic,
)


@dataclass(frozen=True)
class ImportDone:
    files: dict[str, TaskSet]  # each file written and the validated set it holds
    skipped: tuple[Skipped, ...]
    imported: int  # tasks made, before validation

    @property
    def kept(self) -> int:
        return sum(len(s.tasks) for s in self.files.values())

    @property
    def excluded(self) -> int:
        return sum(len(s.excluded) for s in self.files.values())


def import_bfcl(set_name: str, profile: str, out: Path, limit: int | None = None) -> ImportDone:
    wrong = bfcl_set_problem(set_name)
    if wrong:
        raise WrongValue(wrong)
    imported = import_bfcl_set(set_name, profile, limit)
    taskset = _validated(imported, profile, "")
    taskset.save(out)
    return ImportDone({str(out): taskset}, tuple(imported.skipped), len(imported.tasks))


def import_tau2(
    domain: str, profile: str, out: Path, split: bool = False, user_model: str | None = None, limit: int | None = None
) -> ImportDone:
    """Writes OUT/tasks.json, or with `split` the package's own train and test splits
    (OUT/train.json, OUT/test.json), and OUT/policy.md: the operator's words τ² gives."""
    wrong = tau2_domain_problem(domain)
    if wrong:
        raise WrongValue(wrong)
    imported, policy = asyncio.run(import_tau2_domain(domain, profile, user_model=user_model, limit=limit))
    out.mkdir(parents=True, exist_ok=True)
    parts = {"train": "train", "test": "test"} if split else {"tasks": None}
    files: dict[str, TaskSet] = {}
    for stem, part in parts.items():
        chosen = Imported([t for t in imported.tasks if part is None or t.source.get("split") == part])
        files[str(out / f"{stem}.json")] = _validated(chosen, profile, policy)
    for path, taskset in files.items():
        taskset.save(Path(path))
    write_atomic(out / "policy.md", policy)
    unsplit = [
        Skipped(t.source["id"], "it is in neither split") for t in imported.tasks if split and not t.source.get("split")
    ]
    return ImportDone(files, (*imported.skipped, *unsplit), len(imported.tasks))


def _validated(imported: Imported, profile: str, operator: str) -> TaskSet:
    return asyncio.run(validate_tasks(TaskSet(profile, operator, tuple(imported.tasks)))).taskset
