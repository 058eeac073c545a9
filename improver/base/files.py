"""Writing the improver's files whole or not at all, and JSON-lines records."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from improver.base.errors import ImproverError


def write_atomic(path: Path, text: str) -> None:
    """Writes `text` to `path` through a temporary file and a rename: a crash never leaves
    half a task set or half a record behind."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def append_line(path: Path, record: dict[str, Any]) -> None:
    """Appends one JSON line, flushed and synced: a record a process reported survives it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_lines(path: Path) -> list[tuple[int, dict[str, Any]]]:
    """Every (line number, object) of a JSON-lines file; a bad line is named, not skipped."""
    if not path.exists():
        return []
    records = []
    with path.open() as f:
        for number, text in enumerate(f, 1):
            if not text.strip():
                continue
            try:
                record = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ImproverError(f"{path}: line {number}: not JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise ImproverError(f"{path}: line {number}: not a JSON object")
            records.append((number, record))
    return records
