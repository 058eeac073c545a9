"""Gates: what turns a proposed change down before anything is tried on it.

They hold whatever the proposer writes: lessons too long, a model it may not run on, a
change already tried, or text that shares a run of eight words with a sealed task (the
sealed tasks must never shape a change). A canary's code word in a proposal is worse
than a turned-down change, and the loop stops on it (improver.seals.seal.Seal.canary_in).
The same text test holds what a writer writes (improver.loop.writing) and what an improver
proposes (improver.meta.metaloop) against the tasks they must never see.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from improver.base.variant import Variant
from improver.tasks.overlap import holds, word_runs, words_of
from improver.tasks.task import Task


@dataclass(frozen=True)
class SealedText:
    """Every run of eight words in the sealed tasks, to tell which task a change repeats;
    and what each asks, word for word (a task asked in fewer than eight words has no run)."""

    runs: dict[tuple[str, ...], str]
    asked: dict[tuple[str, ...], str] = field(default_factory=dict)

    @classmethod
    def of(cls, tasks: Iterable[Task]) -> SealedText:
        runs: dict[tuple[str, ...], str] = {}
        asked: dict[tuple[str, ...], str] = {}
        for task in tasks:
            for text in _texts(task):
                for run in word_runs(text):
                    runs.setdefault(run, task.name)
            words = words_of(task.task)
            if words:
                asked.setdefault(words, task.name)
        return cls(runs, asked)

    def shared_with(self, text: str) -> str | None:
        """The sealed task `text` shares a run of eight words with, if any."""
        return next((self.runs[r] for r in word_runs(text) if r in self.runs), None)

    def beyond(self, shown: Iterable[Task]) -> SealedText:
        """Only the runs no task in `shown` holds too: a task written like the tasks its
        writer was shown may repeat their words, which a sealed task may happen to share."""
        shown = list(shown)
        seen = SealedText.of(shown).runs
        said = [words_of(text) for task in shown for text in _texts(task)]
        return SealedText(
            {r: name for r, name in self.runs.items() if r not in seen},
            {a: name for a, name in self.asked.items() if not any(holds(words, a) for words in said)},
        )

    def in_task(self, task: Task) -> str | None:
        """The sealed task a written task shares a run of eight words with, if any."""
        return next((found for text in _texts(task) if (found := self.shared_with(text))), None)

    def held_in(self, text: str) -> str | None:
        """The sealed task `text` holds: what it asks, word for word, or a run of eight of its words."""
        words = words_of(text)
        return self.shared_with(text) or next((name for a, name in self.asked.items() if holds(words, a)), None)


def _texts(task: Task) -> list[str]:
    """What a sealed task says: what was asked, what its stand-ins answered and what its
    simulated user holds back."""
    return [task.task, *(s["answer"] for s in task.standins), *(task.user.said if task.user else ())]


def turned_down(
    change: Variant,
    *,
    allowed_models: list[str],
    tried: set[str],
    sealed: SealedText,
    max_lessons: int,
) -> str | None:
    """Why the change is turned down, or None when it may be tried."""
    if len(change.lessons) > max_lessons:
        return f"what it learned is too long ({len(change.lessons)} characters; at most {max_lessons})"
    if not change.models:
        return "it runs on no model"
    banned = [m for m in change.models if m not in allowed_models]
    if banned:
        return f"{banned[0]} is not among the models it may run on"
    if change.id in tried:
        return "changes nothing: tried already"
    task = sealed.shared_with(change.lessons)
    if task:
        return f"it shares a run of words with sealed task {task}"
    return None
