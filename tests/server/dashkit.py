"""The dashboard's tests' kit: the browser's path and flags, the demo's home with what
it printed, and the dashboard served over loopback: by uvicorn in a thread, or by a real
`agentd serve` process."""

from __future__ import annotations

import shutil
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette

from agentd.home import Home
from agentd.server.dashboard import routes
from tests.homekit import PASSPHRASES
from tests.serve.daemonkit import Daemon

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@dataclass(frozen=True)
class Demo:
    """The demo's home and every line it printed (what each step did or decided)."""

    home: Home
    said: list[str]

    def copy(self, where: Path) -> Home:
        """A copy of the home a test may change, with no daemon's leftovers."""
        shutil.copytree(self.home.root, where, symlinks=True)
        for stale in ("agentd.pid", "serve.lock"):
            (where / stale).unlink(missing_ok=True)
        return Home(where)


@contextmanager
def serving(home: Home, status: Callable[[], dict[str, Any]] | None = None) -> Iterator[str]:
    """The dashboard over `home`, served by uvicorn on a free loopback port in a thread."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(Starlette(routes=routes(home, status)), log_level="warning", lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started and thread.is_alive():  # a server that fails to start ends its thread
            thread.join(0.05)
        assert server.started, "the dashboard did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


@contextmanager
def daemon(home: Home) -> Iterator[str]:
    """`agentd serve` on `home`, a real process on a free loopback port: its URL."""
    with pytest.MonkeyPatch.context() as env:  # the process takes this environment
        for var in ("AGENTD_HOME", "AGENTD_LEDGER_URL", "AGENTD_INTAKE_TOKEN", *PASSPHRASES):
            env.delenv(var, raising=False)
        running = Daemon(home).start()
    try:
        yield running.url
    finally:
        running.stop()
