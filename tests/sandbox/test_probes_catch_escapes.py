"""The probes catch what they look for: a runner that confines nothing (a plain child
process with the caller's environment, as candidates were started before the sandbox)
fails them. Only probes that do no harm on the host are run this way."""

from __future__ import annotations

import os
import subprocess

import pytest

from sandbox.bubblewrap import BubblewrapProcess
from sandbox.escapes import PROBES, laid_out
from sandbox.runner import Limits, Request

BY_NAME = {probe.name: probe for probe in PROBES}


class Unconfined:
    """Runs the program as an ordinary child, inheriting everything: no sandbox at all."""

    name = "unconfined"
    limits = Limits()

    async def start(self, request: Request) -> BubblewrapProcess:
        popen = subprocess.Popen(
            request.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=dict(os.environ)
        )
        process = BubblewrapProcess(popen, request.limits or self.limits)
        await process.connect()
        return process


@pytest.mark.parametrize(
    "name",
    [
        "key_in_own_environment",
        "read_the_home",
        "write_the_home",
        "write_the_profile",
        "write_the_project",
        "loopback_tcp",
        "unix_sockets",
        "host_processes",
    ],
)
def test_an_unconfined_program_gets_out(name: str) -> None:
    with laid_out() as bait:
        verdict = BY_NAME[name].judge(Unconfined(), bait)
    assert not verdict.held, verdict.detail
