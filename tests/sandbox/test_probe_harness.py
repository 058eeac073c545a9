"""The harness a probe runs in when the probe kills one: the check that started it may
stop first (a worker told to stop while it checks its sandbox), and then it ends quietly."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

from sandbox.escapes import LIMITS

ROOT = Path(__file__).resolve().parent.parent.parent


def test_a_harness_whose_check_stopped_ends_without_a_traceback() -> None:
    read, write = os.pipe()
    os.close(read)  # the check is gone before the harness has its program's first line to pass on
    program = "print('up', flush=True)"
    harness = subprocess.run(
        [sys.executable, "-m", "sandbox.escapes", "harness", "bwrap", json.dumps(asdict(LIMITS)), "-c", program],
        stdin=subprocess.DEVNULL,
        stdout=write,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        text=True,
        timeout=60,
    )
    os.close(write)
    assert harness.stderr == ""
    assert harness.returncode == 0
