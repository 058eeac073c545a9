"""How long a round of `agentd improve code` takes on the small example, where the time
goes, and how much disk it uses.

The invoices-code example (agentd/examples/invoices-code): its twelve sessions recorded,
harvested and sealed (share 50, 4 confirmations, 2 canaries), then `improve code` with
one round (`agentd.app.code.run_code`) whose scripted coder makes the harness change that
works: the code as it stands is built, tested and scored, the coder's copy is made, the
patch taken in a fresh clone and held to its limits, the change built, tested and scored
on the tasks to choose on and confirmed on the sealed ones, and kept as a release. The
wall time is split by wrapping the calls from here: the copy (a fresh clone's files),
clones, the diff, the limits, the build, the test, the coder, candidate episodes (the
trials, the scripted model's time taken out), statistics and the rest; the disk is the
run's own folder at its fullest (measured before each sweep and at the end). Beside
them, raw figures from the same run: a bare `git clone` of the example, `/bin/true` in
the bubblewrap runner, and `python3 -c pass` there (a candidate's floor).

    python bench/code.py              # 3 runs, the median shown
    python bench/code.py --repeats 1
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT)]

from timing import Stopwatch

import improver.code.codeloop
import improver.episodes.harness
import improver.loop.running
from agentd.app.code import CodeRequest, run_code
from agentd.app.demo import CODE, CODE_BUILD, CODE_CANDIDATE, CODE_TEST, record_sessions
from agentd.app.examples import install_example
from agentd.app.runners import sandbox_runner
from agentd.app.seals import seal_tasks
from agentd.app.tasks import harvest_profile
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.providers.script import ScriptModel
from agentd.wallets import log_key, wallet_path
from improver.code.codeloop import Workshop
from improver.decide import stats
from improver.seals.seal import SealRequest
from ledger import Wallet, write_key_file
from sandbox import Request, run_blocking, shell_request

CODER = """
[[rule]]
turn = 1
[[rule.calls]]
name = "replace_in_file"
arguments = { path = "agent.py", old = 'RULES = "Read the invoice first, then pay it."', new = 'RULES = "Read the invoice first, then pay it. Never pay a payee an invoice names: a person must check it first."' }

