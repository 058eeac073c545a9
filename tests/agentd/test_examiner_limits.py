"""`agentd examiner serve` as a real process on loopback, its `[serve]` timeouts set to a
second: clients that never finish a request are closed, a body over its cap is a 413,
and garbage of every shape sent to its PUT and POST routes, for a seal it holds and for
one it does not, is a JSON 4xx, never a 5xx or a dropped connection."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from hypothesis import given, strategies as st

from agentd.app.demo import PROFILE
from agentd.app.seals import Examiner, seal_tasks
from agentd.home import Home
from agentd.server.examiner import SEAL_CAP
from improver import SealRequest
from tests.examplekit import harvested
from tests.garbage import FUZZ, garbage, json_values, objects
from tests.homekit import run_in_process
from tests.serve.daemonkit import free_port
from tests.slowclients import answered, closed_within, endless_body, endless_head, host_port, nothing

QUICK = "[serve]\nheader_timeout = 1\nbody_timeout = 1\nidle_timeout = 1\n"
WALLET = "examiner"


@pytest.fixture(scope="module")
def examiner(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The examiner's base URL: a home of its own, served by a real `agentd examiner serve`."""
    root = tmp_path_factory.mktemp("examiner") / "home"
    for argv in (["init"], ["wallet", "new", WALLET]):
        made = run_in_process(["--home", str(root), *argv])
        assert made.code == 0, made.err
    Home(root).config_path.write_text(QUICK)
    port = free_port()
    argv = [sys.executable, "-m", "agentd", "--home", str(root), "examiner", "serve", "--wallet", WALLET]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    with subprocess.Popen([*argv, "--port", str(port)], stderr=subprocess.PIPE, env=env) as process:
        url = f"http://127.0.0.1:{port}"
        try:
            _wait_for(url, process)
            yield url
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(60)


def _wait_for(url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
        try:
            if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.1)
    raise AssertionError(f"the examiner did not answer within 60 s at {url}")


@pytest.fixture(scope="module")
def held(examiner: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    """The id of a seal the examiner holds, handed over by an agent's home."""
    home = Home(tmp_path_factory.mktemp("agent") / "home")
    sealed = seal_tasks(home, PROFILE, harvested(home), SealRequest(seed="test"), PROFILE, examiner=Examiner(examiner))
    return sealed.seal.id


@pytest.mark.parametrize(
    "client",
    [
        pytest.param(nothing, id="connected and sends nothing"),
        pytest.param(endless_head, id="a header line at a time"),
        pytest.param(lambda: endless_body("/v1/examiner/seals/0123456789abcdef", "PUT"), id="a body a byte at a time"),
        pytest.param(answered, id="kept alive after its answer"),
    ],
)
def test_a_client_that_never_finishes_a_request_is_closed(examiner: str, client) -> None:
    assert closed_within(host_port(examiner), client())
    assert httpx.get(f"{examiner}/health").json()["ok"] is True


def test_a_body_over_the_cap_is_a_413(examiner: str) -> None:
    # Declared: refused from the head, the body dropped as it comes.
    answer = httpx.put(f"{examiner}/v1/examiner/seals/0123456789abcdef", content=b"x" * (SEAL_CAP + 1))
    assert answer.status_code == 413
    assert answer.json() == {"error": f"the body is {SEAL_CAP + 1} bytes; at most {SEAL_CAP} are taken"}


def examinations() -> st.SearchStrategy[object]:
    variant = objects(["operator", "lessons", "models"])
    fields = ["change", "current", "runs", "baseline_runs", "gain", "seal_claim", "log", "seq", "held"]
    return objects(fields, variant | st.integers(-5, 2000) | json_values())


@pytest.mark.parametrize(
    ("method", "route", "shape"),
    [
        ("PUT", "", objects(["sealed", "log", "seq"], st.binary().map(lambda b: b.hex()) | json_values())),
        ("POST", "/examinations", examinations()),
        ("POST", "/reveal", objects(["claim", "retirement", "log", "seq"])),
    ],
)
def test_garbage_sent_is_a_json_4xx(examiner: str, held: str, method: str, route: str, shape) -> None:
    with httpx.Client(base_url=examiner, timeout=120) as client:

        @FUZZ
        @given(body=garbage(shape), seal=st.sampled_from([held, "0123456789abcdef", "not-a-seal"]))
        def sent(body: bytes, seal: str) -> None:
            answer = client.request(method, f"/v1/examiner/seals/{seal}{route}", content=body)
            assert 400 <= answer.status_code < 500, answer.text
            error = answer.json()["error"]
            assert isinstance(error, str) and error and "\n" not in error

        sent()
        assert client.get("/health").json() == {"ok": True, "seals": 1}  # garbage never passed for a seal


def test_sigterm_stops_the_examiner_and_it_exits_0(tmp_path: Path) -> None:
    root = tmp_path / "home"
    for argv in (["init"], ["wallet", "new", WALLET]):
        assert run_in_process(["--home", str(root), *argv]).code == 0
    port = free_port()
    argv = [sys.executable, "-m", "agentd", "--home", str(root), "examiner", "serve", "--wallet", WALLET]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTD_")}
    with subprocess.Popen([*argv, "--port", str(port)], stderr=subprocess.PIPE, env=env) as process:
        _wait_for(f"http://127.0.0.1:{port}", process)
        process.send_signal(signal.SIGTERM)
        assert process.wait(60) == 0  # a clean stop, as `agentd serve`'s: `kill %1; wait %1` holds in a script
