"""agentd's own candidate program as a code round runs it, for bench/episodes.py.

A code round runs `python3 -m agentd case --stdio` (agentd.app.code's CANDIDATE) from a
tree it built with BUILD in the sandbox, the tree read-only from then on. `built_tree`
makes such a tree of agentd's packages (copied without their bytecode). The bubblewrap
runner hides its program's CPU (see bench/bare.py), so the CPU figures run the very same
request (`sh -c`, the tree, its environment) as a plain child, beside `python3 -c pass`
run the same way, in turns: the floor of any Python candidate.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from bare import Bare

from agentd.app.code import BUILD, CANDIDATE
from improver.episodes.harness import Command
from sandbox import Request, Runner, make_runner, run_blocking, shell_request

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("agentd", "improver", "ledger", "sandbox")
FLOOR = "python3 -c pass"
CACHEGRIND = ("valgrind", "--tool=cachegrind", "--cache-sim=no", "--trace-children=yes")
CACHEGRIND += ("--cachegrind-out-file=/dev/null",)

Episode = Callable[[Command], None]  # runs one episode of a candidate through the harness


def built_tree(folder: Path) -> Path:
    """agentd's packages without bytecode, built with the code loop's BUILD in the sandbox,
    under agentd's umask."""
    tree = folder / "tree"
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tree / package, ignore=shutil.ignore_patterns("__pycache__"))
    kept = os.umask(0o077)  # agentd's own (agentd.cli.invoke), which the sandbox's runs inherit
    try:
        built = run_blocking(make_runner("bwrap"), shell_request(BUILD, tree, writable=True))
    finally:
        os.umask(kept)
    if not built.ok:
        raise SystemExit(f"bench: the build failed: {built.describe()}")
    return tree


def candidate(runner: Runner, tree: Path, command: str = CANDIDATE) -> Command:
    return Command(runner, shell_request(command, tree))


def cpu_beside_floor(episode: Episode, tree: Path, episodes: int) -> tuple[float, float]:
    """CPU seconds of one episode's candidate and of the floor, each the mean of
    `episodes` taken in turns."""
    runner = Bare()
    program, floor = candidate(runner, tree), shell_request(FLOOR, tree)
    spent = [0.0, 0.0]
    for _ in range(episodes):
        spent[0] += _children(lambda: episode(program))
        spent[1] += _children(lambda: _run(runner, floor))
    return spent[0] / episodes, spent[1] / episodes


def instructions_beside_floor(episode: Episode, tree: Path) -> tuple[int, int]:
    """Instructions of one episode's candidate and of the floor (valgrind's count, every
    process of the run: the shell and Python)."""
    with tempfile.TemporaryDirectory() as logs:
        runner = Bare((*CACHEGRIND, f"--log-file={logs}/%p.log"))
        episode(candidate(runner, tree))
        program = _counted(Path(logs))
        _run(runner, shell_request(FLOOR, tree))
        return program, _counted(Path(logs))


def cases_in_turn(episode: Episode, tree: Path, counts: tuple[int, ...]) -> dict[int, float]:
    """CPU seconds a case of a process that takes `count` cases in turn (bench/serialcase.py),
    fed what the harness answered one episode, `count` times over."""
    with tempfile.TemporaryDirectory() as folder:
        said = Path(folder) / "harness.jsonl"
        episode(candidate(Bare(), tree, f"tee {said} | {CANDIDATE}"))
        lines = said.read_bytes()
    serial = shell_request(f"python3 {ROOT / 'bench' / 'serialcase.py'}", tree)
    return {count: _children(lambda count=count: _run(Bare(), serial, lines * count)) / count for count in counts}


def _run(runner: Runner, request: Request, stdin: bytes = b"") -> None:
    result = run_blocking(runner, request, stdin)
    if not result.ok:
        raise SystemExit(f"bench: {request.argv[-1]!r} failed: {result.describe()} {result.tail(5)}")


def _children(call: Callable[[], None]) -> float:
    """The CPU seconds the children this process reaped spent during `call`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    call()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime


def _counted(logs: Path) -> int:
    """The instructions valgrind counted in the logs, which it leaves emptied."""
    total = 0
    for log in logs.iterdir():
        found = re.search(r"I\s+refs:\s+([\d,]+)", log.read_text())
        total += int(found.group(1).replace(",", "")) if found else 0
        log.unlink()
    return total
