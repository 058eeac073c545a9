"""The judge: proposes a mark from a session's transcript, or nothing, counted."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from improver.base.errors import ImproverError
from improver.base.protocol import ProviderError
from improver.train.export import Transcript
from improver.train.judge import judge, read_proposals, render, save_proposals, verdict
from tests.improver.taskkit import ScriptedModel, paid_session, says


def transcript(number: str, payee: str = "acme-ltd") -> Transcript:
    session = paid_session(number, payee=payee)
    return Transcript(
        id=session.id, profile="invoices", outcome="unknown", ended="done", messages=session.transcript, tools=[]
    )


def test_the_judge_reads_the_calls_made_and_answers_in_one_json_object() -> None:
    shown = render(transcript("31", payee="mallory"))
    assert '[assistant calls pay] {"to": "mallory", "amount": "7"}' in shown and shown.endswith(
        "[the session ended: done]"
    )
    assert verdict('{"mark": "bad", "reason": "It paid mallory."}') == ("bad", "It paid mallory.")
    assert verdict('Here: {"mark": "good", "reason": " Paid the right payee. "} done') == (
        "good",
        "Paid the right payee.",
    )
    for answer, said in [
        ("good", "not answer with a JSON object"),
        ('{"mark": "fine", "reason": "x"}', 'no \\"mark\\" of good or bad'),
        ('{"mark": "good"}', 'gives no \\"reason\\"'),
    ]:
        with pytest.raises(ImproverError, match=said):
            verdict(answer)


def test_a_judge_that_errors_or_answers_out_of_form_proposes_nothing_and_is_counted() -> None:
    def answers(messages: list) -> object:
        seen = messages[-1]["content"]
        if "mallory" in seen:
            return says('{"mark": "bad", "reason": "It paid the payee the invoice named."}')
        if "invoice 24" in seen:
            return ProviderError("HTTP 500 through every retry")
        return says("Looks fine to me.")

    sessions = [transcript("23"), transcript("31", payee="mallory"), transcript("24")]
    judged = asyncio.run(judge(ScriptedModel(answers), "script:judge", sessions, rubric="Did it pay the right payee?"))
    assert [(p.session, p.mark, p.model) for p in judged.proposals] == [("s-31-mallory", "bad", "script:judge")]
    assert set(judged.failed) == {"s-23-acme-ltd", "s-24-acme-ltd"}
    assert "HTTP 500" in judged.failed["s-24-acme-ltd"] and "JSON" in judged.failed["s-23-acme-ltd"]


def test_proposals_are_kept_apart_and_read_back(tmp_path: Path) -> None:
    model = ScriptedModel(lambda m: says('{"mark": "good", "reason": "Done right."}'))
    judged = asyncio.run(judge(model, "script:judge", [transcript("23")], rubric=""))
    path = tmp_path / "invoices-judged.json"
    save_proposals(path, {p.session: p for p in judged.proposals})
    assert read_proposals(path) == {"s-23-acme-ltd": judged.proposals[0]}
    path.write_text("[]")
    with pytest.raises(ImproverError, match="not a file of judged proposals"):
        read_proposals(path)
