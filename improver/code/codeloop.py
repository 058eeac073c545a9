"""Code changes: the loop's rounds with a coder instead of a proposer.

Each round the coder changes a copy of the code as it stands (the source's commit, with
any release this run kept). The copy is checked and diffed in a fresh clone
(improver/code/git.py), the patch held to its limits (improver/code/patchlimits.py), built and
tested in the sandbox on another fresh clone with the patch applied (the tree writable
for the build alone: the test sees it read-only, as the candidate does), and the built tree
becomes a candidate program run in the sandbox, read-only, with no network. From there
on the change is the loop's like any other (improver/loop/rounds.py): staged trials, the
screen on the tasks to choose on, the confirmation on the sealed tasks at the seal's
level, losing no task, errored runs not judged, the kill switch, SIGTERM, the archive
and the lock. A kept change is a release (improver/code/release.py), published as
`agent.release/v1`.

The harness never runs anything the copy holds: the copy is only read as files, and
what runs is built from a clone agentd made and a patch git applied.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from improver.base.errors import ImproverError
from improver.base.protocol import ProviderError
from improver.base.routes import Routes
from improver.base.variant import Variant
from improver.code.coder import INSTRUCTIONS, Coded, code, messages_for
from improver.code.git import clone_at, diff_of, files_of, holds, mirror, refused, source_commit
from improver.code.patchlimits import PatchLimits, parse, refusal, summary_of
from improver.code.release import KIND as RELEASE_KIND, Commands, patch_digest, record, release_id, save
from improver.decide.archive import Archived
from improver.decide.decision import Decision
from improver.decide.stats import Comparison
from improver.episodes.harness import Candidate, Command
from improver.loop.proposer import Proposal
from improver.loop.rounds import Interrupted, Loop, Stop
from sandbox import Limits, Result, Runner, SandboxError, shell_request

T = TypeVar("T")
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
    lines = (result.stdout + result.stderr).decode(errors="replace").strip().splitlines()[-TAIL_LINES:]
    return (": " + " | ".join(line.strip() for line in lines if line.strip())) if lines else ""


@dataclass
class Built:
    tree: Path
    patch: bytes
    summary: str


class CodeLoop(Loop):
    """The loop, its changes code: a coder writes them and a built program runs them.
    Everything from trying a change to keeping it is Loop's own. Its `apply` must be
    None (that makes lessons a profile's); `apply_patch` applies a kept release's patch."""

    def __init__(
        self,
        workshop: Workshop,
        routes: Routes,
        limits_of_patch: PatchLimits,
        apply_patch: Callable[[bytes], None] | None = None,
        **loop: Any,
    ) -> None:
        self.workshop, self.routes, self.limits_of_patch, self.apply_patch = (
            workshop,
            routes,
            limits_of_patch,
            apply_patch,
        )
        self.built: dict[str, Built] = {}
        self.release: dict[str, Any] | None = None  # the release being kept, for its claim
        super().__init__(**loop)
        self.publish_claim, self.publish = self.publish, (self._publish_release if self.publish else None)

    def candidate(self, variant: Variant) -> Candidate:
        return self.workshop.candidate(self.built[variant.id].tree)

    async def _baseline(self) -> None:
        commit = self.workshop.commit
        tree, why = await self._unless_stopped(self.workshop.built(b""))
        if tree is None:
            raise Stop(f"the code as it stands (commit {commit[:12]}) cannot be scored: {why}")
        self.built[self.current.id] = Built(tree, b"", "the code as it stands")
        await super()._baseline()

    def _as_it_is(self, base: Archived, measured: bool, name: str = "", **more: Any) -> None:
        """Said whether measured now or found in the archive: no round header repeats it."""
        commit = self.workshop.commit
        super()._as_it_is(base, True, f"the code as it stands ({commit[:12]})", commit=commit, **more)

    async def _round(self) -> None:
        self._go(expected=self.limits.max_tokens)  # no round unless a run of what it codes could follow
        parent = self._archived(self.current)
        assert parent is not None  # the baseline put it there
        copy = self.workshop.copy_for_coder(self.built[self.current.id].patch)
        history = self._history() if self.settings.show_history else []
        messages = messages_for(
            INSTRUCTIONS, parent.counts(), self._failed(parent), history, self.settings.failed_shown
        )
        try:
            coded = await self._unless_stopped(
                code(
                    self.proposer,
                    messages,
                    copy,
                    lambda c: self.workshop.coder_command(copy, c),
                    max_tokens=self.left(),
                )
            )
        except ProviderError as exc:
            self._emit(
                "proposer", f"round {self.round}: the coder errored ({exc}); no change this round", round=self.round
            )
            return
        self.used = self.used + coded.usage
        self._check_canary(coded.said)
        await self._consider(await self._proposal(coded, copy), parent)
        self.built = {self.current.id: self.built[self.current.id]}
        self.workshop.sweep(keep=self.built[self.current.id].tree.parent)

    async def _proposal(self, coded: Coded, copy: Path) -> Proposal:
        """The coder's change as a proposal: its variant once built, else why it is refused."""
        if coded.problem:
            return Proposal(None, coded.said, coded.problem, coded.summary)
        patch, why = self.workshop.patch_of(copy)
        self._check_canary(patch.decode(errors="replace"))  # whatever else is wrong with it
        label = f"{coded.summary} ({summary_of(patch)})" if patch else coded.summary
        why = why or refusal(patch, self.limits_of_patch) or self._sealed_words(patch)
        if why:
            return Proposal(None, coded.said, why, label)
        self._go()
        tree, why = await self._unless_stopped(self.workshop.built(patch))
        if tree is None:
            return Proposal(None, coded.said, why, label)
        change = replace(self.current, commit=self.workshop.commit, patch=patch_digest(patch))
        self.built[change.id] = Built(tree, patch, coded.summary)
        return Proposal(change, coded.said, label=label)

    def _sealed_words(self, patch: bytes) -> str | None:
        task = self.sealed_text.shared_with("\n".join(line for f in parse(patch) for line in f.added))
        return f"it shares a run of words with sealed task {task}" if task else None

    def _line(self, verb: str, label: str, what: str) -> str:
        """A decision as its round's one line: "round N: LABEL: turned down: why", or, kept,
        "round N: LABEL: kept as release R: its figures"."""
        if verb == "kept" and self.release is not None:
            verb = f"kept as release {self.release['release']}"
        return f"round {self.round}: {label}: {verb}: {what}"

    def _kept_as(self, step: str) -> str:
        return ""  # the release names it; the step is in the event's data and the lineage

    def _decide(
        self,
        said: Decision,
        verb: str,
        label: str,
        what: str,
        change: Variant | None,
        parent: Archived,
        went: str = "",
        /,
        **data: Any,
    ) -> None:
        super()._decide(said, verb, label, what, change, parent, went, **data, round=self.round)

    def _keep(
        self,
        change: Variant,
        label: str,
        parent: Archived,
        said: Decision,
        screen: Comparison,
        number: int,
        errored: dict[str, int],
    ) -> None:
        built = self.built[change.id]
        self.release = record(self.profile, change, self.current, built.patch, built.summary, self.workshop.commands)
        save(self.routes, self.release, built.patch)  # before its claim: a claim never names a patch not kept
        super()._keep(change, label, parent, said, screen, number, errored)
        rid = release_id(change.commit, change.patch)
        patch = str(self.routes.release_patch(rid))
        self._emit("release", f"its patch is {patch}", release=rid, patch=patch)
        if self.apply_patch:
            self.apply_patch(built.patch)
            self._emit("applied", f"release {rid} applied to {self.workshop.source}", release=rid)

    def _publish_release(self, kind: str, body: dict[str, Any]) -> tuple[str, int]:
        assert self.publish_claim is not None and self.release is not None
        return self.publish_claim(RELEASE_KIND, {**body, "release": self.release})

    async def _unless_stopped(self, work: Awaitable[T]) -> T:
        """`work`, unless a stop is asked for first: then it is cancelled (its sandboxed
        process killed) and the loop stops as it would in a trial."""
        task = asyncio.ensure_future(work)
        stopper = asyncio.ensure_future(self.stopping.wait())
        done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if task not in done:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            raise Interrupted(
                "interrupted during a build, a test or the coder; the archive and the seal are as the last finished step left them"
            )
        return task.result()
