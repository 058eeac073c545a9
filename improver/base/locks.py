"""Locks that hold across processes, for the improver's files that change in place."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from filelock import FileLock, Timeout

from improver.base.errors import ImproverError

TIMEOUT = 60.0


@contextmanager
def holding(path: Path, timeout: float = TIMEOUT) -> Iterator[None]:
    """Holds `PATH.lock` while the body reads, changes and writes `path` back, so two
    processes never both read the old content and one of their changes is lost."""
    try:
        with FileLock(str(path) + ".lock", timeout=timeout):
            yield
    except Timeout:
        raise ImproverError(f"{path}.lock is held by another process; try again when it is done") from None
