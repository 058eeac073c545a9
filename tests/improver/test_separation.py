"""improver.seals.separation: the one place that keeps sealed and exported tasks apart."""

from __future__ import annotations

import pytest

from improver.base.errors import ImproverError
from improver.seals.separation import Separation
from improver.train.export import ExportRecord
from tests.improver.taskkit import paid_task

SEALED = paid_task("work-1", number="23", id="s-sealed")
TWIN = paid_task("work-9", number="23", id="s-twin")  # the same request, another session
EXPORTED = paid_task("tasks-1", number="24", id="s-exported")
FRESH = paid_task("work-3", number="25", id="s-fresh")
SHOWN = paid_task("work-2", number="26", id="s-shown")  # on the seal's side to choose on


def separation(claims: list | None = None) -> Separation:
    record = ExportRecord(frozenset({"s-exported"}), frozenset(), frozenset({EXPORTED.content_key}))
    return Separation.of([("0123456789abcdef", None, (SEALED,), (SHOWN,))], claims or [], record)


def test_a_sealed_task_or_its_twin_is_refused_naming_the_seal() -> None:
    with pytest.raises(ImproverError, match="task work-9 was sealed already, by seal 0123456789abcdef"):
        separation().check_sealable([FRESH, TWIN])
    with pytest.raises(ImproverError, match="task tasks-1 was exported for training"):
        separation().check_sealable([EXPORTED])
    separation().check_sealable([FRESH])


def test_a_task_sealed_by_a_claim_on_the_ledger_is_sealed_here_too() -> None:
    claim = ("c" * 64, {"seal": "fedcba9876543210", "contents": [FRESH.content_key]})
    with pytest.raises(
        ImproverError, match=f"task work-3 was sealed already, by seal fedcba9876543210 \\(claim {'c' * 16}\\)"
    ):
        separation([claim]).check_sealable([FRESH])


def test_fresh_leaves_out_sealed_and_exported_tasks_and_counts_them() -> None:
    kept, left_out = separation().fresh([SEALED, TWIN, EXPORTED, FRESH])
    assert kept == (FRESH,) and left_out == {"sealed": 2, "exported": 1}


def test_export_leaves_out_sealed_tasks_their_sessions_and_their_twins_sessions() -> None:
    split = separation()
    assert split.unexportable_sessions([TWIN, FRESH]) == {"s-sealed", "s-twin"}
    assert split.exportable([SEALED, TWIN, FRESH], private={"s-fresh"}) == ()
    assert split.exportable([SEALED, TWIN, FRESH], private=set()) == (FRESH,)


def test_what_a_seal_had_to_choose_on_is_shown_here_or_by_its_claim_and_an_old_claim_shows_nothing() -> None:
    shown_elsewhere = paid_task("work-4", number="27", id="s-elsewhere")
    claims = [
        ("c" * 64, {"seal": "fedcba9876543210", "contents": [], "shown": [shown_elsewhere.content_key]}),
        ("d" * 64, {"seal": "00000000ffffffff", "contents": []}),  # published before `shown` was carried
    ]
    split = separation(claims)
    assert split.shown == {
        SHOWN.content_key: "seal 0123456789abcdef",
        shown_elsewhere.content_key: f"seal fedcba9876543210 (claim {'c' * 16})",
    }
    # Shown is not sealed: a shown task may be harvested, exported and chosen on again.
    assert split.fresh([SHOWN, shown_elsewhere]) == ((SHOWN, shown_elsewhere), {})
    split.check_sealable([SHOWN, shown_elsewhere])
