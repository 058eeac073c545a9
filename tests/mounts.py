"""Real read-only and full file systems for tests (they run as root): a read-only bind
mount of a folder, and a tiny tmpfs. Each is unmounted when the test is done with it."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


@contextmanager
def read_only_view(folder: Path) -> Iterator[Path]:
    """`folder` as seen through a read-only bind mount beside it."""
    view = folder.with_name(folder.name + "-read-only")
    view.mkdir()
    _mount("--bind", str(folder), str(view))
    try:
        _mount("-o", "remount,bind,ro", str(view))
        yield view
    finally:
        subprocess.run(["umount", str(view)], check=True)
        view.rmdir()


@contextmanager
def tiny_disk(folder: Path, kilobytes: int) -> Iterator[Path]:
    """`folder`, made a tmpfs of `kilobytes`: writes past that fail with ENOSPC."""
    folder.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={kilobytes}k,mode=0700", "tmpfs", str(folder))
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def fill(folder: Path) -> Path:
    """Fills the file system `folder` is on to the last byte; returns the filler to delete."""
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as f:
        for size in (1 << 20, 4096, 1):  # big steps, then to the last byte
            try:
                while True:
                    f.write(b"\0" * size)
            except OSError:
                pass
    return filler
