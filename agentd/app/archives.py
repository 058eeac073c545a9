"""A profile's archives as the dashboard reads them: for each seal, newest first, every
variant the lesson loop tried on its tasks to choose on and every change the code loop
tried on them (`improve code` keeps an archive of its own), with the seal they belong to.

Reading alone: an archive never written is an empty one.
"""

from __future__ import annotations

from dataclasses import dataclass

from agentd.home import Home
from improver import Archive, Seal, open_seal, seals_of

LESSONS, CODE = "lessons", "code"  # which loop tried the variants of an archive


@dataclass(frozen=True)
class Tried:
    """One archive: the seal whose tasks to choose on it was tried on, the loop that tried them."""

    seal: Seal
    loop: str
    archive: Archive

    @property
    def key(self) -> str:
        """What names the archive in a page's address: its seal and its loop."""
        return f"{self.seal.id}-{self.loop}"


def profile_archives(home: Home, profile: str) -> list[Tried]:
    """Each seal's archives, newest seal first: the lesson loop's and the code loop's where
    either was written, else the lesson loop's, empty (nothing tried on that seal yet)."""
    found = []
    for path in reversed(seals_of(home.routes, profile)):
        seal = open_seal(path)
        digest = seal.terms.train_digest
        paths = {LESSONS: home.routes.archive(profile, digest), CODE: home.routes.code_archive(profile, digest)}
        written = [loop for loop, where in paths.items() if where.exists()] or [LESSONS]
        found += [Tried(seal, loop, Archive.load(paths[loop], digest)) for loop in written]
    return found
