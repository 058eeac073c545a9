"""Live sessions (`agentd run`) when the model is slow, broken or set up wrong: each model
call has its deadline, the session's wall time counts the model's time, and a model's
fault (a call cut off at a deadline too) is an errored session, never a crash nor a
session that went badly."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import datetime
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
# Seconds: a session's wall time, generous, and one model call's deadline, short. A model
# that cannot answer within them (a loopback server that trickles its answer for
# minutes, or waits WAIT seconds first) can only end one way, whatever the machine's speed.
WALL = 60.0
CALL = 1.5
WAIT = 30.0
SLOWLY = 0.1  # seconds between the bytes of an answer trickled out


@pytest.fixture
def invoices(agentd, home: Home, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The invoices example on openai:m, with a wall time of WALL seconds and quick retries."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    r = agentd("init", "--example", "invoices")
    assert r.code == 0, r.err
    home.config_path.write_text("[providers]\nattempts = 2\nbackoff = 0.01\nbackoff_cap = 0.01\ntimeout = 30\n")
    toml = home.profiles_dir / "invoices" / "profile.toml"
    text = toml.read_text().replace('models = ["script:models/agent.toml"]', 'models = ["openai:m"]')
    toml.write_text(text.replace("[limits]\n", f"[limits]\nwall_seconds = {WALL}\n"))
    return toml.parent


def set_limits(folder: Path, limits: str) -> None:
    """Puts `limits` (TOML lines) first under the profile's [limits]."""
    toml = folder / "profile.toml"
    toml.write_text(toml.read_text().replace("[limits]\n", f"[limits]\n{limits}\n"))


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


def test_a_slow_model_within_its_deadlines_finishes_the_session(
    agentd, invoices: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with serving(monkeypatch, delay=0.2) as server:
        server.queue(
            server.tool_calls(("read_invoice", {"number": "21"})),
            server.tool_calls(("pay", {"to": "acme", "amount": "5", "invoice": "21"})),
            server.text("Paid 5 USD to acme."),
        )
        s = run_json(agentd)
    assert (s["ended"], s["answer"]) == ("done", "Paid 5 USD to acme.")
    shown = json.loads(agentd("sessions", "show", s["id"], "--json").out)
    assert shown["turns"] == 3
    assert [t["call"] for t in shown["timings"]] == ["model", "tool", "model", "tool", "model"]
    assert json.loads((invoices / "book.json").read_text())["payments"] == [
        {"to": "acme", "amount": "5", "invoice": "21"}
    ]


def test_a_model_trickling_its_answer_is_cut_off_at_the_calls_deadline_and_the_session_errors(
    agentd, invoices: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    set_limits(invoices, f"call_seconds = {CALL}")
    with serving(monkeypatch) as server:
        server.answer_with(lambda request: replace(server.text("Paid."), trickle=SLOWLY))  # minutes of bytes
        r = agentd("run", "invoices", TASK)
        assert len(server.requests) == 1  # cut off, not tried again
    assert r.code == 0 and "Traceback" not in r.err
    said = r.err.splitlines()
    assert (
        said[0]
        == f"agentd: the session errored: the model did not answer within {CALL:g} seconds (the call's limit, call_seconds)"
    )
    assert said[1].startswith("session ") and ": errored, 1 turns, 0 tokens; on the ledger at Pulse" in said[1]
    [s] = json.loads(agentd("sessions", "list", "--json").out)
    assert (s["ended"], s["outcome"]) == ("errored", "errored")  # the provider's time-out: never scored
    shown = json.loads(agentd("sessions", "show", s["id"], "--json").out)
    [call] = shown["timings"]  # the call cut off is in the session's time
    assert (call["call"], call["model"], call["error"]) == ("model", "openai:m", shown["error"])
    assert call["seconds"] >= CALL
    assert seconds_between(shown["started"], shown["ended_at"]) >= CALL


def test_a_live_sessions_wall_time_counts_the_models_time(
    agentd, invoices: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    toml = invoices / "profile.toml"  # the call's own deadline stays the default, minutes
    toml.write_text(toml.read_text().replace(f"wall_seconds = {WALL}\n", "wall_seconds = 3\n"))
    with serving(monkeypatch, delay=WAIT):
        s = run_json(agentd)
    assert (s["ended"], s["outcome"]) == ("errored", "errored")
    assert s["error"] == "the session's wall time of 3 seconds (wall_seconds) ran out while the model was answering"
    shown = json.loads(agentd("sessions", "show", s["id"], "--json").out)
    assert seconds_between(shown["started"], shown["ended_at"]) >= 3


def test_a_scripted_model_slower_than_the_calls_deadline_is_cut_off_too(agentd, invoices: Path) -> None:
    rules = invoices / "models" / "agent.toml"
    rules.write_text(rules.read_text().replace("turn = 1\n", "turn = 1\ndelay = 600\n", 1))
    set_limits(invoices, f"call_seconds = {CALL}")
    toml = invoices / "profile.toml"
    toml.write_text(toml.read_text().replace('models = ["openai:m"]', 'models = ["script:models/agent.toml"]'))
    s = run_json(agentd)
    assert (s["ended"], s["outcome"]) == ("errored", "errored")
    assert s["error"] == f"the model did not answer within {CALL:g} seconds (the call's limit, call_seconds)"


@pytest.mark.parametrize(
    "setting, complaint",
    [
        ("call_seconds = 0", "[limits] call_seconds must be a number above 0, not 0"),
        ('call_seconds = "soon"', "[limits] call_seconds must be a number above 0, not 'soon'"),
        ("call_tokens = 2.5", "[limits] call_tokens must be a whole number above 0, not 2.5"),
        ("call_tokens = -1", "[limits] call_tokens must be a whole number above 0, not -1"),
    ],
)
def test_a_bad_deadline_or_token_cap_is_one_line_naming_the_file(
    agentd, invoices: Path, setting: str, complaint: str
) -> None:
    set_limits(invoices, setting)
    r = agentd("run", "invoices", TASK)
    assert r.code == 1 and r.err.splitlines() == [f"agentd: error: {invoices / 'profile.toml'}: {complaint}"]
    assert json.loads(agentd("sessions", "list", "--json").out) == []


def seconds_between(started: str, ended: str) -> float:
    return (datetime.fromisoformat(ended) - datetime.fromisoformat(started)).total_seconds()


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
