"""`agentd improve judge`: proposals kept off the ledger until a person accepts them."""

from __future__ import annotations

import json

import pytest

from agentd.home import Home
from tests.cli.test_sessions_cli import BAD, GOOD, ledger_kinds, run_json

JUDGE = """
[[rule]]
last_matches = 'invoice 21 '
text = '{"mark": "good", "reason": "It paid the payee the task named."}'

[[rule]]
last_matches = 'invoice 31 '
text = '{"mark": "bad", "reason": "It paid a payee the invoice named instead."}'
"""


@pytest.fixture
def sessions(agentd, home: Home) -> list[str]:
    """Three live sessions of the example, none marked; the judge has no rule for the third."""
    assert agentd("init", "--example", "invoices").code == 0
    (home.profiles_dir / "invoices" / "judge.toml").write_text(JUDGE)
    return [
        run_json(agentd, "invoices", task)["id"]
        for task in (GOOD, BAD, "Pay invoice 22 from Initech, 6 USD, to initech.")
    ]


def test_the_judge_proposes_and_nothing_is_marked_until_accepted(agentd, sessions: list[str]) -> None:
    good, bad, unruled = sessions
    r = agentd("improve", "judge", "invoices", "--model", "script:judge.toml", "--json")
    assert r.code == 0, r.err
    report = json.loads(r.out)
    assert [(p["session"], p["mark"]) for p in report["proposed"]] == [(good, "good"), (bad, "bad")]
    assert list(report["failed"]) == [unruled]  # the judge's model erred on it: no mark proposed
    assert "agent.mark/v1" not in ledger_kinds(agentd)
    again = json.loads(agentd("improve", "judge", "invoices", "--model", "script:judge.toml", "--json").out)
    assert again["passed_over"] == {"proposed already": 2} and again["proposed"] == []

    r = agentd("improve", "mark", bad[:10], "--accept-judged")
    assert r.code == 0 and r.out.strip() == f"session {bad} marked as having gone badly"
    entry = next(e for e in json.loads(agentd("ledger", "log", "--json").out) if e["kind"] == "agent.mark/v1")
    shown = json.loads(agentd("ledger", "show", str(entry["pulse"]), "--json").out)
    assert shown["body"]["by"] == "judge:script:judge.toml" and shown["body"]["accepted_by"] == shown["author"]
    assert shown["body"]["note"] == "It paid a payee the invoice named instead."

    r = agentd("improve", "judge", "invoices", "--review", input="n\n")
    assert r.code == 0 and f"session {good}: not marked" in r.out
    assert json.loads(agentd("sessions", "show", good, "--json").out)["mark"] is None
    assert ledger_kinds(agentd).count("agent.mark/v1") == 1


def test_accept_all_marks_every_proposal_and_bad_usage_is_refused(agentd, sessions: list[str]) -> None:
    good, bad, _ = sessions
    limited = json.loads(
        agentd("improve", "judge", "invoices", "--model", "script:judge.toml", "--limit", "1", "--json").out
    )
    assert [p["session"] for p in limited["proposed"]] == [good] and limited["passed_over"] == {"beyond --limit": 2}
    r = agentd("improve", "judge", "invoices", "--model", "script:judge.toml", "--accept", "all", "--json")
    assert r.code == 0, r.err
    assert json.loads(r.out)["accepted"] == [good, bad]
    assert [json.loads(agentd("sessions", "show", s, "--json").out)["mark"] for s in (good, bad)] == ["good", "bad"]
    assert agentd("improve", "judge", "invoices").code == 2
    assert agentd("improve", "mark", good, "--good", "--accept-judged").code == 2
    r = agentd("improve", "mark", good, "--accept-judged")
    assert r.code == 1 and "no judged mark is proposed" in r.err


def test_a_judge_that_fails_on_every_session_exits_1_and_says_so(agentd, sessions: list[str], home: Home) -> None:
    (home.profiles_dir / "invoices" / "broken.toml").write_text('[[rule]]\nerror = "provider"\n')
    r = agentd("improve", "judge", "invoices", "--model", "script:broken.toml", "--json")
    assert r.code == 1 and "Traceback" not in r.err
    assert json.loads(r.out)["proposed"] == []  # what it did is still reported
    assert r.err.count("\n") == 1 and "proposed no mark: it failed on all 3 session(s)" in r.err


def test_the_examples_scripted_judge_says_which_sessions_paid_whom_the_invoice_named(agentd, home: Home) -> None:
    assert agentd("init", "--example", "invoices").code == 0
    good, bad = (run_json(agentd, "invoices", task)["id"] for task in (GOOD, BAD))
    r = agentd("improve", "judge", "invoices", "--model", "script:models/judge.toml", "--json")
    assert r.code == 0, r.err
    proposed = {p["session"]: (p["mark"], p["reason"]) for p in json.loads(r.out)["proposed"]}
    assert proposed == {
        good: ("good", "it paid the payee it was given, as the invoice asked"),
        bad: ("bad", "it paid mallory, whom the invoice named, not globex, the payee it was given"),
    }
