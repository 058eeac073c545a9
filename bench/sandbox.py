"""What the sandbox costs: start-to-exit of a trivial program, and episodes/s.

1. /bin/true, start to exit, N times one after another: a bare `subprocess`, raw
   `bwrap` with the very arguments the BubblewrapRunner builds (its seccomp filter
   included, its outputs captured and read to their end as the runner reads them),
   the BubblewrapRunner itself, and the DockerRunner. Goal: the runner within 5 ms of
   raw bwrap.
2. Episodes/s of `python -m agentd case --stdio` on a task of the invoices example (a
   scripted model, three turns, two tool calls), one at a time and two at once: as a
   bare child process (the baseline, which the harness itself no longer allows), and
   through each runner.

    python bench/sandbox.py            # the full bench, about a minute
    python bench/sandbox.py --quick    # fewer runs, for a look
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "bench"), str(ROOT / "tests")]

from bare import Bare
from episodes import example_task, trial

from agentd.app.agent import model_factory
from agentd.home import Home
from improver.episodes.harness import Command
from sandbox import seccomp
from sandbox.bubblewrap import BubblewrapRunner, sandbox_uid
from sandbox.choose import make_runner
from sandbox.python import python_request
from sandbox.runner import Request, Runner, SandboxUnavailable, run

TRUE = Request(("/bin/true",))
PACKAGES = ("agentd", "improver", "ledger", "sandbox")


def interleaved(n: int, ways: dict[str, Callable[[], object]]) -> dict[str, list[float]]:
    """Times each way n times, taking turns, so that a shared machine's load falls on
    all of them alike."""
    times: dict[str, list[float]] = {name: [] for name in ways}
    for once in ways.values():
        once()  # warm
    for _ in range(n):
        for name, once in ways.items():
            started = time.perf_counter()
            once()
            times[name].append(time.perf_counter() - started)
    return times


def raw_bwrap(runner: BubblewrapRunner) -> None:
    read, write = os.pipe()
    os.write(write, seccomp.bpf(seccomp.rules()))
    os.close(write)
    try:
        subprocess.run(
            runner.bwrap_argv(TRUE, sandbox_uid(), read),
            pass_fds=(read,),
            env={},
            input=b"",
            capture_output=True,  # as the runner does: its outputs read to their end
            check=True,
            start_new_session=True,
        )
    finally:
        os.close(read)


def line(what: str, times: list[float], beside: str = "") -> float:
    median = statistics.median(times) * 1e3
    print(f"   {what:<28} median {median:6.1f} ms, p90 {sorted(times)[int(len(times) * 0.9)] * 1e3:6.1f} ms {beside}")
    return median


def docker_or_none() -> Runner | None:
    try:
        return make_runner("docker")
    except SandboxUnavailable as exc:
        print(f"   (no Docker figure: {exc})")
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="Fewer runs, for a look.")
    quick = parser.parse_args().quick
    bwrap = make_runner("bwrap")
    assert isinstance(bwrap, BubblewrapRunner)
    docker = docker_or_none()

    n = 40 if quick else 200
    print(f"1. /bin/true, start to exit, {n} times each, taking turns")
    loop = asyncio.new_event_loop()
    times = interleaved(
        n,
        {
            "bare subprocess": lambda: subprocess.run(["/bin/true"], check=True),
            "raw bwrap, the same arguments": lambda: raw_bwrap(bwrap),
            "BubblewrapRunner": lambda: loop.run_until_complete(run(bwrap, TRUE)),
        },
    )
    medians = {name: line(name, each) for name, each in times.items()}
    gap = medians["BubblewrapRunner"] - medians["raw bwrap, the same arguments"]
    print(f"   the runner costs {gap:+.1f} ms over raw bwrap (goal: within 5 ms)")
    if docker:
        times = interleaved(max(n // 10, 5), {"DockerRunner": lambda: loop.run_until_complete(run(docker, TRUE))})
        line("DockerRunner", times["DockerRunner"], "(a container made, started, removed)")

    episodes = 6 if quick else 24
    print(f"2. python -m agentd case --stdio, {episodes} episodes (3 model turns, 2 tool calls each)")
    with tempfile.TemporaryDirectory() as tmp:
        home = Home(Path(tmp) / "home")
        os.environ["AGENTD_HOME"] = str(home.root)
        task, variant = example_task(home)
        runtime = python_request(("-m", "agentd", "case", "--stdio"), packages=PACKAGES)
        for each in (Bare(), bwrap, docker):
            if each is None:
                continue
            for concurrency in (1, 2):
                seconds, _ = trial(task, variant, Command(each, runtime), model_factory(home), episodes, concurrency)
                print(
                    f"   {each.name:<8} {concurrency} at once: {episodes / seconds:6.2f} episodes/s ({seconds * 1e3 / episodes:.0f} ms each)"
                )
    if docker and hasattr(docker, "close"):
        docker.close()


if __name__ == "__main__":
    main()
