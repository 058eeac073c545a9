"""A code change's examination rebuilt: both arms (the code as it stood and the change,
each its commit with its patch) built and tested from a checkout in this home's sandbox,
as `improve attest` rebuilds a release, so that each runs as its variant's candidate.

An examiner does this for every code change it is asked to confirm, and whoever reruns
an examination on its revealed seal does it again. What it is asked carries the patches
by their SHA-256 and the commands; the checkout is the rebuilder's own, and must hold the
commit.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentd.errors import AgentdError
from improver import Candidate, Commands, ImproverError, Variant, Workshop
from sandbox import Runner


@dataclass
class Rebuilt:
    """The arms' trees, built in `workshop`'s folder (removed by `close`)."""

    workshop: Workshop
    trees: dict[str, Path]  # by variant id

    def candidate(self, variant: Variant) -> Candidate:
        return self.workshop.candidate(self.trees[variant.id])

    def close(self) -> None:
        self.workshop.close()


def code_asked(patches: dict[str, bytes], commands: Commands) -> dict[str, Any]:
    """How a code examination asks for its patches (base64, by SHA-256) and commands."""
    return {
        "patches": {digest: base64.b64encode(patch).decode() for digest, patch in patches.items()},
        "commands": commands.to_json(),
    }


def code_of(asked: dict[str, Any]) -> tuple[dict[str, bytes], Commands]:
    """The patches and commands a code examination was asked with; AgentdError naming
    what is wrong with them."""
    code = asked.get("code")
    try:
        patches = {str(d): base64.b64decode(p, validate=True) for d, p in code["patches"].items()}  # type: ignore[index]
        commands = Commands(**{k: str(code["commands"][k]) for k in ("build", "test", "candidate")})  # type: ignore[index]
    except (KeyError, TypeError, AttributeError, ValueError, binascii.Error):
        raise AgentdError("a code change is examined with code: {patches: {SHA-256: base64}, commands}") from None
    wrong = next((d for d, p in patches.items() if hashlib.sha256(p).hexdigest() != d), None)
    if wrong is not None:
        raise AgentdError(f"the patch given as {wrong[:16]} does not hash to it")
    return patches, commands


def patch_text(asked: dict[str, Any]) -> str:
    """The patches' text, to hold against the sealed tasks' words and code words."""
    patches, _ = code_of(asked)
    return "\n".join(p.decode(errors="replace") for p in patches.values())


async def rebuild(
    runner: Runner, source: Path, root: Path, asked: dict[str, Any], variants: Sequence[Variant]
) -> Rebuilt:
    """Each variant's code (its commit with its patch) built and tested from `source` in
    `runner`'s sandbox, in a fresh folder `root`; AgentdError when one is not given its
    patch, the checkout lacks the commit, or a build or test fails."""
    patches, commands = code_of(asked)
    commits = {v.commit for v in variants}
    if len(commits) != 1 or "" in commits:
        raise AgentdError("both arms of a code examination must be code at one commit")
    for v in variants:
        if v.patch and v.patch not in patches:
            raise AgentdError(f"the patch of variant {v.id} ({v.patch[:16]}) was not given")
    try:
        workshop = Workshop(source, root, commands, runner, at=commits.pop())
    except ImproverError as exc:
        raise AgentdError(str(exc)) from None
    trees: dict[str, Path] = {}
    try:
        for v in variants:
            if v.id not in trees:
                tree, why = await workshop.built(patches.get(v.patch, b""))
                if tree is None:
                    raise AgentdError(f"variant {v.id}'s code does not build here: {why}")
                trees[v.id] = tree
    except BaseException:
        workshop.close()
        raise
    return Rebuilt(workshop, trees)
