"""Code changes: the loop's rounds with a coder instead of a proposer.

Each round the coder changes a copy of the code as it stands (the source's commit, with
any release this run kept). The copy is checked and diffed in a fresh clone
(improver/code/git.py), the patch held to its limits (improver/code/patchlimits.py), built and
tested in the sandbox on another fresh clone with the patch applied (the tree writable
for the build alone: the test sees it read-only, as the candidate does), and the built tree
becomes a candidate program run in the sandbox, read-only, with no network. From there
on the change is judged as a lesson is (improver/loop/judging.py): staged trials, the
screen on the tasks to choose on, the confirmation on the sealed tasks at the seal's
level, losing no task, errored runs not judged; the kill switch and SIGTERM stop it as
they stop any trial, build or coder (improver/loop/running.py). A kept change is a
release (improver/code/release.py), published as `agent.release/v1`.

The harness never runs anything the copy holds: the copy is only read as files, and
what runs is built from a clone agentd made and a patch git applied.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from improver.base.errors import ImproverError
from improver.base.protocol import ProviderError
from improver.base.routes import Routes
from improver.base.variant import Variant
from improver.code.coder import INSTRUCTIONS, Coded, code, messages_for
from improver.code.git import clone_at, diff_of, files_of, holds, mirror, refused, source_commit
from improver.code.patchlimits import PatchLimits, parse, refusal, summary_of
from improver.code.release import (
    KIND as RELEASE_KIND,
    Commands,
    patch_digest,
    record as release_record,
    release_id,
    save,
)
from improver.episodes.harness import Candidate, Command
from improver.loop.gates import SealedText
from improver.loop.given import Given
from improver.loop.judging import say_baseline
from improver.loop.keeping import Claimed, Publish
from improver.loop.proposer import Proposal, failed_of, tried_of
from improver.loop.record import Record, Verdict
from improver.loop.running import Stop, check_proposal
from sandbox import Limits, Result, Runner, SandboxError, shell_request

BUSY = "a build, a test or the coder"  # what a stop request cancels outside a trial
TAIL_LINES = 8  # of a failed build's or test's output, in its refusal
COMMAND_LINES = 40  # of a coder's command's output, in the tool's answer
COMMAND_LIMITS = Limits(wall_seconds=60.0, cpu_seconds=60, processes=32)  # a coder's command


@dataclass
class Workshop:
    """Where a code run's clones and trees are made, and how they are built and run."""

    source: Path
    root: Path  # the run's own folder, removed when it ends
    commands: Commands
    runner: Runner
    readable: tuple[Path, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    at: str = ""  # the commit to build (an attester's: the release's); empty: the one the source stands at

    def __post_init__(self) -> None:
        head = source_commit(self.source)  # a checkout's top, its changes committed
        self.commit = self.at or head
        if self.root.exists():
            shutil.rmtree(self.root)  # a run killed before it could clean up
        self.root.mkdir(parents=True)
        self.origin = mirror(self.source, self.root)
        self.made = 0
        self.patches: dict[str, bytes] = {}  # every patch built, by its SHA-256 (an examiner is handed them)
        if not holds(self.origin, self.commit):
            self.close()
            raise ImproverError(
                f"{self.source} does not hold commit {self.commit}: give --source a checkout of the code it was made from"
            )

    def fresh(self, name: str) -> Path:
        self.made += 1
        folder = self.root / f"{self.made}-{name}"
        folder.mkdir()
        return folder

    def copy_for_coder(self, patch: bytes) -> Path:
        """The code at the commit with `patch`, without its .git: the coder's to change."""
        folder = self.fresh("copy")
        return files_of(clone_at(self.origin, self.commit, folder / "clone", patch), folder / "copy")

    def patch_of(self, copy: Path) -> tuple[bytes, str | None]:
        """The copy's patch against the commit, or why the copy is refused before git reads it."""
        clone = clone_at(self.origin, self.commit, self.fresh("diff") / "clone")
        why = refused(copy, clone)
        if why:
            return b"", why
        patch = diff_of(copy, clone, self.commit)
        shutil.rmtree(clone.parent)
        return patch, None

    async def built(self, patch: bytes) -> tuple[Path | None, str]:
        """A fresh tree with `patch` applied, built and tested in the sandbox; or why not.
        Only the build writes to the tree: from the test on it is frozen, so what the test
        passed is what the candidate runs (scratch space is the sandbox's own /tmp)."""
        self.patches[patch_digest(patch)] = patch
        folder = self.fresh("tree")
        tree = files_of(clone_at(self.origin, self.commit, folder / "clone", patch), folder / "tree")
        shutil.rmtree(folder / "clone")
        for what, command, writable in (("build", self.commands.build, True), ("test", self.commands.test, False)):
            if not command:
                continue
            result = await self.run(command, tree, writable=writable)
            if not result.ok:
                shutil.rmtree(folder)
                return None, f"the {what} failed ({result.describe()}){_tail(result)}"
        return tree, ""

    async def run(self, command: str, folder: Path, writable: bool, limits: Limits | None = None) -> Result:
        process = await self.runner.start(shell_request(command, folder, writable, self.readable, limits, **self.env))
        async with process:
            process.close_input()
            return await process.finish()

    def candidate(self, tree: Path) -> Command:
        return Command(
            self.runner, shell_request(self.commands.candidate, tree, False, self.readable, None, **self.env)
        )

    async def coder_command(self, copy: Path, command: str) -> str:
        """The coder's run_command: in the sandbox, the copy its only writable folder."""
        try:
            result = await self.run(command, copy, writable=True, limits=COMMAND_LIMITS)
        except SandboxError as exc:
            return f"error: {exc}"
        said = (result.stdout + result.stderr).decode(errors="replace").splitlines()[-COMMAND_LINES:]
        return "\n".join([f"exit status {result.status} ({result.describe()})", *said])

    def sweep(self, keep: Path) -> None:
        """Removes every clone, copy and tree of the round but `keep` (the current tree)."""
        for folder in self.root.iterdir():
            if folder not in (keep, self.origin):
                shutil.rmtree(folder, ignore_errors=True)

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _tail(result: Result) -> str:
    lines = result.tail(TAIL_LINES)  # printable only: the line reaches an operator's terminal
    return (": " + " | ".join(lines)) if lines else ""


@dataclass(frozen=True)
class Built:
    """A change built: the tree its candidate runs from, its patch and what the coder said it does."""

    tree: Path
    patch: bytes
    summary: str


@dataclass(kw_only=True)
class CodeLoop(Given):
    """The code loop: a coder's changes to the code, each built into a program that runs
    as the agent, judged as the lesson loop judges lessons (improver.loop.judging); a
    kept change is a release, and `apply_patch` applies its patch to the source."""

    workshop: Workshop
    routes: Routes
    limits_of_patch: PatchLimits
    apply_patch: Callable[[bytes], None] | None = None

    def __post_init__(self) -> None:
        self.built: dict[str, Built] = {}  # by variant id: the code as it stands, and this round's change
        keeper = KeptRelease(self.profile, self.workshop, self.routes, self.built, self.publish, self.apply_patch)
        self.compose(self._candidate, CodeWords(), keeper)

    def _candidate(self, variant: Variant) -> Candidate:
        return self.workshop.candidate(self.built[variant.id].tree)

    async def _baseline(self) -> None:
        """The code as it stands, built and measured; said whether measured now or found in
        the archive, since no round's line repeats it."""
        commit = self.workshop.commit
        tree, why = await self.trials.unless_stopped(self.workshop.built(b""), BUSY)
        if tree is None:
            raise Stop(f"the code as it stands (commit {commit[:12]}) cannot be scored: {why}")
        self.built[self.current.id] = Built(tree, b"", "the code as it stands")
        base, _ = await self.judge.baseline(self.current)
        say_baseline(self.record, base, f"the code as it stands ({commit[:12]})", self.current, commit=commit)

    async def _round(self) -> None:
        self.trials.go(expected=self.limits.max_tokens)  # no round unless a run of what it codes could follow
        number = self.record.round
        parent = self.archive.find(self.current)
        assert parent is not None  # the baseline put it there
        copy = self.workshop.copy_for_coder(self.built[self.current.id].patch)
        history = tried_of(self.archive) if self.settings.show_history else []
        failed = failed_of(parent, self.judge.train.tasks)
        messages = messages_for(INSTRUCTIONS, parent.counts(), failed, history, self.settings.failed_shown)
        coding = code(
            self.proposer, messages, copy, lambda c: self.workshop.coder_command(copy, c), max_tokens=self.trials.left()
        )
        try:
            coded = await self.trials.unless_stopped(coding, BUSY)
        except ProviderError as exc:
            self.record.emit(
                "proposer", f"round {number}: the coder errored ({exc}); no change this round", round=number
            )
            return
        self.trials.spend(coded.usage)
        check_proposal(self.seal.canary_in, coded.said)
        self.current = await self.judge.consider(await self._proposal(coded, copy), parent, self.current)
        self._sweep()

    async def _proposal(self, coded: Coded, copy: Path) -> Proposal:
        """The coder's change as a proposal: its variant once built, else why it is refused."""
        if coded.problem:
            return Proposal(None, coded.said, coded.problem, coded.summary)
        patch, why = self.workshop.patch_of(copy)
        check_proposal(self.seal.canary_in, patch.decode(errors="replace"))  # whatever else is wrong with it
        label = f"{coded.summary} ({summary_of(patch)})" if patch else coded.summary
        why = why or refusal(patch, self.limits_of_patch) or _sealed_words(patch, self.judge.gates.sealed)
        if why:
            return Proposal(None, coded.said, why, label)
        self.trials.go()
        tree, failed = await self.trials.unless_stopped(self.workshop.built(patch), BUSY)
        if tree is None:
            return Proposal(None, coded.said, failed, label)
        change = replace(self.current, commit=self.workshop.commit, patch=patch_digest(patch))
        self.built[change.id] = Built(tree, patch, coded.summary)
        return Proposal(change, coded.said, label=label)

    def _sweep(self) -> None:
        """Only the code as it stands stays built: every other clone, copy and tree goes."""
        current = self.built[self.current.id]
        self.built.clear()
        self.built[self.current.id] = current
        self.workshop.sweep(keep=current.tree.parent)


def _sealed_words(patch: bytes, sealed: SealedText) -> str | None:
    task = sealed.shared_with("\n".join(line for f in parse(patch) for line in f.added))
    return f"it shares a run of words with sealed task {task}" if task else None


@dataclass(frozen=True)
class CodeWords:
    """A code change's lines, each its round's: "round N: LABEL: turned down: why", or,
    kept, "round N: LABEL: kept as release R: its figures" (the release names the step,
    which is in the event's data and the lineage); every event names its round."""

    def line(self, verdict: Verdict, label: str, change: Variant | None, number: int) -> str:
        verb = verdict.verb
        if verb == "kept" and change is not None:
            verb = f"kept as release {release_id(change.commit, change.patch)}"
        return f"round {number}: {label}: {verb}: {verdict.what}"

    def extra(self, number: int) -> dict[str, Any]:
        return {"round": number}


@dataclass(frozen=True)
class KeptRelease:
    """A kept code change: a release, its record and patch saved before its claim (an
    agent.release/v1 claim with a wallet), and with `apply_patch` applied to the source."""

    profile: str
    workshop: Workshop
    routes: Routes
    built: dict[str, Built]
    publish_claim: Publish | None
    apply_patch: Callable[[bytes], None] | None

    def publish(self, change: Variant, before: Variant, body: dict[str, Any]) -> Claimed:
        built = self.built[change.id]
        release = release_record(self.profile, change, before, built.patch, built.summary, self.workshop.commands)
        save(self.routes, release, built.patch)  # before its claim: a claim never names a patch not kept
        return self.publish_claim(RELEASE_KIND, {**body, "release": release}) if self.publish_claim else (None, None)

    def after(self, change: Variant, step: str, record: Record) -> None:
        rid = release_id(change.commit, change.patch)
        patch = str(self.routes.release_patch(rid))
        record.emit("release", f"its patch is {patch}", release=rid, patch=patch)
        if self.apply_patch:
            self.apply_patch(self.built[change.id].patch)
            record.emit("applied", f"release {rid} applied to {self.workshop.source}", release=rid)
