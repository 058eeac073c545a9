"""Making a kept change the profile's, and taking it back.

`learned.json` becomes the change's lessons (and models, when it changed them). Each time,
what it replaced is appended to `learned-history.jsonl` beside it first, so `undo`
restores exactly what was there, and refuses when the file was changed since. Both hold
the profile's loop lock, so they never race a running `improve run --apply`.
"""

from __future__ import annotations

import json
from contextlib import contextmanager
from typing import Iterator

from filelock import FileLock, Timeout

from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import Learned, Profile, load_profile, save_learned
from improver import Lineage, Variant, append_line, read_lines, utc_now, write_atomic

HISTORY = "learned-history.jsonl"


def lineage_of(home: Home, profile: str) -> Lineage:
    return Lineage(home.routes.lineage(profile))


@contextmanager
def holding_loop_lock(home: Home, profile: str) -> Iterator[None]:
    """One `improve run`, `adopt` or `undo` of a profile at a time, across processes."""
    home.routes.root.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(home.routes.loop_lock(profile)), timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise AgentdError(f"another agentd improve run, adopt or undo for {profile} holds {lock.lock_file}; wait for it to end") from None
    try:
        yield
    finally:
        lock.release()


def make_current(profile: Profile, variant: Variant, step: str) -> Learned:
    """Makes `variant`'s lessons and models the profile's; returns what it learned now."""
    models = list(variant.models)
    after = Learned(lessons=variant.lessons, models=None if models == profile.models else models, step=step)
    stamp = utc_now()
    append_line(profile.dir / HISTORY, {"at": stamp, "step": step, "before": profile.learned.to_json(), "after": after.to_json()})
    save_learned(profile, after)
    return after


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


def undo(home: Home, profile_name: str) -> tuple[str, Learned]:
    """Takes back the last change made the profile's, restoring exactly what it replaced."""
    with holding_loop_lock(home, profile_name):
        profile = load_profile(home, profile_name)
        path = profile.dir / HISTORY
        history = [line for _, line in read_lines(path)]
        now = profile.learned.to_json()
        # A line whose change never reached learned.json (a crash between the two writes)
        # took nothing to give back: drop it and take back the change before it.
        while history and now != history[-1]["after"] and now == history[-1]["before"]:
            history.pop()
        if not history:
            raise AgentdError(f"profile {profile_name} has no change to take back")
        last = history[-1]
        if now != last["after"]:
            raise AgentdError(
                f"{profile.learned_path} was changed since step {last['step']} was made the profile's; "
                "undo restores only what it knows it replaced"
            )
        before = Learned(**last["before"])
        save_learned(profile, before)
        write_atomic(path, "".join(json.dumps(h, ensure_ascii=False) + "\n" for h in history[:-1]))
        return last["step"], before


