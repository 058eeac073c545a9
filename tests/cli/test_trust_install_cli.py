"""`agentd improve install` refuses a release whose patch the code loop would have refused,
read from the patch itself: agent.py replaced by a link to the home's log-key.json (as
`git diff` writes it, and by hand), a link added under `--allow lib/`, agent.py made
executable, a binary file. Each is published by the release's own publisher and attested
by the verifier, so only the patch's contents stand in the way: the allow check fails,
it exits 3, and the checkout and the home are left as they were."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.cli.test_install_cli import (  # noqa: F401  (released and world: fixtures)
    World,
    install_args,
    published_as_release,
    refused,
    released,
    world,
)
from tests.improver.test_trust_install import LINK, binary, executable, git_diff, hand_made_link, linked

Patch = Callable[[World], bytes]


def key_link(w: World) -> bytes:
    return git_diff(w.checkout, linked("agent.py", str(w.home.root / "log-key.json")))


def hand_made(w: World) -> bytes:
    return hand_made_link("agent.py", (w.checkout / "agent.py").read_text(), str(w.home.root / "log-key.json"))


def lib_link(w: World) -> bytes:
    return git_diff(w.checkout, linked("lib/key.py", "../../../log-key.json"))


CASES: list[tuple[str, Patch, tuple[str, ...], str]] = [
    ("git_link", key_link, (), f"agent.py: {LINK}"),
    ("hand_link", hand_made, (), f"agent.py: {LINK}"),
    ("lib_link", lib_link, ("--allow", "lib/"), f"lib/key.py: {LINK}"),
    (
        "mode",
        lambda w: git_diff(w.checkout, executable("agent.py")),
        (),
        "agent.py: a change of its mode (100644 to 100755), which a change may not make",
    ),
    (
        "binary",
        lambda w: git_diff(w.checkout, binary("lib/model.bin")),
        ("--allow", "lib/"),
        "lib/model.bin: a binary file, which a change may not hold",
    ),
]


@pytest.mark.parametrize("name, made, allow, why", CASES, ids=[c[0] for c in CASES])
def test_a_release_holding_what_the_code_loop_refuses_is_not_installed(
    agentd,
    world: World,  # noqa: F811  (the fixture imported above)
    name: str,
    made: Patch,
    allow: tuple[str, ...],
    why: str,
) -> None:
    w = world
    patch = made(w)
    applies = subprocess.run(["git", "apply", "--check", "-"], cwd=w.checkout, input=patch, capture_output=True)
    assert applies.returncode == 0, applies.stderr  # the attack is real: git would apply it
    w.release, path = published_as_release(w, patch)
    claim = w.attest("alice")
    before = w.files()
    r = agentd(*install_args(w, "--attestation", claim, "--verifier", "alice", *allow, patch=path))
    refused(r, w, before, "allow", f"{why} (the code loop's limits, which a release keeps to)")
    assert [line.split(":")[0] for line in r.out.splitlines()[1:5]] == [
        "ok patch",
        "FAILED allow",
        "ok commit",
        "ok attestations",
    ]
    assert not (w.checkout / "agent.py").is_symlink() and not Path(w.checkout / "lib").exists()
