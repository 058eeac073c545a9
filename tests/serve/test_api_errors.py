"""What a client of `agentd serve` (a real process on loopback, on the demo's home) is
told when something is not there or cannot be done: JSON `{"error": one line}`, 404 for a
path or a name in it that names nothing, 405 for a method a route does not take, a 4xx
for the client's mistakes and a 5xx only for the server's own fault; never where the
home is on the server's disk, nor an agentd command the client cannot run there."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from agentd.home import Home
from tests.serve.daemonkit import Daemon

TOKEN = "errors-token"


def said(answer: httpx.Response, home: Home) -> str:
    """The one line an error says, held to what a client elsewhere may be told."""
    assert answer.headers["content-type"] == "application/json", answer.text
    (key,) = answer.json()
    line = answer.json()["error"]
    assert key == "error" and isinstance(line, str) and line and "\n" not in line
    assert str(home.root) not in line and "agentd " not in line, line
    return line


@pytest.mark.parametrize(
    "path, params",
    [
        ("/v1/nope", {}),
        ("/nope/deeper", {}),
        ("/static/nope.css", {}),
        ("/v1/lineage/nope", {}),
        ("/v1/entries/99999", {}),
        ("/v1/entries/abcdef0123", {}),
        ("/v1/checkpoints/99999", {}),
        ("/v1/checkpoints/" + "9" * 30, {}),
        ("/v1/proofs/inclusion", {"claim": "abcdef0123"}),
    ],
)
def test_what_is_not_there_is_a_json_404(daemon: Daemon, path: str, params: dict[str, str]) -> None:
    answer = httpx.get(f"{daemon.url}{path}", params=params)
    assert answer.status_code == 404, answer.text
    said(answer, daemon.home)


def test_a_profile_the_path_names_is_not_there_and_says_only_that(daemon: Daemon) -> None:
    answer = httpx.get(f"{daemon.url}/v1/lineage/nope")
    assert said(answer, daemon.home) == "no profile, lineage or seal named 'nope'"
    assert httpx.get(f"{daemon.url}/v1/nope").json() == {"error": "nothing is served at /v1/nope"}


def test_a_method_a_route_does_not_take_is_a_json_405_naming_those_it_does(daemon: Daemon) -> None:
    answer = httpx.post(f"{daemon.url}/v1/status", content=b"{}")
    assert answer.status_code == 405 and set(answer.headers["allow"].split(", ")) == {"GET", "HEAD"}
    assert said(answer, daemon.home) == "POST is not taken at /v1/status; GET, HEAD is"
    assert httpx.delete(f"{daemon.url}/v1/entries").status_code == 405


def test_a_name_in_a_query_that_names_nothing_is_a_400_without_the_home_or_advice(daemon: Daemon) -> None:
    answer = httpx.get(f"{daemon.url}/v1/entries", params={"author": "nobody"})
    assert answer.status_code == 400
    assert said(answer, daemon.home) == "no wallet named 'nobody': give a wallet's id (32 hex digits)"
    for path in ("/v1/tiles/" + "9" * 30, "/v1/entries/zz", "/v1/lineage/..%2Fetc"):
        assert httpx.get(f"{daemon.url}{path}").status_code < 500, path


@pytest.fixture
def intake(served_home: Home) -> Iterator[Daemon]:
    served_home.config_path.write_text(f'[serve]\nintake_token = "{TOKEN}"\n')
    running = Daemon(served_home).start()
    yield running
    running.stop()


def test_a_transcript_it_cannot_take_is_named_as_the_body_not_a_file_of_the_home(intake: Daemon) -> None:
    post = {"headers": {"authorization": f"Bearer {TOKEN}"}, "params": {"profile": "invoices"}}
    answer = httpx.post(f"{intake.url}/v1/sessions", content=b'{"messages": [}\n', **post)  # type: ignore[arg-type]
    assert answer.status_code == 400
    assert said(answer, intake.home).startswith("the body: line 1: not JSON")
    nobody = httpx.post(f"{intake.url}/v1/sessions", content=b"[]", **{**post, "params": {"profile": "nobody"}})  # type: ignore[arg-type]
    assert nobody.status_code == 400 and said(nobody, intake.home) == "no profile named 'nobody'"


def test_only_the_servers_own_fault_is_a_500_and_its_log_says_what(daemon: Daemon) -> None:
    lineage = daemon.home.routes.lineage("invoices")
    lineage.write_text(lineage.read_text() + "{damaged\n")
    answer = httpx.get(f"{daemon.url}/v1/lineage/invoices")
    assert answer.status_code == 500
    assert said(answer, daemon.home) == "the lineage of invoices cannot be read here; the daemon's log says why"
    daemon.wait_for_log(str(lineage))  # the operator is told which file
    assert httpx.get(f"{daemon.url}/health").json()["ok"] is True  # and it serves on
