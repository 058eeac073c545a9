"""Code changes: the coder and its tools, git on copies of the source, what a patch may
touch, the code loop and its workshop, and a kept change as a release.

What other rooms and the face use; names load on first use (improver.base.faces).
"""

from __future__ import annotations

from improver.base.faces import lazy

_SURFACE = {
    "CodeLoop": "codeloop",
    "Workshop": "codeloop",
    "apply_to": "git",
    "head_of": "git",
    "init_checkout": "git",
    "paths_git_reads": "git",
    "source_commit": "git",
    "DEFAULT_ALLOW": "patchlimits",
    "MAX_FILES": "patchlimits",
    "MAX_LINES": "patchlimits",
    "outside": "patchlimits",
    "PatchLimits": "patchlimits",
    "touched": "patchlimits",
    "check": "release",
    "Commands": "release",
    "KIND": "release",
    "of_entry": "release",
    "patch_digest": "release",
    "published": "release",
    "Release": "release",
    "release_id": "release",
    "releases": "release",
}

__all__ = sorted(_SURFACE)
__getattr__, __dir__ = lazy(__name__, _SURFACE)