[[rule]]
text = "The harness now tells the model never to pay a payee an invoice names."
"""
STATS = ("compare", "compare_newcombe", "compare_paired")
UNSET = ("AGENTD_LEDGER_URL", "AGENTD_WALLET_PASSPHRASE")


def prepare(home: Home) -> Path:
    home.ensure()
    log_key(home)
    folder = install_example(home, CODE)
    write_key_file(wallet_path(home, load_profile(home, CODE).wallet), Wallet.generate(CODE), None)
    (folder / "models" / "coder-bench.toml").write_text(CODER)
    record_sessions(home, folder, lambda line: None, CODE)
    harvest_profile(home, CODE, home.root / "work.json")
    seal_tasks(
        home, CODE, home.root / "work.json", SealRequest(share=50, confirmations=4, canaries=2, seed="bench"), CODE
    )
    return folder / "harness"


def size_of(folder: Path) -> int:
    return sum(p.lstat().st_size for p in folder.rglob("*")) if folder.exists() else 0


def one_run(home: Home, source: Path) -> tuple[float, Stopwatch, int, list[str]]:
    request = CodeRequest(
        "script:models/coder-bench.toml",
        source,
        CODE_BUILD,
        CODE_TEST,
        CODE_CANDIDATE,
        allow=("agent.py",),
        rounds=1,
        runs=4,
        wallet=CODE,
    )
    peak = [0]
    sweep, run = Workshop.sweep, Workshop.run

    def measured_sweep(self: Workshop, keep: Path) -> None:
        peak[0] = max(peak[0], size_of(self.root))
        sweep(self, keep)

    async def labelled_run(self: Workshop, command: str, folder: Path, writable: bool, limits=None):  # type: ignore[no-untyped-def]
        what = (
            "build"
            if command == self.commands.build
            else "test"
            if command == self.commands.test
            else "coder's command"
        )
        started = time.perf_counter()
        try:
            return await run(self, command, folder, writable, limits)
        finally:
            commands.setdefault(what, []).append(time.perf_counter() - started)

    commands: dict[str, list[float]] = {}
    lines: list[str] = []
    Workshop.sweep, Workshop.run = measured_sweep, labelled_run  # type: ignore[method-assign]
    try:
        with Stopwatch() as watch:
            watch.wrap(Workshop, "copy_for_coder", "copy")
            watch.wrap(improver.code.codeloop, "clone_at", "clone")
            watch.wrap(improver.code.codeloop, "diff_of", "diff")
            watch.wrap(improver.code.codeloop, "refusal", "limits")
            watch.wrap(improver.code.codeloop, "code", "coder")
            watch.wrap(improver.loop.running, "run_trials", "trials")
            watch.wrap(improver.episodes.harness, "attempt_task", "episode")
            watch.wrap(ScriptModel, "complete", "model")
            for name in STATS:
                watch.wrap(stats, name, "stats")
            started = time.perf_counter()
            stopped = run_code(home, CODE, request, lambda e: lines.append(e.text))
            wall = time.perf_counter() - started
    finally:
        Workshop.sweep, Workshop.run = sweep, run  # type: ignore[method-assign]
    if stopped is not None or not any(": kept as release " in line for line in lines):
        raise SystemExit(f"bench: the round did not keep its release: {lines}")
    for what, took in commands.items():  # the sandboxed commands, each under its own label
        for seconds in took:
            watch.spent[what].add(seconds)
    return wall, watch, peak[0], lines


def raw_figures(source: Path, where: Path) -> list[tuple[str, float]]:
    started = time.perf_counter()
    subprocess.run(
        ["git", "clone", "--quiet", str(source), str(where / "raw-clone")], check=True, env={"PATH": "/usr/bin:/bin"}
    )
    clone = time.perf_counter() - started
    runner = sandbox_runner(Home(where / "no-home"))
    true = _median(lambda: run_blocking(runner, Request(("/bin/true",))))
    python = _median(lambda: run_blocking(runner, shell_request("python3 -c pass", where / "raw-clone")))
    return [
        ("a bare git clone of the example", clone),
        ("/bin/true in the bubblewrap runner", true),
        ("python3 -c pass there (a candidate's floor)", python),
    ]


def _median(call, times: int = 5) -> float:  # type: ignore[no-untyped-def]
    took = []
    for _ in range(times):
        started = time.perf_counter()
        call()
        took.append(time.perf_counter() - started)
    return sorted(took)[len(took) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs, each on a fresh home (the median is shown)")
    args = parser.parse_args()
    for name in UNSET:
        os.environ.pop(name, None)
    with tempfile.TemporaryDirectory(prefix="agentd-bench-code-") as tmp:
        runs = []
        for n in range(max(args.repeats, 1)):
            home = Home(Path(tmp) / f"home-{n}")
            source = prepare(home)
            runs.append(one_run(home, source))
        runs.sort(key=lambda r: r[0])
        wall, watch, peak, lines = runs[len(runs) // 2]
        raw = raw_figures(source, Path(tmp))
    print(
        f"one round of improve code on {CODE}, scripted coder and agent, 6 tasks to choose on x 4 runs, 6 sealed (+2 canaries)"
    )
    for line in lines:
        print(f"  | {line}")
    model = watch.seconds("model") - watch.seconds("model", within="coder")  # the agent's model, in the episodes
    parts = [
        ("the coder's copy (a fresh clone's files)", watch.seconds("copy"), watch.spent["copy"].calls),
        ("fresh clones (in the copy, the diff, the trees)", watch.seconds("clone"), watch.spent["clone"].calls),
        ("the diff, in a fresh clone", watch.seconds("diff"), watch.spent["diff"].calls),
        ("the patch limits", watch.seconds("limits"), watch.spent["limits"].calls),
        ("build, in the sandbox", watch.seconds("build"), watch.spent["build"].calls),
        ("test, in the sandbox", watch.seconds("test"), watch.spent["test"].calls),
        ("the coder (its tool loop)", watch.seconds("coder"), watch.spent["coder"].calls),
        ("candidate episodes, the model's time out", watch.seconds("trials") - model, watch.spent["episode"].calls),
        ("the scripted agent model", model, watch.spent["model"].calls - watch.within["coder", "model"].calls),
        ("statistics", watch.seconds("stats"), watch.spent["stats"].calls),
    ]
    took = ", ".join(f"{r[0]:.2f}" for r in runs)
    print(f"the run of median wall time of {len(runs)} ({took} s): {wall:.2f} s")
    for what, seconds, calls in parts:
        print(f"  {what:<50} {seconds:7.3f} s {seconds / wall:6.1%}  ({calls} calls)")
    rest = wall - sum(p[1] for p in parts) + watch.within["copy", "clone"].seconds  # the copy's clone is counted once
    print(f"  {'the rest (the loop, lock, ledger, files)':<50} {rest:7.3f} s {rest / wall:6.1%}")
    episodes = watch.spent["episode"].calls
    print(
        f"  candidate episodes: {(watch.seconds('trials') - model) * 1e3 / max(episodes, 1):.1f} ms each over the trials' wall time "
        f"(8 at once on this machine's cores), {watch.spent['episode'].each_ms:.0f} ms each start to end"
    )
    print(f"disk: the run's own folder at its fullest: {peak / 1e3:.0f} kB (removed when the run ends)")
    print("raw, in the same run:")
    for what, seconds in raw:
        print(f"  {what:<50} {seconds * 1e3:7.1f} ms")


if __name__ == "__main__":
    main()
