"""The overlap test: two texts overlap when they share a run of eight words (case
folded, punctuation dropped). It holds what proposers and writers write against the
sealed tasks (improver.loop.gates) and a simulated user's replies against what its person
had yet to say (improver.tasks.simuser)."""

from __future__ import annotations

import re

RUN_OF_WORDS = 8
WORD = re.compile(r"[^\W_]+")


def word_runs(text: str) -> set[tuple[str, ...]]:
    """Every run of eight words in `text`, case folded: the overlap test's unit."""
    words = words_of(text)
    return {tuple(words[i : i + RUN_OF_WORDS]) for i in range(len(words) - RUN_OF_WORDS + 1)}


def words_of(text: str) -> tuple[str, ...]:
    return tuple(WORD.findall(text.casefold()))


def holds(words: tuple[str, ...], part: tuple[str, ...]) -> bool:
    """Whether `part` comes in `words`, word after word."""
    return any(words[i : i + len(part)] == part for i in range(len(words) - len(part) + 1))
