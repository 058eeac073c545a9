"""`shell_request`: what a build writes in its tree, the later runs read, each a uid of its
own, whatever the umask of the process that starts them (agentd's is 077)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sandbox.python import shell_request
from sandbox.runner import Runner, run_blocking
from tests.sandbox.sandboxkit import RUNNERS, runner_named


@pytest.fixture(scope="module", params=RUNNERS)
def runner(request: pytest.FixtureRequest) -> Runner:
    return runner_named(request.param)


@pytest.fixture
def private_umask() -> Iterator[None]:
    kept = os.umask(0o077)
    yield
    os.umask(kept)


def test_the_bytecode_a_build_writes_is_what_the_candidate_runs(
    runner: Runner, tmp_path: Path, private_umask: None
) -> None:
    tree = tmp_path / "tree"
    (tree / "pkg").mkdir(parents=True)
    (tree / "pkg" / "__init__.py").write_text("ANSWER = 42\n")
    for path in (tree, tree / "pkg"):
        path.chmod(0o755)
    (tree / "pkg" / "__init__.py").chmod(0o644)
    built = run_blocking(runner, shell_request("python3 -m compileall -q pkg", tree, writable=True))
    assert built.ok, built.describe()
    # -v says where each module's code came from: the build's bytecode, not a compile of the source.
    ran = run_blocking(runner, shell_request("python3 -v -c 'import pkg; print(pkg.ANSWER)'", tree))
    assert ran.ok and ran.stdout == b"42\n", ran.stderr[-500:]
    assert b"code object from '" + str(tree / "pkg" / "__pycache__").encode() in ran.stderr
