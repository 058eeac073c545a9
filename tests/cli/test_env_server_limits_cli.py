"""`agentd improve env --serve` holds its HTTP clients to the home's `[serve]` timeouts:
a real process, set to a second, against clients that never finish a request."""

from __future__ import annotations

import subprocess
from pathlib import Path

import httpx
import pytest

from agentd.home import Home
from tests.cli.test_tasks_cli import sessions  # noqa: F401  (a fixture)
from tests.slowclients import closed_within, endless_head, host_port, nothing

pytestmark = pytest.mark.usefixtures("sessions")


def harvested(agentd, home: Home, tmp_path: Path, serve: str) -> Path:
    """The example's tasks harvested, and `serve` as the home's [serve] section."""
    out = tmp_path / "work.json"
    agentd("improve", "harvest", "invoices", "--out", out)
    with home.config_path.open("a") as config:
        config.write(f"\n[serve]\n{serve}\n")
    return out


def test_the_homes_serve_timeouts_close_clients_that_never_finish(
    agentd, agentd_process, home: Home, tmp_path: Path
) -> None:
    tasks = harvested(agentd, home, tmp_path, "header_timeout = 1\nidle_timeout = 1")
    proc = agentd_process(
        "improve", "env", "--serve", "--port", "0", "--tasks", tasks, stderr=subprocess.PIPE, text=True
    )
    try:
        line = proc.stderr.readline()
        assert "as an OpenEnv environment on http://" in line, line
        url = line.rsplit(" ", 1)[1].strip()
        assert closed_within(host_port(url), nothing())
        assert closed_within(host_port(url), endless_head())
        assert httpx.get(f"{url}/health").json() == {"status": "healthy"}
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_a_serve_timeout_that_is_not_seconds_is_refused_before_serving(agentd, home: Home, tmp_path: Path) -> None:
    tasks = harvested(agentd, home, tmp_path, "idle_timeout = 0")
    done = agentd("improve", "env", "--serve", "--port", "0", "--tasks", tasks)
    assert done.code != 0
    assert done.err.strip().splitlines() == [
        f"agentd: error: {home.config_path}: [serve] idle_timeout must be a number of seconds above 0, not 0"
    ]
