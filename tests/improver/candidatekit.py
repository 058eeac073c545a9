"""Candidate programs for the harness's tests, each run in the bubblewrap sandbox."""

from __future__ import annotations

import textwrap
from dataclasses import replace
from functools import cache
from pathlib import Path

from improver.episodes.harness import Command
from sandbox.choose import make_runner
from sandbox.python import python_request
from sandbox.runner import Runner


@cache
def runner() -> Runner:
    return make_runner("bwrap")


def program(tmp_path: Path, body: str) -> Command:
    """A candidate program: `body` runs after the case line was read into `case`."""
    tree = tmp_path / "candidate"
    tree.mkdir(exist_ok=True)
    (tree / "candidate.py").write_text(
        "import json, sys, time\n"
        "case = json.loads(sys.stdin.readline())['case']\n"
        "def send(kind, payload):\n"
        "    sys.stdout.write(json.dumps({kind: payload}) + '\\n'); sys.stdout.flush()\n"
        "def receive():\n"
        "    return json.loads(sys.stdin.readline())\n" + textwrap.dedent(body)
    )
    return Command(runner(), replace(python_request(("candidate.py",)), tree=tree))
