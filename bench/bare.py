"""The baseline runner: the program a plain child process of the bench, nothing confined.

The benches measure the sandbox's runners against it, and read a program's CPU through
it: the bubblewrap runner's program is no child of this process (bwrap exits as soon as
its first process in the sandbox reports the program's status), so its CPU never
reaches `getrusage(RUSAGE_CHILDREN)`; this one's does. `prefix` goes before the argv (a
`valgrind` command line, to count a program's instructions).
"""

from __future__ import annotations

import subprocess

from sandbox.bubblewrap import BubblewrapProcess
from sandbox.runner import Limits, Request


class Bare:
    name = "bare"
    limits = Limits()

    def __init__(self, prefix: tuple[str, ...] = ()) -> None:
        self.prefix = prefix

    async def start(self, request: Request) -> BubblewrapProcess:
        popen = subprocess.Popen(
            [*self.prefix, *request.argv],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=request.env,
            cwd=request.cwd,
        )
        process = BubblewrapProcess(popen, request.limits or self.limits)
        await process.connect()
        return process
