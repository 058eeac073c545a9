"""A loopback model server in a process of its own, for the benches.

In the bench's own process the server's threads would share the interpreter lock with
what is being measured. The bench script runs itself with `--serve DELAY` as the server,
which prints its base URL and serves until its stdin closes.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def loopback_server(script: str, delay: float) -> Iterator[str]:
    """Starts `script --serve DELAY`; yields the server's base URL; stops it after."""
    proc = subprocess.Popen(
        [sys.executable, script, "--serve", str(delay)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.kill()
        proc.wait()
