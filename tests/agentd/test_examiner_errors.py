"""What a client of `agentd examiner serve` (a real process on loopback) is told when
something is not there or cannot be done: JSON `{"error": one line}` as `agentd serve`
says it, 404 and 405 for what no route takes, and never where the examiner's home is."""

from __future__ import annotations

import base64
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PublicKey

from agentd.app.examiner import seal_info
from agentd.app.keydocs import SUITE
from agentd.home import Home
from tests.serve.daemonkit import free_port

SEAL = "0123456789abcdef"  # what a seal id looks like


@dataclass
class Served:
    url: str
    home: Home


@pytest.fixture
def examiner(agentd, home: Home) -> Iterator[Served]:
    assert agentd("wallet", "new", "examiner").code == 0
    port = free_port()
    argv = [sys.executable, "-m", "agentd", "--home", str(home.root), "examiner", "serve", "--wallet", "examiner"]
    process = subprocess.Popen([*argv, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                httpx.get(f"{url}/health", timeout=2)
                break
            except httpx.HTTPError:
                assert process.poll() is None, "the examiner exited"
                time.sleep(0.1)
        yield Served(url, home)
    finally:
        process.terminate()
        process.wait(timeout=30)


def said(answer: httpx.Response, home: Home) -> str:
    assert answer.headers["content-type"] == "application/json", answer.text
    line = answer.json()["error"]
    assert isinstance(line, str) and line and "\n" not in line
    assert str(home.root) not in line and "agentd " not in line, line
    return line


def test_what_no_route_takes_is_a_json_404_or_405(examiner: Served) -> None:
    missing = httpx.get(f"{examiner.url}/v1/nope")
    assert missing.status_code == 404 and said(missing, examiner.home) == "nothing is served at /v1/nope"
    wrong = httpx.post(f"{examiner.url}/v1/examiner/key", content=b"{}")
    assert (
        wrong.status_code == 405 and said(wrong, examiner.home) == "POST is not taken at /v1/examiner/key; GET, HEAD is"
    )
    for path in (f"/v1/examiner/seals/{SEAL}", f"/v1/examiner/seals/{SEAL}/revealed"):
        answer = httpx.get(f"{examiner.url}{path}")
        assert answer.status_code == 404 and said(answer, examiner.home) == f"this examiner holds no seal {SEAL}"


def test_a_seal_that_is_not_one_is_refused_without_naming_where_it_was_kept(examiner: Served) -> None:
    key = httpx.get(f"{examiner.url}/v1/examiner/key").json()["key"]
    sealed = SUITE.encrypt(b"not a seal", X25519PublicKey.from_public_bytes(bytes.fromhex(key)), info=seal_info(SEAL))
    body = {"sealed": base64.b64encode(sealed).decode(), "log": "a log", "seq": 1}
    answer = httpx.put(f"{examiner.url}/v1/examiner/seals/{SEAL}", json=body)
    assert answer.status_code == 400
    assert said(answer, examiner.home).startswith("what was handed over is not a whole seal: HOME/")
