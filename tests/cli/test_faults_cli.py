"""Unlucky moments: a disk that fills up between the two halves of a write that spans a
file and the ledger, a link where the kill switch goes, Ctrl-C in the demo. Nothing is
left half-made, and the next command settles what a failure left pending.

The disk is a real tmpfs of a few megabytes holding the whole home; it is filled at the
exact step a test names, by wrapping that step."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import Session, select

from agentd.app import demo as demo_module, seals as seals_module
from agentd.app.demo import PROFILE, record_sessions
from agentd.app.tasks import harvest_profile
from agentd.home import Home
from agentd.sessions import SessionRecord, SessionStore
from improver.seals.seal import current_seal
from ledger import Ledger
from tests.cli.test_wallet_cli import one_error_line
from tests.homekit import run_in_process
from tests.mounts import fill, tiny_disk

TASK = "Pay invoice 21 from Acme, 5 USD, to acme."


@pytest.fixture
def small_home(home: Home, agentd) -> Iterator[Home]:
    """The example's home on a disk of its own, 8 MB."""
    with tiny_disk(home.root, 8 * 1024):
        assert agentd("init", "--example", PROFILE).code == 0
        yield home


def fill_after(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, disk: Path, fillers: list[Path]) -> None:
    """Makes `owner.name` fill `disk` to the last byte once it has done its work."""
    real = getattr(owner, name)

    def then_fill(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        fillers.append(fill(disk))
        return result

    monkeypatch.setattr(owner, name, then_fill)


def entries(agentd, kind: str) -> list[dict[str, Any]]:
    return [e for e in json.loads(agentd("ledger", "log", "--json").out) if e["kind"] == kind]


def rows(home: Home) -> list[SessionRecord]:
    """Every row of the sessions store, pending or not."""
    store = SessionStore(home)
    with Session(store.engine) as db:
        return list(db.exec(select(SessionRecord)).all())


def test_a_full_disk_before_the_ledger_entry_leaves_no_session_without_one(
    small_home: Home, agentd, monkeypatch: pytest.MonkeyPatch
) -> None:
    fillers: list[Path] = []
    with monkeypatch.context() as patch:
        fill_after(patch, SessionStore, "begin", small_home.root, fillers)
        line = one_error_line(agentd("run", PROFILE, TASK))
    assert "disk is full" in line
    assert "check the disk" in one_error_line(agentd("sessions", "list"))  # while it is still full
    fillers[0].unlink()
    assert json.loads(agentd("sessions", "list", "--json").out) == []
    assert rows(small_home) == [] and entries(agentd, "agent.session/v1") == []
    ok = agentd("run", PROFILE, TASK, "--json")
    assert ok.code == 0, ok.err
    assert [s["id"] for s in json.loads(agentd("sessions", "list", "--json").out)] == [json.loads(ok.out)["id"]]
    assert agentd("ledger", "verify").code == 0


def test_a_full_disk_after_the_ledger_entry_is_settled_by_the_next_command(
    small_home: Home, agentd, monkeypatch: pytest.MonkeyPatch
) -> None:
    fillers: list[Path] = []
    with monkeypatch.context() as patch:
        fill_after(patch, Ledger, "append_many", small_home.root, fillers)
        one_error_line(agentd("run", PROFILE, TASK))
    [pending] = rows(small_home)
    assert pending.claim_id is None  # the row waits for its entry, which the ledger holds
    [entry] = entries(agentd, "agent.session/v1")
    fillers[0].unlink()
    [listed] = json.loads(agentd("sessions", "list", "--json").out)
    assert (listed["id"], listed["claim"], listed["pulse"]) == (
        entry["body"]["session"],
        entry["claim"],
        entry["pulse"],
    )
    assert [r.claim_id for r in rows(small_home)] == [entry["claim"]]
    assert agentd("improve", "mark", listed["id"], "--bad").code == 0  # a session like any other


def test_a_mark_cut_short_by_a_full_disk_is_made_or_forgotten_by_what_the_ledger_holds(
    small_home: Home, agentd, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = json.loads(agentd("run", PROFILE, TASK, "--json").out)["id"]
    fillers: list[Path] = []
    with monkeypatch.context() as patch:
        fill_after(patch, Ledger, "append", small_home.root, fillers)
        one_error_line(agentd("improve", "mark", session, "--bad", "--note", "paid the wrong payee"))
    fillers[0].unlink()
    shown = json.loads(agentd("sessions", "show", session, "--json").out)
    assert (shown["mark"], shown["mark_note"]) == ("bad", "paid the wrong payee")
    assert len(entries(agentd, "agent.mark/v1")) == 1


def test_a_full_disk_before_a_seals_claim_leaves_no_seal(
    small_home: Home, agentd, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = harvested_here(small_home)
    fillers: list[Path] = []
    with monkeypatch.context() as patch:
        fill_after(patch, seals_module, "make_seal", small_home.root, fillers)
        line = one_error_line(agentd("improve", "seal", PROFILE, "--tasks", str(work), "--wallet", PROFILE))
    assert "full" in line
    fillers[0].unlink()
    assert not list(small_home.routes.root.glob("*-sealed-*")) and not list(small_home.routes.root.glob("*-train-*"))
    assert not small_home.pending_dir.exists() or not list(small_home.pending_dir.iterdir())
    assert entries(agentd, "agent.seal/v1") == []
    r = agentd("improve", "run", PROFILE, "--proposer", "script:models/proposer.toml")
    assert "has no seal: seal its tasks first" in one_error_line(r)


def test_a_seal_whose_claim_was_made_is_put_in_place_by_the_next_command(
    small_home: Home, agentd, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = harvested_here(small_home)
    fillers: list[Path] = []
    with monkeypatch.context() as patch:
        fill_after(patch, Ledger, "append", small_home.root, fillers)
        one_error_line(agentd("improve", "seal", PROFILE, "--tasks", str(work), "--wallet", PROFILE))
    assert not list(small_home.routes.root.glob("*-sealed-*"))  # not a seal yet: its claim is not noted in it
    [claim] = entries(agentd, "agent.seal/v1")
    fillers[0].unlink()
    r = agentd("lineage", PROFILE, "--check")
    assert r.code == 0, r.err
    seal = current_seal(small_home.routes, PROFILE)
    assert (seal.id, seal.state().claim, seal.state().pulse) == (claim["body"]["seal"], claim["claim"], claim["pulse"])
    assert not list(small_home.pending_dir.iterdir())


def harvested_here(home: Home) -> Path:
    """The example's sessions recorded and harvested, in a home `init --example` made."""
    record_sessions(home, home.profiles_dir / PROFILE, lambda line: None)
    work = home.root / "work.json"
    harvest_profile(home, PROFILE, work)
    return work


# -- the kill switch -------------------------------------------------------------------


def test_the_kill_switch_is_never_written_through_a_link(agentd, home: Home, tmp_path: Path) -> None:
    assert agentd("init", "--example", PROFILE).code == 0
    target = tmp_path / "precious"
    target.write_text("keep me\n")
    home.kill_switch_path.symlink_to(target)
    r = agentd("kill-switch", "on", "--reason", "audit")
    assert r.code == 0 and r.out.startswith("kill switch is on (since unknown: ")
    assert target.read_text() == "keep me\n"
    assert "the kill switch is on" in one_error_line(agentd("run", PROFILE, TASK))  # a link counts as on
    assert agentd("kill-switch", "off").out == "kill switch is off\n"
    assert target.read_text() == "keep me\n" and not home.kill_switch_path.is_symlink()
    dangling = tmp_path / "nowhere"
    home.kill_switch_path.symlink_to(dangling)
    assert agentd("kill-switch", "on").code == 0 and not dangling.exists()


# -- Ctrl-C in the demo ----------------------------------------------------------------


def test_ctrl_c_in_the_demos_loop_stops_the_demo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = demo_module.run_improvement

    def interrupted_at_once(home, profile, request, on_event, *args: Any, **kwargs: Any):
        def hear(event) -> None:
            on_event(event)
            if event.kind == "baseline":
                os.kill(os.getpid(), signal.SIGINT)  # as Ctrl-C would, while the loop runs

        return real(home, profile, request, hear, *args, **kwargs)

    monkeypatch.setattr(demo_module, "run_improvement", interrupted_at_once)
    r = run_in_process(["--home", str(tmp_path / "demo"), "demo"])
    assert r.code == 130, r.err
    assert r.err.strip().splitlines()[-1] == "agentd: interrupted"
    assert "== done" not in r.err and "lineage invoices --check" not in r.err
    assert "confirmed on tasks sealed" not in r.out and "kept learns" not in r.out
