"""Whatever a candidate program writes, the harness scores a run and goes on: a line that
is not the protocol (not JSON, not UTF-8, nested past the bound, a number too long to
read, a lone surrogate, the wrong shape) is the candidate's failed run, never a crash
and never an error laid on the infrastructure. Each line is written by a real candidate
process in the bubblewrap sandbox, which then exits."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from improver.base.protocol import decode_line
from improver.episodes.harness import Command
from tests.garbage import FUZZ, TRICKS, garbage, json_values, objects
from tests.improver.candidatekit import program
from tests.improver.test_harness import run

FIELDS = ["messages", "tools", "max_tokens", "id", "name", "arguments", "answer", "question"]
KINDS = ["model", "tool", "done", "ask", "case", "user"]


def protocol_like() -> st.SearchStrategy[dict]:
    """Lines of the protocol's shape, with any values: a tool's arguments any text."""
    payloads = objects(
        FIELDS, st.text(max_size=40) | st.sampled_from(TRICKS).map(lambda b: b.decode(errors="replace")) | json_values()
    )
    return st.dictionaries(st.sampled_from(KINDS) | st.text(max_size=5), payloads | json_values(), max_size=2)


def writer(tmp_path: Path) -> Command:
    """A candidate that writes `line.bin` (given before each run) as it is, then exits."""
    return program(tmp_path, "sys.stdout.buffer.write(open('line.bin', 'rb').read()); sys.stdout.flush()\n")


def written(candidate: Command, line: bytes):
    tree = candidate.request.tree
    assert tree is not None
    (tree / "line.bin").write_bytes(line + b"\n")
    return run(candidate)


@pytest.mark.parametrize("line", TRICKS, ids=[repr(t[:24]) for t in TRICKS])
def test_a_line_that_is_not_the_protocol_is_the_candidates_failed_run(tmp_path: Path, line: bytes) -> None:
    result = written(writer(tmp_path), line)
    assert result.outcome == "failed", result.reason
    assert result.reason.startswith(("sent a line that is not the protocol", "exited before it said it was done"))


def test_a_lone_surrogate_is_refused_and_a_pair_is_one_character() -> None:
    with pytest.raises(ValueError, match="lone surrogate"):
        decode_line(b'{"done": {"answer": "\\ud800"}}')
    assert decode_line(b'{"done": {"answer": "\\ud83d\\ude00"}}') == ("done", {"answer": "\U0001f600"})


@settings(FUZZ, max_examples=100)  # a real process each: 100 keep the test under a minute
@given(line=garbage(protocol_like()))
def test_any_line_is_a_scored_run_never_a_crash(tmp_path_factory: pytest.TempPathFactory, line: bytes) -> None:
    result = written(writer(tmp_path_factory.mktemp("candidate")), line)
    assert result.outcome in ("passed", "failed"), result.reason


@pytest.mark.parametrize("arguments", TRICKS, ids=[repr(t[:24]) for t in TRICKS])
def test_a_tool_call_of_any_arguments_is_answered_and_kept(tmp_path: Path, arguments: bytes) -> None:
    text = arguments.decode(errors="replace")
    line = json.dumps({"tool": {"id": "1", "name": "read_invoice", "arguments": text}}).encode()
    result = written(writer(tmp_path), line)
    assert result.outcome == "failed", result.reason  # it exited without saying it was done
    assert [c.tool for c in result.run.calls] == ["read_invoice"]
