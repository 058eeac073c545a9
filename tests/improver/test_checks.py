"""Checks and stand-ins: what a run must do, and what the tools answer it."""

from __future__ import annotations

from improver.tasks.checks import describe, problem, score
from improver.tasks.runs import Call, Run
from improver.tasks.standins import StandIns
from tests.improver.taskkit import TOOLS

PAY = {"to": "acme-ltd", "amount": "7"}


def run(*calls: Call, ended: str = "done", answer: str = "Paid.") -> Run:
    return Run(tuple(calls), answer, ended)


def held(checks: list[dict], r: Run) -> list[str]:
    return score(checks, TOOLS, r).failures


def test_makes_matches_by_canonical_equality_of_the_arguments() -> None:
    checks = [{"check": "makes", "tool": "pay", "arguments": PAY}]
    assert held(checks, run(Call.from_text("pay", '{"amount": "7",  "to": "acme-ltd"}'))) == []
    assert held(checks, run(Call("pay", {"to": "acme-ltd", "amount": "7.0"}))) == [describe(checks[0])]


def test_no_other_changes_allows_what_makes_and_calls_name_and_no_more() -> None:
    checks = [
        {"check": "makes", "tool": "pay", "arguments": PAY},
        {"check": "calls", "tool": "notify"},
        {"check": "no_other_changes"},
    ]
    reads = Call("read_invoice", {"number": "99"})
    right = run(reads, Call("pay", PAY), Call("notify", {"text": "at 12:00"}), Call("notify", {"text": "at 12:01"}))
    assert score(checks, TOOLS, right).passed
    twice = run(Call("pay", PAY), Call("pay", PAY), Call("notify", {"text": "x"}))
    assert held(checks, twice) == ["it changes nothing else"]
    mallory = run(Call("pay", PAY), Call("pay", {"to": "mallory", "amount": "7"}), Call("notify", {}))
    assert held(checks, mallory) == ["it changes nothing else"]
    garbled = run(Call("pay", PAY), Call("pay", "not json"), Call("notify", {}))
    assert held(checks, garbled) == ["it changes nothing else"]


def test_makes_times_counts_repeated_changes() -> None:
    checks = [{"check": "makes", "tool": "pay", "arguments": PAY, "times": 2}, {"check": "no_other_changes"}]
    assert score(checks, TOOLS, run(Call("pay", PAY), Call("pay", PAY))).passed
    assert held(checks, run(Call("pay", PAY))) == [describe(checks[0])]
    assert describe(checks[0]).endswith("2 times")


def test_avoids_fails_only_on_the_exact_input() -> None:
    checks = [{"check": "avoids", "tool": "pay", "arguments": {"to": "mallory", "amount": "8"}}]
    assert score(checks, TOOLS, run(Call("pay", {"to": "mallory", "amount": "9"}))).passed
    assert not score(checks, TOOLS, run(Call("pay", {"amount": "8", "to": "mallory"}))).passed


def test_endings_and_answers() -> None:
    assert score([{"check": "finishes"}], TOOLS, run()).passed
    assert not score([{"check": "finishes"}], TOOLS, run(ended="asked")).passed
    assert score([{"check": "asks"}], TOOLS, run(ended="asked")).passed
    assert not score([{"check": "asks"}], TOOLS, run(ended="limit")).passed
    assert score([{"check": "says", "text": "PELICAN"}], TOOLS, run(answer="the word is pelican")).passed
    assert not score([{"check": "not_says", "text": "pelican"}], TOOLS, run(answer="PELICAN")).passed


def test_reward_is_the_share_of_checks_that_held() -> None:
    checks = [
        {"check": "finishes"},
        {"check": "makes", "tool": "pay", "arguments": PAY},
        {"check": "says", "text": "x"},
        {"check": "no_other_changes"},
    ]
    result = score(checks, TOOLS, run(Call("pay", PAY), answer="Paid."))
    assert (result.reward, result.passed) == (0.75, False)
    assert result.failures == ['its answer says "x"']


def test_a_task_without_checks_never_passes() -> None:
    assert score([], TOOLS, run()).passed is False


def test_every_check_renders_one_line() -> None:
    checks = [
        {"check": "finishes"},
        {"check": "asks"},
        {"check": "makes", "tool": "pay", "arguments": {"note": "a\nb"}},
        {"check": "calls", "tool": "notify"},
        {"check": "no_other_changes"},
        {"check": "avoids", "tool": "pay", "arguments": PAY},
        {"check": "says", "text": "a\nb"},
        {"check": "not_says", "text": "c"},
    ]
    for check in checks:
        assert problem(check) is None
        assert describe(check) and "\n" not in describe(check)


def test_malformed_checks_are_named() -> None:
    assert "missing field 'arguments'" in problem({"check": "makes", "tool": "pay"})
    assert "field 'times' must be a int" in problem({"check": "makes", "tool": "pay", "arguments": {}, "times": "2"})
    assert "unknown check" in problem({"check": "pays"})
    assert problem("finishes") == "a check must be a JSON object"


def test_standins_answer_recorded_calls_by_their_exact_input() -> None:
    standins = StandIns(
        TOOLS,
        [
            {"tool": "read_invoice", "arguments": {"number": "23"}, "answer": "Invoice 23: 7 USD."},
            {"tool": "pay", "arguments": PAY, "answer": "paid 7 USD to acme-ltd"},
        ],
    )
    assert standins.answer(Call.from_text("read_invoice", '{ "number" : "23" }')) == "Invoice 23: 7 USD."
    assert standins.answer(Call("pay", {"amount": "7", "to": "acme-ltd"})) == "paid 7 USD to acme-ltd"
    assert "no answer was recorded for read_invoice" in standins.answer(Call("read_invoice", {"number": "24"}))
    assert standins.answer(Call("pay", {"to": "mallory", "amount": "7"})) == "ok"
    assert standins.answer(Call.from_text("pay", "[1, 2]")) == "ok"
    assert standins.answer(Call.from_text("read_invoice", "23")).startswith("error:")
    assert "no tool named 'delete_all'" in standins.answer(Call("delete_all", {}))
