"""`agentd case --stdio`: the runtime as a real candidate process over JSON lines."""

from __future__ import annotations

import subprocess
import sys

from improver.base.protocol import Case, decode_line, encode_line


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
    call = {"id": "c1", "type": "function", "function": {"name": "pay", "arguments": '{"to":"acme"}'}}
    send(
        proc,
        "completion",
        {"message": {"role": "assistant", "content": None, "tool_calls": [call]}, "usage": {"in": 3, "out": 2}},
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
