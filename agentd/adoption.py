"""Making a kept change the profile's, and taking it back.

`learned.json` becomes the change's lessons (and models, when it changed them). Each time,
what it replaced is appended to `learned-history.jsonl` beside it first, so `undo`
restores exactly what was there, and refuses when the file was changed since.
"""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import Learned, Profile, load_profile, save_learned
from improver.files import write_atomic
from improver.lineage import Lineage
from improver.variant import Variant

HISTORY = "learned-history.jsonl"


def lineage_of(home: Home, profile: str) -> Lineage:
    return Lineage(home.routes_dir / f"{profile}-lineage.jsonl")


def make_current(profile: Profile, variant: Variant, step: str) -> Learned:
    """Makes `variant`'s lessons and models the profile's; returns what it learned now."""
    models = list(variant.models)
    after = Learned(lessons=variant.lessons, models=None if models == profile.models else models, step=step)
    _append(profile.dir / HISTORY, {"at": _now(), "step": step, "before": profile.learned.to_json(), "after": after.to_json()})
    save_learned(profile, after)
    return after


def adopt(home: Home, profile_name: str, step: str) -> tuple[str, Learned]:
    """Makes kept step STEP (or a unique prefix) the profile's."""
    profile = load_profile(home, profile_name)
    line = lineage_of(home, profile_name).step(step)
    variant = Variant.from_json(line["after"])
    if profile.learned.step == line["step"]:
        raise AgentdError(f"profile {profile_name} has already learned what step {line['step']} kept")
    return line["step"], make_current(profile, variant, line["step"])


def undo(home: Home, profile_name: str) -> tuple[str, Learned]:
    """Takes back the last change made the profile's, restoring exactly what it replaced."""
    profile = load_profile(home, profile_name)
    path = profile.dir / HISTORY
    history = _read(path)
    if not history:
        raise AgentdError(f"profile {profile_name} has no change to take back")
    last = history[-1]
    if profile.learned.to_json() != last["after"]:
        raise AgentdError(
            f"{profile.learned_path} was changed since step {last['step']} was made the profile's; "
            "undo restores only what it knows it replaced"
        )
    before = Learned(**last["before"])
    save_learned(profile, before)
    write_atomic(path, "".join(json.dumps(h, ensure_ascii=False) + "\n" for h in history[:-1]))
    return last["step"], before


def _read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    try:
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    except json.JSONDecodeError as exc:
        raise AgentdError(f"{path}: line {exc.lineno}: not JSON; restore it from a backup") from None


def _append(path: Path, line: dict[str, Any]) -> None:
    with path.open("a") as f:
        f.write(json.dumps(line, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
