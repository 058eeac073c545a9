"""Live sessions (`agentd run`) when the model is slow, broken or set up wrong: the wall
time is the agent's own, and a model's fault is an errored session, never a crash."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from agentd.app.live import LiveEpisode, run_check
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.runtime import run_case
from agentd.sessions import SessionRecord
from agentd.tools import Toolbox
from improver.base.protocol import Completion, EpisodeLimits
from tests.fakeservers import ModelServer, Reply

TASK = "Pay invoice 21 from Acme, 5 USD, to acme."
# Seconds the loopback model takes over each answer, and the agent's wall time. The three
# answers of a session take 6 s, more than the wall: were the model's time counted, the
# session would run out whatever the machine's speed. The agent's own time (the runtime
# and the example's tools) has the whole 5 s, so a loaded machine cannot make it run out.
SLOW = 2.0
WALL = 5.0


@pytest.fixture
def invoices(agentd, home: Home, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The invoices example on openai:m, with a wall time of WALL seconds and quick retries."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    r = agentd("init", "--example", "invoices")
    assert r.code == 0, r.err
    home.config_path.write_text("[providers]\nattempts = 2\nbackoff = 0.01\nbackoff_cap = 0.01\ntimeout = 30\n")
    toml = home.profiles_dir / "invoices" / "profile.toml"
    text = toml.read_text().replace('models = ["script:models/agent.toml"]', 'models = ["openai:m"]')
    toml.write_text(text.replace("[limits]\n", f"[limits]\nwall_seconds = {WALL}\ncall_seconds = {WALL}\n"))
    return toml.parent


@contextmanager
def serving(monkeypatch: pytest.MonkeyPatch, delay: float = 0.0) -> Iterator[ModelServer]:
    """A loopback openai:m that takes `delay` seconds over each answer."""
    with ModelServer("openai", delay=delay) as s:
        monkeypatch.setenv("OPENAI_BASE_URL", s.base_url)
        yield s


def run_json(agentd) -> dict[str, Any]:
    r = agentd("run", "invoices", TASK, "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def test_the_time_a_slow_model_takes_is_not_the_agents(agentd, invoices: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with serving(monkeypatch, delay=SLOW) as server:
        server.queue(
            server.tool_calls(("read_invoice", {"number": "21"})),
            server.tool_calls(("pay", {"to": "acme", "amount": "5", "invoice": "21"})),
            server.text("Paid 5 USD to acme."),
        )
        s = run_json(agentd)
    assert (s["ended"], s["answer"]) == ("done", "Paid 5 USD to acme.")
    assert json.loads(agentd("sessions", "show", s["id"], "--json").out)["turns"] == 3
    assert json.loads((invoices / "book.json").read_text())["payments"] == [
        {"to": "acme", "amount": "5", "invoice": "21"}
    ]


def test_a_model_that_does_not_answer_within_the_calls_time_errors_the_session(
    agentd, invoices: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving(monkeypatch, delay=WALL + 1):  # longer than call_seconds: it can only end one way
        s = run_json(agentd)
    assert (s["ended"], s["outcome"]) == ("errored", "errored")
    assert s["error"] == "the model did not answer within 5 seconds (the call's limit, call_seconds)"


def test_a_body_that_is_not_text_errors_the_session_rather_than_crash(
    agentd, invoices: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving(monkeypatch) as server:
        server.answer_with(lambda request: Reply(body=b'{"id": "caf\xe9"}'))
        r = agentd("run", "invoices", TASK)
    assert r.code == 0 and "Traceback" not in r.err
    assert "the session errored: openai:m: malformed body: not valid UTF-8" in r.err
    listed = json.loads(agentd("sessions", "list", "--outcome", "errored", "--json").out)
    assert len(listed) == 1 and len(server.requests) == 2  # both attempts, then the session was kept


def test_a_scripted_model_without_a_rule_for_the_conversation_errors_the_session(agentd, invoices: Path) -> None:
    (invoices / "models" / "late.toml").write_text('[[rule]]\nturn = 5\ntext = "Too late."\n')
    toml = invoices / "profile.toml"
    toml.write_text(toml.read_text().replace('models = ["openai:m"]', 'models = ["script:models/late.toml"]'))
    r = agentd("run", "invoices", TASK)
    assert r.code == 0 and "Traceback" not in r.err
    assert f"the session errored: {invoices}/models/late.toml: no rule matches turn 1" in r.err
    listed = json.loads(agentd("sessions", "list", "--outcome", "errored", "--json").out)
    assert [s["ended"] for s in listed] == ["errored"]


def test_a_bad_base_url_is_one_clear_line(agentd, invoices: Path) -> None:
    r = agentd("run", "invoices", TASK, env={"OPENAI_BASE_URL": "http://[::1"})
    assert r.code == 1 and "Traceback" not in r.err
    assert r.err.strip().splitlines() == [
        "agentd: error: OPENAI_BASE_URL is not a valid URL (Invalid IPv6 URL): 'http://[::1'; "
        "give one like http://127.0.0.1:8000"
    ]


class Broken:
    name = "broken:model"

    async def complete(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]], max_tokens: int | None
    ) -> Completion:
        raise KeyError("choices")


def test_any_other_fault_of_the_model_ends_the_session_errored(invoices: Path, home: Home) -> None:
    profile = load_profile(home, "invoices")
    ending = asyncio.run(run_case(profile.case(TASK), LiveEpisode(Broken(), Toolbox(profile), EpisodeLimits())))
    assert (ending.ended, ending.error) == ("errored", "broken:model failed: KeyError: 'choices'")


def test_a_check_gets_the_session_but_no_key_or_passphrase(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AGENTD_WALLET_PASSPHRASE"):
        monkeypatch.setenv(name, "secret")
    seen = tmp_path / "seen.json"
    record = SessionRecord(id="s-1", profile="p", task="t", started_at="", ended_at="", ended="done", transcript=[])
    script = tmp_path / "check.py"
    script.write_text(f"import json, os\njson.dump(dict(os.environ), open({str(seen)!r}, 'w'))\n")
    command = f"{sys.executable} {script}"
    assert run_check(command, record)
    env = json.loads(seen.read_text())
    assert env["AGENTD_SESSION_ID"] == "s-1" and "AGENTD_TRANSCRIPT" in env
    assert not {"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AGENTD_WALLET_PASSPHRASE"} & set(env)
