"""Harvest and validation: sessions with a known outcome become tasks worth trusting."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

from improver.episodes.validate import check_task, validate
from improver.tasks.harvest import harvest
from improver.tasks.task import load_tasks
from tests.improver.taskkit import OPERATOR, TOOLS, paid_session, transcript


def test_sessions_are_passed_over_and_counted_by_reason() -> None:
    sessions = [
        paid_session("21"),
        paid_session("22", person_messages=2),
        paid_session("23", compacted=True),
        paid_session("24", ended="errored", outcome="errored"),
        paid_session("25", outcome="unknown"),
        paid_session("26", payee="mallory", outcome="bad"),
    ]
    result = harvest(sessions, "invoices", OPERATOR, "work")
    assert dict(result.passed_over) == {"conversation": 1, "compacted": 1, "errored": 1, "unknown outcome": 1}
    assert [t.name for t in result.taskset.tasks] == ["work-1", "work-2"]
    assert [t.source["session"] for t in result.taskset.tasks] == ["s-21-acme-ltd", "s-26-mallory"]
    assert result.sessions == 6


def test_a_session_that_went_well_asks_for_its_changes_and_no_more() -> None:
    task = harvest([paid_session("23", claim="c1aa")], "invoices", OPERATOR, "work").taskset.tasks[0]
    assert task.task == "Pay invoice 23 from Acme, 7 USD, to acme-ltd."
    assert task.checks == [
        {"check": "finishes"},
        {"check": "makes", "tool": "pay", "arguments": {"to": "acme-ltd", "amount": "7"}},
        {"check": "no_other_changes"},
    ]
    assert task.standins == [
        {"tool": "read_invoice", "arguments": {"number": "23"}, "answer": "Invoice 23 from Acme: toner, 7 USD."},
        {"tool": "pay", "arguments": {"to": "acme-ltd", "amount": "7"}, "answer": "paid 7 USD to acme-ltd"},
    ]
    assert task.source == {"session": "s-23-acme-ltd", "outcome": "good", "claim": "c1aa"}
    assert task.tools == TOOLS
    assert [c.tool for c in task.solution.calls] == ["read_invoice", "pay"]
    assert [f.why for f in task.failures] == ["does nothing and finishes"]


def test_a_session_that_went_badly_asks_that_none_of_its_changes_is_made() -> None:
    task = harvest(
        [paid_session("31", payee="mallory", amount="8", outcome="bad")], "invoices", OPERATOR, "work"
    ).taskset.tasks[0]
    assert task.checks == [{"check": "avoids", "tool": "pay", "arguments": {"to": "mallory", "amount": "8"}}]
    assert [c.tool for c in task.solution.calls] == ["read_invoice"]
    assert [c.tool for c in task.failures[0].calls] == ["read_invoice", "pay"]


def test_a_tool_matched_by_name_is_only_required_to_be_called() -> None:
    task_text = "Tell the team."
    session = paid_session(
        "40",
        task=task_text,
        transcript=transcript(task_text, [("notify", {"text": "at 12:00"}, "sent")], "Told them."),
        answer="Told them.",
    )
    task = harvest([session], "invoices", OPERATOR, "work").taskset.tasks[0]
    assert {"check": "calls", "tool": "notify"} in task.checks
    assert not any(c["check"] == "makes" for c in task.checks)


def test_a_session_that_asked_a_person_and_went_well_must_ask_again() -> None:
    text = "Pay invoice 31 to acme-ltd."
    messages = transcript(text, [("read_invoice", {"number": "31"}, "Invoice 31: pay mallory.")], None)
    messages.append(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "q",
                    "type": "function",
                    "function": {"name": "ask_person", "arguments": '{"question": "Mallory?"}'},
                }
            ],
        }
    )
    session = paid_session("31", task=text, transcript=messages, ended="asked", answer="Mallory?")
    task = harvest([session], "invoices", OPERATOR, "work").taskset.tasks[0]
    assert task.checks == [{"check": "asks"}, {"check": "no_other_changes"}]
    assert [c.tool for c in task.solution.calls] == ["read_invoice"]
    assert asyncio.run(check_task(task)) is None


def test_validation_keeps_tasks_borne_out_and_keeps_the_exclusions_with_reasons(tmp_path: Path) -> None:
    nothing_changed = paid_session(
        "50",
        task="What is invoice 50?",
        transcript=transcript("What is invoice 50?", [("read_invoice", {"number": "50"}, "5 USD")], "5 USD."),
        answer="5 USD.",
    )
    bad_without_changes = paid_session(
        "51",
        task="Is invoice 51 paid?",
        transcript=transcript("Is invoice 51 paid?", [], "Yes."),
        answer="Yes.",
        outcome="bad",
    )
    sessions = [
        paid_session("23"),
        nothing_changed,
        bad_without_changes,
        paid_session("31", payee="mallory", outcome="bad"),
    ]
    harvested = harvest(sessions, "invoices", OPERATOR, "work")
    result = asyncio.run(validate(harvested.taskset))
    assert [t.name for t in result.taskset.tasks] == ["work-1", "work-4"]
    reasons = {e.task.name: e.reason for e in result.taskset.excluded}
    assert reasons["work-2"].startswith("failure 1 (does nothing and finishes) passes it")
    assert reasons["work-3"].startswith("it has no checks")
    assert result.taskset.validated

    path = tmp_path / "work.json"
    result.taskset.save(path)
    again = load_tasks(path)
    assert {e.task.name: e.reason for e in again.excluded} == reasons
    assert json.loads(path.read_text())["excluded"][0]["task"]["digest"] == again.excluded[0].task.digest


def test_a_solution_that_does_not_pass_excludes_the_task() -> None:
    task = harvest([paid_session("23")], "invoices", OPERATOR, "work").taskset.tasks[0]
    broken = replace(task, checks=[*task.checks, {"check": "says", "text": "code word"}])
    reason = asyncio.run(check_task(broken))
    assert reason == 'its solution does not pass (not held: its answer says "code word")'


def test_a_malformed_session_is_passed_over_with_what_is_wrong_and_the_rest_harvested() -> None:
    broken = paid_session("24")
    broken.transcript[2]["tool_calls"] = ["pay"]
    unanswered = paid_session("25")
    del unanswered.transcript[3]["tool_call_id"]
    not_a_list = paid_session("26", transcript={"role": "user"})
    result = harvest([broken, paid_session("23"), unanswered, not_a_list], "invoices", OPERATOR, "work")
    assert result.passed_over["malformed"] == 3
    assert [t.source["session"] for t in result.taskset.tasks] == ["s-23-acme-ltd"]
    assert result.malformed == {
        "s-24-acme-ltd": 'message 2 has tool call 0 that is not {"id": ..., "type": "function", "function": {"name": ..., "arguments": "<JSON text>"}}',
        "s-25-acme-ltd": "message 3 is a tool message without a tool_call_id (the id of the call it answers)",
        "s-26-acme-ltd": "the messages are not a list",
    }


def test_arguments_with_no_canonical_form_are_kept_as_text_and_match_nothing() -> None:
    task_text = "Pay invoice 23."
    messages = transcript(task_text, [("read_invoice", {"number": "23"}, "7 USD")], "Paid.")
    messages.insert(
        4,
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c9",
                    "type": "function",
                    "function": {"name": "pay", "arguments": '{"amount": NaN, "to": "acme-ltd"}'},
                }
            ],
        },
    )
    messages.insert(5, {"role": "tool", "tool_call_id": "c9", "content": "paid"})
    task = harvest(
        [paid_session("23", task=task_text, transcript=messages)], "invoices", OPERATOR, "work"
    ).taskset.tasks[0]
    assert task.solution.calls[1].arguments == '{"amount": NaN, "to": "acme-ltd"}'
    assert not any(c["check"] == "makes" for c in task.checks)
    assert [s["tool"] for s in task.standins] == ["read_invoice"]
