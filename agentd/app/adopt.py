"""Making a kept change the profile's, and taking it back.

`learned.json` becomes the change's lessons (and models, when it changed them); for a kept
improver (agentd/app/improver.py), `improver.json` becomes its text. Each time, what it
replaced is appended to `learned-history.jsonl` beside it first, so `undo` restores
exactly what was there, and refuses when the file was changed since. Both hold the
profile's loop lock, so they never race a running `improve run --apply`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from filelock import FileLock, Timeout

from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import Learned, Profile, load_profile, require_profile, save_learned
from improver import (
    SETTINGS_FILE,
    Lineage,
    Settings,
    Variant,
    append_line,
    load_settings,
    read_lines,
    utc_now,
    write_atomic,
)

HISTORY = "learned-history.jsonl"


def lineage_of(home: Home, profile: str) -> Lineage:
    return Lineage(home.routes.lineage(profile))


@contextmanager
def holding_loop_lock(home: Home, profile: str) -> Iterator[None]:
    """One `improve run`, `adopt` or `undo` of a profile at a time, across processes. A
    profile that is not there is refused first, so that no lock file is left for it."""
    require_profile(home, profile)
    home.routes.root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(home.routes.loop_lock(profile)), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise AgentdError(
            f"another agentd improve run, adopt or undo for {profile} holds {lock.lock_file}; wait for it to end"
        ) from None
    try:
        yield
    finally:
        lock.release()


def make_current(profile: Profile, variant: Variant, step: str) -> Learned:
    """Makes `variant`'s lessons and models the profile's; returns what it learned now."""
    models = list(variant.models)
    after = Learned(lessons=variant.lessons, models=None if models == profile.models else models, step=step)
    record_change(profile, {"step": step, "before": profile.learned.to_json(), "after": after.to_json()})
    save_learned(profile, after)
    return after


def record_change(profile: Profile, change: dict[str, Any]) -> None:
    """A line of the profile's change history, written before the change is made."""
    append_line(profile.dir / HISTORY, {"at": utc_now(), **change})


def adopt(home: Home, profile_name: str, step: str) -> tuple[str, Learned]:
    """Makes kept step STEP (or a unique prefix) the profile's."""
    with holding_loop_lock(home, profile_name):
        profile = load_profile(home, profile_name)
        line = lineage_of(home, profile_name).step(step)
        if "code" in line["after"]:
            raise AgentdError(
                f"step {line['step']} kept a change to code, a release, not lessons: apply its patch with git apply "
                f"(agentd improve releases {profile_name} says where it is)"
            )
        variant = Variant.from_json(line["after"])
        if profile.learned.step == line["step"]:
            raise AgentdError(f"profile {profile_name} has already learned what step {line['step']} kept")
        return line["step"], make_current(profile, variant, line["step"])


def undo(home: Home, profile_name: str) -> tuple[str, Learned | Settings]:
    """Takes back the last change made the profile's, restoring exactly what it replaced:
    what it has learned, or its improver; returns the step and what it has again."""
    with holding_loop_lock(home, profile_name):
        profile = load_profile(home, profile_name)
        path = profile.dir / HISTORY
        history = [line for _, line in read_lines(path)]
        # A line whose change never reached its file (a crash between the two writes)
        # took nothing to give back: drop it and take back the change before it.
        while (
            history
            and _now(profile, history[-1]) != history[-1]["after"]
            and _now(profile, history[-1]) == history[-1]["before"]
        ):
            history.pop()
        if not history:
            raise AgentdError(f"profile {profile_name} has no change to take back")
        last = history[-1]
        if _now(profile, last) != last["after"]:
            changed = profile.dir / SETTINGS_FILE if last.get("file") == SETTINGS_FILE else profile.learned_path
            raise AgentdError(
                f"{changed} was changed since step {last['step']} was made the profile's; undo restores only what it knows it replaced"
            )
        again = _restore(profile, last)
        write_atomic(path, "".join(json.dumps(h, ensure_ascii=False) + "\n" for h in history[:-1]))
        return last["step"], again


def _now(profile: Profile, line: dict[str, Any]) -> Any:
    """What the file a history line changed holds now, in the line's own terms."""
    if line.get("file") == SETTINGS_FILE:
        improver = profile.dir / SETTINGS_FILE
        return improver.read_text() if improver.exists() else None
    return profile.learned.to_json()


def _restore(profile: Profile, line: dict[str, Any]) -> Learned | Settings:
    if line.get("file") != SETTINGS_FILE:
        before = Learned(**line["before"])
        save_learned(profile, before)
        return before
    improver = profile.dir / SETTINGS_FILE
    if line["before"] is None:
        improver.unlink()
    else:
        write_atomic(improver, line["before"])
    return load_settings(improver)
