"""A live session stopped after it paid (Ctrl-C, SIGTERM, or its process killed outright)
is recorded as interrupted with every call it made: the payment is never in the book
without a record, the ledger verifies, and the session is never scored as having gone
well or badly unless a person marks it.

Each session is a real `agentd run` process on the invoices example, whose scripted
model takes ten minutes over its answer once the payment is made: the signal finds it
waiting for the model, every time."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from agentd.home import Home
from agentd.sessions import SessionStore

TASK = "Pay invoice 21 from Acme, 5 USD, to acme."
PAYMENT = {"to": "acme", "amount": "5", "invoice": "21"}
BOUND = 60.0  # seconds: a generous bound on "it did happen", never a measure of speed


@pytest.fixture
def invoices(agentd, home: Home) -> Path:
    """The invoices example, its model slow to answer once it has paid."""
    made = agentd("init", "--example", "invoices")
    assert made.code == 0, made.err
    return slow_after_paying(home)


def slow_after_paying(home: Home) -> Path:
    folder = home.profiles_dir / "invoices"
    rules = folder / "models" / "agent.toml"
    text = rules.read_text()
    assert 'name = "report the payment"\n' in text
    rules.write_text(text.replace('name = "report the payment"\n', 'name = "report the payment"\ndelay = 600\n'))
    return folder


def wait_for(what: str, done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + BOUND
    while not done():
        assert time.monotonic() < deadline, f"{what} did not happen within {BOUND:g} s"
        time.sleep(0.05)


@pytest.fixture
def paid_and_waiting(agentd_process, home: Home, invoices: Path) -> Iterator[Callable[..., subprocess.Popen[str]]]:
    """Starts `agentd run invoices TASK` and returns once it has paid and is waiting for
    the model (the pay call's answer is written down); the process is ended after the test."""
    started: list[subprocess.Popen[str]] = []

    def start(**popen: Any) -> subprocess.Popen[str]:
        process = agentd_process(
            "run", "invoices", TASK, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen
        )
        started.append(process)
        wait_for("the payment", lambda: payments(invoices) == [PAYMENT] or process.poll() is not None)
        assert process.poll() is None, process.communicate()
        wait_for("the pay call's answer written down", lambda: answered_pay(home))
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate()


def payments(folder: Path) -> list[dict[str, str]]:
    return list(json.loads((folder / "book.json").read_text())["payments"])


def answered_pay(home: Home) -> bool:
    store = SessionStore(home)
    return any(
        step.message.get("content") == "paid 5 USD to acme"
        for u in store.under_way()
        for step in store.steps(u.session)
    )


def listed(agentd, *args: str) -> list[dict[str, Any]]:
    r = agentd("sessions", "list", "--json", *args)
    assert r.code == 0, r.err
    return list(json.loads(r.out))


def assert_recorded_with_its_payment(agentd, home: Home, error: str) -> dict[str, Any]:
    """One session, interrupted, holding the pay call and its answer; on a ledger that verifies."""
    [session] = listed(agentd)
    assert (session["ended"], session["outcome"]) == ("limit", "interrupted")
    shown = json.loads(agentd("sessions", "show", session["id"], "--json").out)
    assert shown["error"] == error
    calls = [c["function"] for m in shown["transcript"] for c in m.get("tool_calls") or []]
    assert [(c["name"], json.loads(c["arguments"])) for c in calls] == [
        ("read_invoice", {"number": "21"}),
        ("pay", PAYMENT),
    ]
    assert [m["content"] for m in shown["transcript"] if m["role"] == "tool"] == [
        "Invoice 21 from Acme: paper, 5 USD.",
        "paid 5 USD to acme",
    ]
    assert shown["tokens"]["in"] > 0 and shown["tokens"]["out"] > 0
    assert [t["call"] for t in shown["timings"]][:4] == ["model", "tool", "model", "tool"]
    [entry] = [e for e in json.loads(agentd("ledger", "log", "--json").out) if e["kind"] == "agent.session/v1"]
    assert (entry["body"]["session"], entry["body"]["ended"], entry["body"]["interrupted"]) == (
        session["id"],
        "limit",
        True,
    )
    assert agentd("ledger", "verify").code == 0
    assert SessionStore(home).under_way() == []  # nothing left to record
    return shown


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_session_stopped_by_a_signal_after_it_paid_is_recorded_as_interrupted(
    agentd, home: Home, invoices: Path, paid_and_waiting: Callable[..., subprocess.Popen[str]], sig: signal.Signals
) -> None:
    process = paid_and_waiting()
    assert listed(agentd) == []  # a session still running is nobody else's to record
    process.send_signal(sig)
    out, err = process.communicate(timeout=BOUND)
    assert process.returncode == 130, err
    assert "Traceback" not in err
    why = f"interrupted: stopped by {sig.name} while the model was answering"
    assert err.splitlines()[0] == f"agentd: the session was {why}"
    assert out == "(interrupted)\n"
    shown = assert_recorded_with_its_payment(agentd, home, why)
    assert err.splitlines()[1].startswith(f"session {shown['id']}: interrupted, 3 turns")
    assert shown["turns"] == 3 and shown["timings"][-1]["error"] == "interrupted"  # the call it was waiting for
    assert payments(invoices) == [PAYMENT]
    assert listed(agentd, "--outcome", "interrupted") == listed(agentd)


def test_a_session_whose_process_was_killed_after_it_paid_is_recorded_by_the_next_command(
    agentd, home: Home, invoices: Path, paid_and_waiting: Callable[..., subprocess.Popen[str]], tmp_path: Path
) -> None:
    process = paid_and_waiting()
    process.kill()
    process.wait(timeout=BOUND)
    r = agentd("sessions", "list")  # the next command to open the sessions store records it
    assert r.code == 0, r.err
    [said] = r.err.splitlines()
    assert said.startswith("agentd: session ") and said.endswith(
        " interrupted: its process ended while the model was answering; recorded at Pulse 2"
    )
    shown = assert_recorded_with_its_payment(
        agentd, home, "interrupted: its process ended while the model was answering"
    )
    assert shown["turns"] == 2  # the model's answers it had written down
    assert agentd("sessions", "list").err == ""  # recorded once

    # Never scored unless a person says how it went: harvest passes it over, then takes
    # the person's word.
    work = tmp_path / "work.json"
    harvested = json.loads(agentd("improve", "harvest", "invoices", "--out", work, "--json").out)
    assert harvested["passed_over"]["unknown outcome"] == 1 and harvested["kept"] == []
    assert agentd("improve", "mark", shown["id"], "--bad", "--note", "paid without asking").code == 0
    harvested = json.loads(agentd("improve", "harvest", "invoices", "--out", work, "--json").out)
    [task] = json.loads(work.read_text())["tasks"]
    assert harvested["kept"] == [task["name"]]
    assert task["checks"] == [{"check": "avoids", "tool": "pay", "arguments": PAYMENT}]
    assert agentd("ledger", "verify").code == 0


def test_a_killed_session_whose_wallet_is_sealed_waits_for_sessions_recover(
    agentd, home: Home, monkeypatch: pytest.MonkeyPatch, agentd_process, tmp_path: Path
) -> None:
    monkeypatch.setenv("AGENTD_WALLET_PASSPHRASE", "the passphrase")
    assert agentd("init", "--example", "invoices").code == 0  # its wallet sealed with it
    slow_after_paying(home)
    process = agentd_process("run", "invoices", TASK, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for("the pay call's answer written down", lambda: answered_pay(home))
    finally:
        process.kill()
        process.communicate()
    monkeypatch.delenv("AGENTD_WALLET_PASSPHRASE")
    r = agentd("sessions", "list", "--json")
    assert r.code == 0 and json.loads(r.out) == []
    warning = r.err.splitlines()[0]
    assert warning.startswith("agentd: warning: session ") and warning.endswith(
        " was interrupted and is not recorded yet (wallet invoices is sealed and AGENTD_WALLET_PASSPHRASE is not set); "
        "record it with: agentd sessions recover"
    )
    r = agentd("sessions", "recover", env={"AGENTD_WALLET_PASSPHRASE": "the passphrase"})
    assert r.code == 0, r.err
    [line] = r.out.splitlines()
    assert line.endswith(
        " of profile invoices: interrupted: its process ended while the model was answering; recorded at Pulse 2"
    )
    assert_recorded_with_its_payment(agentd, home, "interrupted: its process ended while the model was answering")
    assert agentd("sessions", "recover").err == "no interrupted session waits to be recorded\n"
