"""The loop's parts on their own: the archive's lines, the gates, the proposer's answers."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from improver.base.errors import ImproverError
from improver.base.variant import Variant
from improver.decide.archive import Archive
from improver.decide.stats import Tally
from improver.loop.gates import SealedText, turned_down
from improver.loop.proposer import _proposal, describe
from improver.tasks.harvest import task_from
from tests.improver.taskkit import paid_session

BASE = Variant("Pay invoices.", "", ("script:a.toml",))


def variant(lessons: str) -> Variant:
    return Variant(BASE.operator, lessons, BASE.models)


def tallies(passed: int, runs: int = 4) -> dict[str, Tally]:
    return {"t": Tally(passed, runs)}


def test_a_line_is_a_variant_and_everything_made_from_it(tmp_path: Path) -> None:
    archive = Archive(tmp_path / "a.json", "d" * 64)
    root = archive.add(BASE, None, tallies(0), 4, "root", {})
    a = archive.add(variant("a"), root.number, tallies(0), 4, "a", {})
    b = archive.add(variant("b"), root.number, tallies(0), 4, "b", {})
    a1 = archive.add(variant("a1"), a.number, tallies(4), 4, "a1", {})
    assert [v.number for v in archive.line(a.number)] == [a.number, a1.number]
    assert [v.number for v in archive.line(root.number)] == [0, 1, 2, 3]
    assert archive.line(b.number) == [b]
    # a weak variant whose child does well is drawn far more often than its weak sibling
    picks = Counter(archive.pick(np.random.default_rng(seed)).number for seed in range(400))
    assert picks[a.number] > 3 * picks[b.number]


def test_the_archive_round_trips_and_refuses_other_tasks(tmp_path: Path) -> None:
    archive = Archive(tmp_path / "a.json", "d" * 64)
    archive.add(BASE, None, tallies(2), 4, "the agent as it was", {"t": ["it never pays"]})
    archive.history.append({"change": "learns x", "went": "not better"})
    archive.save()
    again = Archive.load(tmp_path / "a.json", "d" * 64)
    assert again.variants[0].tallies == tallies(2) and again.variants[0].wrong == {"t": ["it never pays"]}
    assert again.tried == {BASE.id} and again.history == archive.history
    with pytest.raises(ImproverError, match="belongs to other tasks"):
        Archive.load(tmp_path / "a.json", "e" * 64)
    (tmp_path / "a.json").write_text("{")
    with pytest.raises(ImproverError, match="the archive is damaged"):
        Archive.load(tmp_path / "a.json", "d" * 64)


def test_eight_words_in_a_row_from_a_sealed_task_turn_a_change_down() -> None:
    task = task_from(paid_session("23"), "sealed-1", "p")
    sealed = SealedText.of([task])
    words = task.task.split()  # "Pay invoice 23 from Acme, 7 USD, to acme-ltd."
    gate = dict(allowed_models=list(BASE.models), tried=set(), sealed=sealed, max_lessons=500)
    assert turned_down(variant("Always " + " ".join(words[:7]) + " twice."), **gate) is None
    assert (
        turned_down(variant("Always " + " ".join(words[:8]).upper()), **gate)
        == "it shares a run of words with sealed task sealed-1"
    )
    assert turned_down(variant("ok"), **{**gate, "tried": {variant("ok").id}}) == "changes nothing: tried already"
    assert (
        turned_down(Variant(BASE.operator, "", ("openai:x",)), **gate)
        == "openai:x is not among the models it may run on"
    )


def test_proposals_are_parsed_or_turned_down_with_a_reason() -> None:
    assert _proposal(BASE, "{not json").problem == "its arguments are not valid JSON"
    assert _proposal(BASE, json.dumps({"lessons": 3})).problem == "its lessons are not text"
    assert _proposal(BASE, json.dumps({"models": "x"})).problem == "its models are not a list of provider:model names"
    made = _proposal(BASE, json.dumps({"lessons": "  Check payees.  "})).variant
    assert made == variant("Check payees.")
    assert describe(made, BASE) == 'learns "Check payees."'
    both = Variant(BASE.operator, "x", ("openai:y",))
    assert describe(both, BASE) == 'learns "x" and runs on openai:y'
    twice = _proposal(BASE, json.dumps({"lessons": "x", "models": [*BASE.models, *BASE.models]})).variant
    assert twice is not None and twice.models == BASE.models
    assert describe(twice, BASE) == 'learns "x"'
