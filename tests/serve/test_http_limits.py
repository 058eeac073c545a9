"""`agentd serve` against clients that never finish a request and bodies over its cap:
a real daemon on loopback, its `[serve]` timeouts set to a second in config.toml."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from agentd.home import Home
from tests.homekit import run_in_process
from tests.serve.daemonkit import Daemon, free_port
from tests.slowclients import answered, closed_within, endless_body, endless_head, host_port, nothing

QUICK = "[serve]\nheader_timeout = 1\nbody_timeout = 1\nidle_timeout = 1\n"
CAP = 8 * 1024 * 1024  # the server's: the largest body a route takes (a transcript for intake)


@pytest.fixture
def quick(served_home: Home) -> Iterator[Daemon]:
    served_home.config_path.write_text(QUICK)
    running = Daemon(served_home).start()
    yield running
    running.stop()


@pytest.mark.parametrize(
    "client",
    [
        pytest.param(nothing, id="connected and sends nothing"),
        pytest.param(endless_head, id="a header line at a time"),
        pytest.param(lambda: endless_body("/v1/entries"), id="a body a byte at a time"),
        pytest.param(answered, id="kept alive after its answer"),
    ],
)
def test_a_client_that_never_finishes_a_request_is_closed(quick: Daemon, client) -> None:
    assert closed_within(host_port(quick.url), client())
    assert httpx.get(f"{quick.url}/health").json()["ok"] is True


def test_a_body_over_the_servers_cap_is_a_413_on_any_route(quick: Daemon) -> None:
    for path in ("/v1/sessions?profile=invoices", "/v1/nowhere", "/health"):
        answer = httpx.post(f"{quick.url}{path}", content=b"x" * (CAP + 1))
        assert answer.status_code == 413, path
        assert answer.json() == {"error": f"the body is {CAP + 1} bytes; at most {CAP} are taken"}
    assert httpx.get(f"{quick.url}/health").json()["ok"] is True


@pytest.mark.parametrize("value", ['"soon"', "0", "-1", "true"])
def test_a_timeout_that_is_not_seconds_above_zero_is_refused_in_one_line(served_home: Home, value: str) -> None:
    served_home.config_path.write_text(f"[serve]\nbody_timeout = {value}\n")
    done = run_in_process(["--home", str(served_home.root), "serve", "--port", str(free_port())])
    assert done.code != 0
    assert done.err.strip().splitlines() == [
        f"agentd: error: {served_home.config_path}: [serve] body_timeout must be a number of seconds above 0, not {_shown(value)}"
    ]
    assert not (served_home.root / "agentd.pid").exists()


def _shown(toml: str) -> str:
    return {'"soon"': "'soon'", "true": "True"}.get(toml, toml)
