"""`agentd case --stdio`: the runtime as a real candidate process over JSON lines."""

from __future__ import annotations

import asyncio
import io
import subprocess
import sys

import pytest

from agentd.app.case import finished
from agentd.cli import invoke
from improver.base.protocol import Case, decode_line, encode_line

CALL = {"id": "c1", "type": "function", "function": {"name": "pay", "arguments": '{"to":"acme"}'}}


def start() -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "agentd", "case", "--stdio"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def send(proc: subprocess.Popen, kind: str, payload: dict) -> None:
    proc.stdin.write(encode_line(kind, payload))
    proc.stdin.flush()


def receive(proc: subprocess.Popen) -> tuple[str, dict]:
    return decode_line(proc.stdout.readline())


def test_a_case_runs_over_stdio_to_done() -> None:
    proc = start()
    case = Case(name="c", task="Pay invoice 21", tools=[], operator="Pay.")
    send(proc, "case", case.to_json())
    kind, request = receive(proc)
    assert kind == "model" and request["messages"][1] == {"role": "user", "content": "Pay invoice 21"}
    send(
        proc,
        "completion",
        {"message": {"role": "assistant", "content": None, "tool_calls": [CALL]}, "usage": {"in": 3, "out": 2}},
    )
    kind, tool = receive(proc)
    assert (kind, tool) == ("tool", {"id": "c1", "name": "pay", "arguments": '{"to":"acme"}'})
    send(proc, "result", {"content": "ok"})
    kind, request = receive(proc)
    assert request["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "ok"}
    send(proc, "completion", {"message": {"role": "assistant", "content": "Paid."}, "usage": {"in": 3, "out": 1}})
    assert receive(proc) == ("done", {"answer": "Paid."})
    proc.stdin.close()  # no person replies: the harness closes the line, and the case is over
    assert proc.wait(timeout=30) == 0


def test_a_persons_reply_to_the_answer_carries_the_conversation_on() -> None:
    proc = start()
    send(proc, "case", Case(name="c", task="Pay the Acme invoice", tools=[], operator="Pay.").to_json())
    receive(proc)
    send(
        proc,
        "completion",
        {"message": {"role": "assistant", "content": "Which invoice?"}, "usage": {"in": 3, "out": 2}},
    )
    assert receive(proc) == ("done", {"answer": "Which invoice?"})
    send(proc, "user", {"content": "Invoice 21."})
    kind, request = receive(proc)
    assert kind == "model" and request["messages"][1:] == [
        {"role": "user", "content": "Pay the Acme invoice"},
        {"role": "assistant", "content": "Which invoice?"},
        {"role": "user", "content": "Invoice 21."},
    ]
    send(proc, "completion", {"message": {"role": "assistant", "content": "Paid."}, "usage": {"in": 3, "out": 1}})
    assert receive(proc) == ("done", {"answer": "Paid."})
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0


def test_a_provider_error_ends_the_candidate_without_a_claim() -> None:
    proc = start()
    send(proc, "case", Case(name="c", task="t", tools=[]).to_json())
    receive(proc)
    send(proc, "error", {"kind": "provider", "message": "429 through every retry"})
    out, _ = proc.communicate(timeout=30)
    assert out == b"" and proc.returncode == 0


def test_a_garbage_first_line_is_refused_without_a_traceback() -> None:
    proc = start()
    _out, err = proc.communicate(b"hello\n", timeout=30)
    assert proc.returncode == 2 and b"Traceback" not in err and b"not a JSON line" in err


PAID = [
    {"message": {"role": "assistant", "content": None, "tool_calls": [CALL]}, "usage": {"in": 3, "out": 2}},
    {"message": {"role": "assistant", "content": "Paid."}, "usage": {"in": 3, "out": 1}},
]


def _lines_of_a_paid_case() -> bytes:
    """What the harness sends a case that pays once and is done, all at once: the
    candidate reads each line only when it has asked for it."""
    case = Case(name="c", task="Pay invoice 21", tools=[], operator="Pay.")
    answers = [("completion", PAID[0]), ("result", {"content": "ok"}), ("completion", PAID[1])]
    return encode_line("case", case.to_json()) + b"".join(encode_line(kind, payload) for kind, payload in answers)


def test_the_candidate_program_loads_neither_the_command_line_nor_an_event_loop() -> None:
    # `python -X importtime` names every module it loads on stderr.
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "agentd", "case", "--stdio"],
        input=_lines_of_a_paid_case(),
        capture_output=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert [decode_line(line)[0] for line in proc.stdout.splitlines()] == ["model", "tool", "model", "done"]
    loaded = {line.rsplit(b"|", 1)[-1].strip().decode() for line in proc.stderr.splitlines()}
    assert "agentd.runtime" in loaded
    assert not loaded & {"asyncio", "click", "agentd.cli", "agentd.home", "improver.tasks.simuser"}


def test_the_command_lines_case_runs_the_same_candidate(monkeypatch: pytest.MonkeyPatch) -> None:
    out = io.BytesIO()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(_lines_of_a_paid_case())))
    monkeypatch.setattr(sys, "stdout", io.TextIOWrapper(out))
    assert invoke(["case", "--stdio"]) == 0
    assert [decode_line(line) for line in out.getvalue().splitlines()][-1] == ("done", {"answer": "Paid."})


def test_the_runtime_runs_to_its_end_without_a_loop_and_with_one(monkeypatch: pytest.MonkeyPatch) -> None:
    async def run() -> str:
        await asyncio.sleep(0)  # a bare yield, which asks the loop for nothing
        return "ended"

    assert finished(run()) == "ended"  # asyncio is loaded here: run under a loop
    monkeypatch.delitem(sys.modules, "asyncio")
    assert finished(run()) == "ended"


def test_a_runtime_awaiting_a_loop_it_never_loaded_is_said_to() -> None:
    loop = asyncio.new_event_loop()

    async def run() -> None:
        await loop.create_future()

    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.delitem(sys.modules, "asyncio")
            with pytest.raises(RuntimeError, match="awaited an event loop's future without importing asyncio"):
                finished(run())
    finally:
        loop.close()
