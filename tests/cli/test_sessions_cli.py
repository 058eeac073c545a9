"""Live sessions, their records on the ledger, marks, imports and the kill switch, as a user runs them."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from agentd.home import Home
from agentd.sessions import SessionRecord, SessionStore
from tests.cli.test_wallet_cli import one_error_line

GOOD = "Pay invoice 21 from Acme, 5 USD, to acme."
BAD = "Pay invoice 31 from Globex, 8 USD, to globex."


@pytest.fixture
def invoices(agentd, home: Home) -> Path:
    r = agentd("init", "--example", "invoices")
    assert r.code == 0, r.err
    return home.profiles_dir / "invoices"


def run_json(agentd, *args: str) -> dict:
    r = agentd("run", *args, "--json")
    assert r.code == 0, r.err
    return json.loads(r.out)


def ledger_kinds(agentd) -> list[str]:
    r = agentd("ledger", "log", "--json")
    assert r.code == 0, r.err
    return [entry["kind"] for entry in json.loads(r.out)]


def test_a_live_session_pays_and_is_recorded_on_the_ledger(agentd, invoices: Path) -> None:
    r = agentd("run", "invoices", GOOD)
    assert r.code == 0, r.err
    assert r.out.strip() == "Paid 5 USD to acme."
    book = json.loads((invoices / "book.json").read_text())
    assert book["payments"] == [{"to": "acme", "amount": "5", "invoice": "21"}]
    assert "agent.session/v1" in ledger_kinds(agentd)

    listed = json.loads(agentd("sessions", "list", "--json").out)
    assert [(s["profile"], s["ended"], s["outcome"]) for s in listed] == [("invoices", "done", "unknown")]
    shown = json.loads(agentd("sessions", "show", listed[0]["id"][:8], "--json").out)
    assert shown["task"] == GOOD
    assert [m["role"] for m in shown["transcript"]] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert shown["tokens"]["in"] > 0 and shown["tokens"]["out"] > 0
    assert shown["person_messages"] == 1 and shown["compacted"] is False
    assert {t["call"] for t in shown["timings"]} == {"model", "tool"}
    entry = json.loads(agentd("ledger", "show", str(shown["pulse"]), "--json").out)
    assert entry["body"]["session"] == shown["id"]
    assert entry["body"]["digest"] == SessionStore(Home(invoices.parent.parent)).get(shown["id"]).digest()
    assert "transcript" not in entry["body"]


def test_verify_decides_the_outcome_of_a_finished_session(agentd, invoices: Path) -> None:
    good = run_json(agentd, "invoices", GOOD, "--verify", f"python3 {invoices / 'check.py'}")
    bad = run_json(agentd, "invoices", BAD, "--verify", f"python3 {invoices / 'check.py'}")
    assert (good["check"], good["outcome"]) == ("passed", "good")
    assert (bad["check"], bad["outcome"]) == ("failed", "bad")
    assert [s["id"] for s in json.loads(agentd("sessions", "list", "--outcome", "bad", "--json").out)] == [bad["id"]]
    body = json.loads(agentd("ledger", "show", str(bad["pulse"]), "--json").out)["body"]
    assert body["check"] == "failed"


def test_marks_supersede_and_both_stay_on_the_ledger(agentd, invoices: Path) -> None:
    session = run_json(agentd, "invoices", BAD)["id"]
    r = agentd("improve", "mark", session[:10], "--bad", "--note", "paid the payee the invoice named")
    assert r.code == 0, r.err
    assert r.out.strip() == f"session {session} marked as having gone badly"
    r = agentd("improve", "mark", session, "--good")
    assert r.out.strip() == f"session {session} marked as having gone well"
    assert ledger_kinds(agentd).count("agent.mark/v1") == 2
    assert json.loads(agentd("sessions", "show", session, "--json").out)["mark"] == "good"


def test_an_errored_session_is_kept_apart_and_cannot_be_marked(agentd, invoices: Path) -> None:
    (invoices / "models" / "flaky.toml").write_text('[[rule]]\nerror = "provider"\n')
    toml = invoices / "profile.toml"
    toml.write_text(
        toml.read_text().replace(
            'models = ["script:models/agent.toml"]', 'models = ["script:models/agent.toml", "script:models/flaky.toml"]'
        )
    )
    s = run_json(agentd, "invoices", GOOD, "--model", "script:models/flaky.toml")
    assert (s["ended"], s["outcome"]) == ("errored", "errored")
    r = agentd("improve", "mark", s["id"], "--bad")
    assert r.code == 1 and "cannot be marked" in r.err and "Traceback" not in r.err
    assert json.loads(agentd("sessions", "list", "--outcome", "bad", "--json").out) == []
    assert [x["id"] for x in json.loads(agentd("sessions", "list", "--outcome", "errored", "--json").out)] == [s["id"]]


def test_a_model_the_profile_may_not_run_on_is_refused(agentd, invoices: Path) -> None:
    r = agentd("run", "invoices", GOOD, "--model", "openai:gpt-9")
    assert r.code == 1 and "not among the models" in r.err


def test_import_a_foreign_transcript(agentd, invoices: Path, tmp_path: Path) -> None:
    call = {"id": "x1", "type": "function", "function": {"name": "pay", "arguments": '{"to": "eve", "amount": "3"}'}}
    doc = {
        "messages": [
            {"role": "system", "content": "You pay invoices."},
            {"role": "user", "content": "Pay invoice 34 from Hooli, 3 USD, to hooli."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "x1", "content": "paid"},
            {"role": "assistant", "content": "Paid eve."},
        ],
        "tools": [
            {"type": "function", "function": {"name": "pay", "parameters": {"type": "object"}}},
            {"type": "function", "function": {"name": "refund", "parameters": {"type": "object"}}},
        ],
    }
    other = {**doc, "metadata": {"check": "failed"}}
    path = tmp_path / "foreign.jsonl"
    path.write_text(json.dumps(doc) + "\n" + json.dumps(other) + "\n")
    r = agentd("sessions", "import", str(path), "--profile", "invoices", "--json")
    assert r.code == 0, r.err
    imported = json.loads(r.out)
    assert len(imported) == 2 and all(s["ended"] == "done" for s in imported)
    assert "'refund' is not in profile 'invoices'" in r.err
    shown = json.loads(agentd("sessions", "show", imported[0]["id"], "--json").out)
    assert shown["source"] == "import" and shown["task"].startswith("Pay invoice 34")
    assert {t["name"]: t["changes"] for t in shown["tools"]} == {"pay": True, "refund": True}
    assert ledger_kinds(agentd).count("agent.session/v1") == 2


@pytest.mark.parametrize(
    "content, expected",
    [
        ("{not json\n{also not\n", "line 1: not JSON"),
        (json.dumps({"messages": [{"role": "wizard"}]}), "message 0 has no role"),
        (json.dumps({"messages": [{"role": "assistant", "content": "hi"}]}), "no user message"),
    ],
)
def test_a_bad_import_file_imports_nothing(agentd, invoices: Path, tmp_path: Path, content: str, expected: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    r = agentd("sessions", "import", str(path), "--profile", "invoices")
    assert r.code == 1 and expected in r.err and "Traceback" not in r.err
    assert json.loads(agentd("sessions", "list", "--json").out) == []


def test_unknown_and_ambiguous_session_ids(agentd, invoices: Path, home: Home) -> None:
    store = SessionStore(home)
    for sid in ("abcd" + "0" * 28, "abcd" + "1" * 28):
        store.add(
            SessionRecord(
                id=sid, profile="invoices", task="t", started_at="x", ended_at="x", ended="done", claim_id=sid * 2
            )
        )
    assert one_error_line(agentd("sessions", "show", "abcd"), code=2).endswith("is ambiguous: give more characters")
    r = agentd("sessions", "show", "ffff0000")
    assert r.code == 1 and "no session 'ffff0000'" in r.err
    r = agentd("improve", "mark", "ffff0000", "--good")
    assert r.code == 1 and "no session" in r.err


def test_the_kill_switch_stops_sessions_from_starting(agentd, invoices: Path) -> None:
    assert agentd("kill-switch", "on", "--reason", "audit").code == 0
    assert "on" in agentd("kill-switch", "status").out
    r = agentd("run", "invoices", GOOD)
    assert r.code == 1 and "kill switch is on" in r.err
    assert json.loads(agentd("sessions", "list", "--json").out) == []
    agentd("kill-switch", "off")
    assert agentd("run", "invoices", GOOD).code == 0


def test_a_session_holding_a_secret_is_flagged_and_the_secret_kept_out(agentd, invoices: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-verysecret-123")
    s = run_json(agentd, "invoices", "Pay invoice 21 from Acme, 5 USD, to acme. My key is sk-test-verysecret-123")
    shown = json.loads(agentd("sessions", "show", s["id"], "--json").out)
    assert shown["secrets"] == ["OPENAI_API_KEY"]
    assert "sk-test-verysecret-123" not in json.dumps(shown)
    r = agentd("ledger", "export", str(invoices / "copy.jsonl"))
    assert r.code == 0, r.err
    assert b"verysecret" not in (invoices / "copy.jsonl").read_bytes()


@pytest.mark.parametrize("where", ["AGENTD_LOG_PASSPHRASE", "AGENTD_INTAKE_TOKEN", "[serve] intake_token"])
def test_the_log_keys_passphrase_and_the_intake_token_are_secrets_too(
    agentd, home: Home, invoices: Path, monkeypatch, where: str
) -> None:
    secret = "not-for-transcripts-4711"
    if where.startswith("["):
        home.config_path.write_text(home.config_path.read_text() + f'\n[serve]\nintake_token = "{secret}"\n')
    else:
        monkeypatch.setenv(where, secret)
    if where == "AGENTD_LOG_PASSPHRASE":
        assert agentd("wallet", "seal-log-key").code == 0  # the key init made, sealed with it
    s = run_json(agentd, "invoices", f"Pay invoice 21 from Acme, 5 USD, to acme. The token is {secret}")
    shown = json.loads(agentd("sessions", "show", s["id"], "--json").out)
    assert shown["secrets"] == [where] and secret not in json.dumps(shown)
    assert agentd("ledger", "export", str(invoices / "copy.jsonl")).code == 0
    assert secret.encode() not in (invoices / "copy.jsonl").read_bytes()


KEY = "sk-test-VerySecret-123"


@pytest.mark.parametrize(
    "written",
    [
        KEY.lower(),
        KEY.upper(),
        " ".join(KEY),
        base64.b64encode(KEY.encode()).decode(),
        base64.b64encode(b"key=" + KEY.encode()).decode(),  # inside a longer text, at another offset
        base64.urlsafe_b64encode(b"\xfb\xff" + KEY.encode()).decode(),
        KEY.encode().hex(),
        KEY.encode().hex().upper(),
        KEY.replace("-", "%2d"),  # in part
        "".join(f"%{b:02X}" for b in KEY.encode()),
    ],
    ids=[
        "lower",
        "upper",
        "spaced",
        "base64",
        "base64 at an offset",
        "url-safe base64",
        "hex",
        "HEX",
        "url-encoded in part",
        "all url-encoded",
    ],
)
def test_a_secret_however_it_is_written_is_flagged_kept_out_and_not_exported(
    agentd, invoices: Path, monkeypatch, tmp_path: Path, written: str
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    s = run_json(agentd, "invoices", f"Pay invoice 21 from Acme, 5 USD, to acme. The note says {written} .")
    shown = json.loads(agentd("sessions", "show", s["id"], "--json").out)
    assert shown["secrets"] == ["OPENAI_API_KEY"] and "[redacted: OPENAI_API_KEY]" in shown["task"]
    assert written not in json.dumps(shown)
    assert agentd("improve", "export", "invoices", "--out", str(tmp_path / "train")).code == 0
    assert (tmp_path / "train" / "sft.jsonl").read_text() == ""


def test_every_session_of_a_confidential_profile_is_flagged(agentd, invoices: Path) -> None:
    toml = invoices / "profile.toml"
    toml.write_text(toml.read_text().replace("confidential = false", "confidential = true"))
    s = run_json(agentd, "invoices", GOOD)
    assert json.loads(agentd("sessions", "show", s["id"], "--json").out)["confidential"] is True


def test_provider_faults_in_a_profile_are_one_clear_line(agentd, invoices: Path) -> None:
    toml = invoices / "profile.toml"
    toml.write_text(toml.read_text().replace('"script:models/agent.toml"', '"nosuch:model"'))
    r = agentd("run", "invoices", GOOD)
    assert r.code == 1 and "nosuch" in r.err and "Traceback" not in r.err
    toml.write_text(toml.read_text().replace('"nosuch:model"', '"openai:gpt-4o-mini"'))
    r = agentd("run", "invoices", GOOD)
    assert r.code == 1 and "OPENAI_API_KEY" in r.err


def test_profile_new_and_show(agentd, home: Home) -> None:
    r = agentd("profile", "new", "helper", "--operator", "You help.", "--model", "openai:gpt-4o-mini")
    assert r.code == 0, r.err
    shown = json.loads(agentd("profile", "show", "helper", "--json").out)
    assert shown["operator"] == "You help." and shown["models"] == ["openai:gpt-4o-mini"]
    assert "helper" in agentd("wallet", "list").out
    r = agentd("profile", "show", "ghost")
    assert r.code == 1 and "no profile named 'ghost'" in r.err


def _transcript(**changes) -> dict:
    """A well-formed transcript to import, with one part of it replaced."""
    call = {"id": "x1", "type": "function", "function": {"name": "pay", "arguments": '{"to": "hooli", "amount": "3"}'}}
    doc = {
        "messages": [
            {"role": "user", "content": "Pay invoice 34 from Hooli, 3 USD, to hooli."},
            {"role": "assistant", "content": None, "tool_calls": [call]},
            {"role": "tool", "tool_call_id": "x1", "content": "paid"},
            {"role": "assistant", "content": "Paid."},
        ],
        "tools": [{"type": "function", "function": {"name": "pay", "parameters": {"type": "object"}}}],
        "metadata": {"ended": "done"},
    }
    for path, value in changes.items():
        *parents, last = path.split("__")
        target = doc
        for key in parents:
            target = target[int(key)] if isinstance(target, list) else target[key]
        target[int(last) if isinstance(target, list) else last] = value
    return doc


@pytest.mark.parametrize(
    "changes, expected",
    [
        ({"metadata": "x"}, 'metadata must be a JSON object such as {"ended": "done"}, not "x"'),
        ({"tools": 5}, "tools must be a list of"),
        ({"tools": ["pay"]}, "tool 0 is not"),
        ({"tools__0__function__parameters": "none"}, "tool 0 (pay): its description must be text and its parameters"),
        ({"metadata": {"models": 5}}, "metadata.models must be a list of model names, not 5"),
        ({"metadata": {"compacted": "no"}}, 'metadata.compacted must be true or false, not "no"'),
        ({"messages__1__tool_calls": ["pay"]}, "message 1 has tool call 0 that is not"),
        ({"messages__1__tool_calls": {"id": "x1"}}, "message 1 has tool_calls that are not a list"),
        ({"messages__1__tool_calls__0__function__arguments": {"to": "hooli"}}, "message 1 has tool call 0 that is not"),
        ({"messages__1__tool_calls__0__type": "code"}, "message 1 has tool call 0 that is not"),
        ({"messages__2__tool_call_id": None}, "message 2 is a tool message without a tool_call_id"),
        ({"messages__2__content": None}, "message 2 is a tool message without content"),
        ({"messages__3__content": 5}, "message 3 has content that is neither text"),
    ],
)
def test_a_malformed_transcript_is_refused_naming_the_file_line_and_message(
    agentd, invoices: Path, tmp_path: Path, changes: dict, expected: str
) -> None:
    path = tmp_path / "foreign.jsonl"
    path.write_text(json.dumps(_transcript()) + "\n" + json.dumps(_transcript(**changes)) + "\n")
    r = agentd("sessions", "import", str(path), "--profile", "invoices")
    assert r.code == 1 and "Traceback" not in r.err
    assert r.err.startswith(f"agentd: error: {path}:2: ") and expected in r.err, r.err
    assert json.loads(agentd("sessions", "list", "--json").out) == []


def test_a_transcript_without_a_canonical_form_is_refused_before_anything_is_kept(
    agentd, invoices: Path, tmp_path: Path
) -> None:
    path = tmp_path / "foreign.json"
    path.write_text(json.dumps(_transcript()).replace('"content": "paid"', '"content": "paid", "cost": NaN'))
    r = agentd("sessions", "import", str(path), "--profile", "invoices")
    assert r.code == 1 and "the transcript cannot be recorded" in r.err and "Traceback" not in r.err
    assert json.loads(agentd("sessions", "list", "--json").out) == []


@pytest.mark.parametrize("prefix", ["____", "%%%%", "ab_d", "abc%"])
def test_a_session_id_that_is_not_hex_is_refused_and_never_a_pattern(
    agentd, invoices: Path, home: Home, prefix: str
) -> None:
    store = SessionStore(home)
    store.add(
        SessionRecord(
            id="abcd" + "0" * 28,
            profile="invoices",
            task="t",
            started_at="x",
            ended_at="x",
            ended="done",
            claim_id="ab" * 32,
        )
    )
    r = agentd("sessions", "show", prefix)
    assert r.code == 2 and f"session id {prefix!r} is not hexadecimal" in r.err
    r = agentd("improve", "mark", prefix, "--bad")
    assert r.code == 2 and "is not hexadecimal" in r.err
    assert "agent.mark/v1" not in ledger_kinds(agentd)


@pytest.mark.parametrize(
    "kind, body, expected",
    [
        ("agent.mark/v1", {"session": ["ab"], "outcome": "bad"}, "session must be a 32-hex id"),
        ("agent.mark/v1", {"session": {"a": 1}, "outcome": "bad"}, "session must be a 32-hex id"),
        (
            "agent.session/v1",
            {"session": "ab" * 16, "profile": "p", "digest": "cd" * 32, "ended": ["done"]},
            "ended must be one of",
        ),
        (
            "agent.session/v1",
            {"session": "ab" * 16, "profile": "p", "digest": "cd" * 32, "ended": "done", "check": {}},
            "check must be passed, failed or null",
        ),
    ],
)
def test_session_and_mark_rules_refuse_a_field_of_the_wrong_kind(kind: str, body: dict, expected: str) -> None:
    from agentd.app.ledger import rule_set
    from ledger import Entry, RuleViolation, State, Wallet

    with pytest.raises(RuleViolation, match=expected):
        rule_set().apply(State(size=1), Entry.create(Wallet.generate(), kind, body, log="test.example/log", seq=1))
