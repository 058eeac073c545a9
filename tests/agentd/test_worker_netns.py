"""A worker on "another machine": `agentd worker` in a network namespace of its own, whose
only way to the database is a veth pair to this one's. The database here listens on
127.0.0.1 only, so a small TCP relay on the host end of the pair (10.231.X.1) forwards to
it, as a database server's own address would on a real network.

The namespace and the pair are made with `ip` (iproute2), which takes root; the test
skips, saying why, only where they cannot be made, and removes both whatever happens.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agentd.app.demo import PROFILE
from agentd.home import Home
from improver import load_tasks
from tests.agentd.test_workers import Proxy, WorkerProcess, answered
from tests.examplekit import harvested

pytestmark = [pytest.mark.postgres, pytest.mark.slow]


@dataclass(frozen=True)
class Namespace:
    name: str
    host: str  # the address of this machine's end of the pair, as seen from the namespace

    @property
    def within(self) -> tuple[str, ...]:
        return ("ip", "netns", "exec", self.name)


def ip(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)


@pytest.fixture
def namespace() -> Iterator[Namespace]:
    """A network namespace joined to this one by a veth pair on a /30 of 10.231.0.0/16."""
    if os.geteuid() != 0:
        pytest.skip("a network namespace takes root: run the tests as root")
    if shutil.which("ip") is None:
        pytest.skip("no `ip` command (iproute2) to make a network namespace with")
    token = secrets.token_hex(3)
    name, outside, inside = f"agentd-{token}", f"vh{token}", f"vn{token}"
    block = secrets.randbelow(16384) * 4  # a /30 of the /16, so tests at once do not collide
    host = f"10.231.{block // 256}.{block % 256 + 1}"
    guest = f"10.231.{block // 256}.{block % 256 + 2}"
    made = ip("netns", "add", name)
    if made.returncode != 0:
        pytest.skip(f"cannot make a network namespace here: {made.stderr.strip()}")
    try:
        for step in (
            ("link", "add", outside, "type", "veth", "peer", "name", inside),
            ("link", "set", inside, "netns", name),
            ("addr", "add", f"{host}/30", "dev", outside),
            ("link", "set", outside, "up"),
            ("-n", name, "addr", "add", f"{guest}/30", "dev", inside),
            ("-n", name, "link", "set", inside, "up"),
            ("-n", name, "link", "set", "lo", "up"),
        ):
            done = ip(*step)
            assert done.returncode == 0, f"ip {' '.join(step)}: {done.stderr.strip()}"
        yield Namespace(name, host)
    finally:
        ip("link", "del", outside)  # takes its peer in the namespace with it
        ip("netns", "del", name)


@pytest.fixture
def relay(namespace: Namespace) -> Iterator[Proxy]:
    proxy = Proxy(namespace.host)
    yield proxy
    proxy.cut()


def reaches(namespace: Namespace, host: str, port: int) -> bool:
    """Whether a connection from inside the namespace to host:port is accepted."""
    probe = f"import socket; socket.create_connection(({host!r}, {port}), timeout=5)"
    return subprocess.run([*namespace.within, sys.executable, "-c", probe], capture_output=True).returncode == 0


def test_a_worker_in_a_network_namespace_of_its_own_runs_a_trial_as_it_runs_here(
    agentd: Callable[..., Any],
    home: Home,
    tmp_path: Path,
    queue_url: str,
    namespace: Namespace,
    relay: Proxy,
) -> None:
    # From inside, the database is not where it is from here: only the relay reaches it.
    assert not reaches(namespace, "127.0.0.1", 5432)
    assert reaches(namespace, namespace.host, relay.port)
    far_url = queue_url.replace("127.0.0.1:5432", f"{namespace.host}:{relay.port}")
    worker = WorkerProcess(tmp_path / "far", far_url, within=namespace.within)
    try:
        work = harvested(home)
        queued = agentd("improve", "eval", PROFILE, "--tasks", work, "--runs", "3", "--k", "1,3", "--queue", queue_url)
        assert queued.code == 0, queued.err
        here = agentd("improve", "eval", PROFILE, "--tasks", work, "--runs", "3", "--k", "1,3")
        assert queued.out == here.out
    finally:
        said = worker.stop()
    assert answered(said) == 3 * len(load_tasks(work).tasks)
