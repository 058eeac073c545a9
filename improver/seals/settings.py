"""The improver's settings: its instructions to the proposer and how a round runs.

They live in `improver.json` beside a profile. The default instructions are written for
any system, not only an agent, so that the improver can later be turned on itself.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from improver.base.digests import digest
from improver.base.errors import ImproverError
from improver.base.files import write_atomic

FILE = "improver.json"  # beside a profile's profile.toml
INSTRUCTIONS = """\
You improve a system from evidence of how it did. You are shown what the system is \
now, the part of it you may not change, what you may change, the tasks it failed with \
what went wrong, and what was tried before and how that went.

Propose changes with the tool you are given. Each change gives the full new text of \
what it changes (replacing the old text, not adding to it); what a change leaves out \
stays as it is. Prefer one general rule that explains several failures over a rule \
that names the particulars of one task: a change is kept only when it is better beyond \
chance on tasks you are never shown. Do not repeat a change already tried. Keep what \
you write short."""
# What an improver may change of itself besides its instructions (max_lessons is the
# operator's limit on the agent, not the improver's to move), as operator lines name them.
TUNABLE = {
    "changes_per_round": "changes a round",
    "failed_shown": "failed tasks shown",
    "show_history": "sees what was tried before",
}


@dataclass(frozen=True)
class Settings:
    instructions: str = INSTRUCTIONS
    changes_per_round: int = 3  # propose_change calls taken from one answer
    failed_shown: int = 8  # failed tasks shown to the proposer
    show_history: bool = True  # whether it sees what was tried before
    max_lessons: int = 2000  # characters of lessons a change may hold

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def id(self) -> str:
        """What names this improver: a digest of its instructions and settings."""
        return digest(self.to_json())[:16]

    def describe(self) -> str:
        """Its three settings, as operator lines put them."""
        return ", ".join(f"{label} {_shown(getattr(self, name))}" for name, label in TUNABLE.items())

    @classmethod
    def from_json(cls, data: Any, where: str = "improver.json") -> Settings:
        if not isinstance(data, dict):
            raise ImproverError(f"{where}: must be a JSON object")
        known = {f.name: f.type for f in fields(cls)}
        unknown = sorted(set(data) - set(known))
        if unknown:
            raise ImproverError(f"{where}: unknown setting {unknown[0]!r}; the settings are {', '.join(known)}")
        settings = cls(**data)
        for name in ("changes_per_round", "failed_shown", "max_lessons"):
            value = getattr(settings, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ImproverError(f"{where}: {name} must be a whole number of at least 1")
        if not isinstance(settings.instructions, str) or not settings.instructions.strip():
            raise ImproverError(f"{where}: instructions must be text")
        if not isinstance(settings.show_history, bool):
            raise ImproverError(f"{where}: show_history must be true or false")
        return settings


def load_settings(path: Path) -> Settings:
    """The settings in `path`, or the defaults when there is no such file."""
    if not path.exists():
        return Settings()
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ImproverError(f"{path}: not readable JSON ({exc})") from None
    return Settings.from_json(data, str(path))


def settings_text(settings: Settings) -> str:
    """The settings as their file holds them."""
    return json.dumps(settings.to_json(), indent=2, ensure_ascii=False) + "\n"


def save_settings(path: Path, settings: Settings) -> None:
    write_atomic(path, settings_text(settings))


def describe_change(after: Settings, before: Settings, width: int = 100) -> str:
    """How operator lines name a change to an improver: `its instructions, adding "..."`,
    `its instructions, rewritten as "..."`, `changes a round 3 -> 1`, or several of these."""
    parts = []
    if after.instructions != before.instructions:
        added = (
            after.instructions.removeprefix(before.instructions)
            if after.instructions.startswith(before.instructions)
            else ""
        )
        text, how = (added, "adding") if added.strip() else (after.instructions, "rewritten as")
        text = " ".join(text.split())
        parts.append(f'its instructions, {how} "{text if len(text) <= width else text[: width - 1] + "…"}"')
    for name, label in TUNABLE.items():
        old, new = getattr(before, name), getattr(after, name)
        if old != new:
            parts.append(f"{label} {_shown(old)} → {_shown(new)}")
    return " and ".join(parts) or "changes nothing"


def _shown(value: object) -> str:
    return ("yes" if value else "no") if isinstance(value, bool) else str(value)
