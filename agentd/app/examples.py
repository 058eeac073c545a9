"""Example profiles shipped with agentd, copied into a home by `agentd init --example`."""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

from agentd.errors import AgentdError
from agentd.home import Home
from agentd.profiles import load_profile, profile_dir

EXAMPLES = ("invoices",)


def install_example(home: Home, name: str) -> Path:
    """Copies example NAME into the home as profile NAME; returns its folder."""
    if name not in EXAMPLES:
        raise AgentdError(f"no example named {name!r}; examples: {', '.join(EXAMPLES)}")
    target = profile_dir(home, name)
    if target.exists():
        raise AgentdError(f"profile {name!r} already exists at {target}; remove it to start the example afresh")
    source = resources.files("agentd") / "examples" / name
    with resources.as_file(source) as folder:
        shutil.copytree(folder, target, ignore=shutil.ignore_patterns("__pycache__", "*.lock"))
    load_profile(home, name)  # the copy must load, or the example itself is broken
    return target
