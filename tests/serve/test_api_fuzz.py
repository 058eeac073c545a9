"""Garbage of every shape posted to a real `agentd serve` on loopback, to every route that
reads a body (POST /v1/entries, POST /v1/sessions): each answer a JSON 4xx saying what is
wrong (or, for what happens to be a transcript, 201), never a 5xx or a dropped
connection, and the daemon serves on."""

from __future__ import annotations

import base64
import json
from typing import Any

import httpx
from hypothesis import given, strategies as st

from agentd.home import Home
from tests.garbage import FUZZ, garbage, json_values, objects
from tests.serve.daemonkit import Daemon

TOKEN = "fuzz-token"
PAYLOAD_TYPE = "application/vnd.agentd.entry.v2+json"  # what an entry's envelope says it carries


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def envelopes() -> st.SearchStrategy[dict[str, Any]]:
    """DSSE envelopes as an entry is sent, of any payload and a signature that is not one."""
    payloads = objects(["v", "kind", "author", "at", "log", "seq", "body"]).map(lambda p: b64(json.dumps(p).encode()))
    signatures = st.fixed_dictionaries({"keyid": st.sampled_from(["ab" * 32, "", "x"]), "sig": st.binary().map(b64)})
    return st.fixed_dictionaries(
        {
            "payload": payloads | st.text(max_size=20),
            "payloadType": st.sampled_from([PAYLOAD_TYPE, "", "text/plain"]),
            "signatures": st.lists(signatures, max_size=2) | json_values(),
        }
    )


def transcripts() -> st.SearchStrategy[Any]:
    messages = st.lists(objects(["role", "content", "tool_calls", "tool_call_id", "name"]), max_size=4)
    return messages | objects(["messages", "metadata", "tools"], messages | json_values())


def check_refused(answer: httpx.Response, accepted: int | None = None) -> None:
    if answer.status_code == accepted:
        return
    assert 400 <= answer.status_code < 500, answer.text
    error = answer.json()["error"]
    assert isinstance(error, str) and error and "\n" not in error


def test_garbage_posted_as_an_entry_is_a_json_4xx(daemon: Daemon) -> None:
    with httpx.Client(base_url=daemon.url, timeout=60) as client:

        @FUZZ
        @given(body=garbage(envelopes()))
        def posted(body: bytes) -> None:
            check_refused(client.post("/v1/entries", content=body))

        posted()
        assert client.get("/health").json()["ok"] is True


def test_garbage_posted_as_sessions_is_a_json_4xx(served_home: Home) -> None:
    served_home.config_path.write_text(f'[serve]\nintake_token = "{TOKEN}"\n')
    daemon = Daemon(served_home).start()
    headers = {"authorization": f"Bearer {TOKEN}"}
    try:
        with httpx.Client(base_url=daemon.url, timeout=60, headers=headers) as client:

            @FUZZ
            @given(body=garbage(transcripts()), profile=st.sampled_from(["invoices", "nobody", "../x", ""]))
            def posted(body: bytes, profile: str) -> None:
                check_refused(client.post("/v1/sessions", params={"profile": profile}, content=body), accepted=201)

            posted()
            assert client.get("/health").json()["ok"] is True
    finally:
        daemon.stop()
