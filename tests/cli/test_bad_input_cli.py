"""Careless and unlucky input: one line saying what is wrong, the README's exit codes
(2 for a wrong option or value, 3 for a check that found something), no silent zero,
nothing half-done."""

from __future__ import annotations

import base64
import json
import random
from pathlib import Path
from typing import Any

import pytest

from agentd.app.demo import PROFILE
from agentd.home import Home
from tests.cli.test_wallet_cli import one_error_line
from tests.examplekit import sealed

TRANSCRIPT = {
    "messages": [
        {"role": "system", "content": "You pay invoices."},
        {"role": "user", "content": "Pay invoice 34 from Hooli, 3 USD, to hooli."},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "x1",
                    "type": "function",
                    "function": {"name": "pay", "arguments": '{"to": "eve", "amount": "3"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "x1", "content": "paid"},
        {"role": "assistant", "content": "Paid eve."},
    ],
    "tools": [{"type": "function", "function": {"name": "pay", "parameters": {"type": "object"}}}],
    "metadata": {"check": "passed"},
}


@pytest.fixture
def invoices(agentd, home: Home) -> Path:
    assert agentd("init", "--example", PROFILE).code == 0
    return home.profiles_dir / PROFILE


def sessions(agentd) -> list[dict[str, Any]]:
    return json.loads(agentd("sessions", "list", "--json").out)


@pytest.mark.parametrize(
    "args, expected",
    [
        (["ledger", "log", "--kind", "nope"], "--kind 'nope' is not a kind of entry; the kinds are: "),
        (["ledger", "show", "zz!"], "'zz!' is neither a Pulse (a number) nor a claim id"),
        (["ledger", "log", "--author", "not a name"], "is neither a wallet name nor a wallet id"),
        (["sessions", "list", "--profile", "nope"], "--profile 'nope' names no profile of this home: invoices"),
        (["lineage", "../../etc"], "'../../etc' is not a valid profile name"),
        (["lineage", "../../etc", "--check"], "'../../etc' is not a valid profile name"),
        (
            ["improve", "run", PROFILE, "--proposer", "x:y", "--runs", "0"],
            "Invalid value for '--runs': 0 is not in the range x>=1",
        ),
        (["improve", "run", PROFILE, "--proposer", "x:y", "--max-tokens", "-1"], "Invalid value for '--max-tokens'"),
        (["wallet", "fund", PROFILE, "abc"], "'abc' is not an amount"),
        (["wallet", "fund", PROFILE, "-5"], "'-5' is out of range: give an amount above 0"),
        (["improve", "seal", PROFILE, "--tasks", "tasks.json", "--share", "150"], "150 is not in the range 1<=x<=99"),
        (["ledger", "verify", "--jobs", "0"], "Invalid value for '--jobs'"),
        (["ledger", "log", "--from", "99999999999999999999"], "Invalid value for '--from'"),
        (
            ["improve", "seal", PROFILE, "--tasks", "tasks.json", "--canaries", "1000000000"],
            "Invalid value for '--canaries'",
        ),
        (["kill-switch", "maybe"], "Invalid value for 'STATE': 'maybe' is not one of 'on', 'off', 'status'"),
    ],
)
def test_a_wrong_option_or_value_exits_2_in_one_line_and_a_hint(
    agentd, invoices: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], expected: str
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tasks.json").write_text("{}")
    r = agentd(*args)
    assert expected in one_error_line(r, code=2), r.err


def test_a_filter_that_matches_nothing_says_so(agentd, invoices: Path) -> None:
    r = agentd("ledger", "log", "--kind", "agent.seal/v1")
    assert (r.code, r.out, r.err) == (0, "", "no entries match\n")
    assert json.loads(agentd("ledger", "log", "--kind", "agent.seal/v1", "--json").out) == []
    r = agentd("sessions", "list", "--outcome", "bad")
    assert (r.code, r.out, r.err) == (0, "", "no sessions match\n")
    r = agentd("lineage", "nope", "--check")
    assert (
        one_error_line(r)
        == f"agentd: error: profile 'nope' has no profile, lineage or seal in {invoices.parent.parent}"
    )
    r = agentd("lineage", PROFILE)
    assert (r.code, r.out) == (0, "profile invoices has kept no change yet\n")


def test_a_changed_sealed_task_file_is_a_failed_check(agentd, home: Home) -> None:
    seal = sealed(home).seal
    seal.path.write_text(seal.path.read_text().replace("Pay invoice", "Pay  invoice", 1))
    r = agentd("lineage", PROFILE, "--check")
    assert r.code == 3, r.err
    assert f"agentd: {seal.path}" in r.err and "changed" in r.err
    assert "Traceback" not in r.err


def test_ledger_export_never_overwrites_a_file_unless_forced(agentd, invoices: Path, tmp_path: Path) -> None:
    agentd("wallet", "fund", PROFILE, "1")
    copy = tmp_path / "copy.jsonl"
    copy.write_text("mine\n")
    line = one_error_line(agentd("ledger", "export", str(copy)))
    assert line == f"agentd: error: {copy} exists already: give another name, or --force to replace it"
    assert copy.read_text() == "mine\n"
    assert agentd("ledger", "export", str(copy), "--force").code == 0
    assert json.loads(copy.read_text().splitlines()[0])["pulse"] == 1


def test_a_transcript_imported_twice_is_one_session(agentd, invoices: Path, tmp_path: Path) -> None:
    path = tmp_path / "foreign.jsonl"
    path.write_text(json.dumps(TRANSCRIPT) + "\n" + json.dumps(TRANSCRIPT) + "\n")
    r = agentd("sessions", "import", str(path), "--profile", PROFILE)
    assert r.code == 0, r.err
    first = sessions(agentd)
    assert len(first) == 1 and f"{path}:2: the same transcript as {path}:1; passed over" in r.err
    again = agentd("sessions", "import", str(path), "--profile", PROFILE)
    assert again.code == 0 and f"imported already, as session {first[0]['id']}; passed over" in again.err
    assert f"nothing new to import from {path}" in again.err and again.out == ""
    assert sessions(agentd) == first
    kinds = [e["kind"] for e in json.loads(agentd("ledger", "log", "--json").out)]
    assert kinds.count("agent.session/v1") == 1


@pytest.mark.parametrize(
    "data, expected",
    [
        (json.dumps(TRANSCRIPT).encode().replace(b"Hooli", b"Hool\xff"), "line 1: not UTF-8 text (byte "),
        (b"[" * 5000 + b"]" * 5000, "nested too deeply to be a transcript"),
        (
            (json.dumps(TRANSCRIPT) + "\n").encode() + b'{"messages": ' + b"[" * 5000 + b"]" * 5000 + b"}\n",
            "line 2: nested too deeply",
        ),
        # 495 levels parse, but used to overflow the walk that redacts secrets after
        (
            b'{"messages": [{"role": "user", "content": "Pay."}, {"role": "assistant", "content": '
            + b"[" * 495
            + b"]" * 495
            + b"}]}",
            "nested too deeply to be a transcript (nested deeper than 100 levels)",
        ),
    ],
    ids=["not UTF-8", "nested too deeply", "a line nested too deeply", "a message 495 deep"],
)
def test_an_import_that_is_not_text_or_too_deep_is_one_line(
    agentd, invoices: Path, tmp_path: Path, data: bytes, expected: str
) -> None:
    path = tmp_path / "foreign.json"
    path.write_bytes(data)
    assert expected in one_error_line(agentd("sessions", "import", str(path), "--profile", PROFILE))
    assert sessions(agentd) == []


def _mutated(rng: random.Random, value: Any) -> Any:
    """`value` with a part replaced, removed or added, at random."""
    odd = [None, True, 0, -1, 1.5, "", "x", [], {}, [1], {"a": 1}, 10**30, "\x00"]
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(list(value))
        return (
            {**value, key: _mutated(rng, value[key])}
            if rng.random() < 0.8
            else {k: v for k, v in value.items() if k != key}
        )
    if isinstance(value, list) and value and rng.random() < 0.8:
        i = rng.randrange(len(value))
        return (
            [*value[:i], _mutated(rng, value[i]), *value[i + 1 :]] if rng.random() < 0.8 else value[:i] + value[i + 1 :]
        )
    return rng.choice(odd)


def test_no_mangled_import_makes_a_traceback(agentd, invoices: Path, tmp_path: Path) -> None:
    # The fuzzer found a traceback in about one input in eleven; this many
    # inputs, made the same way, met several each time it ran on the code of then.
    rng = random.Random(11)
    path = tmp_path / "fuzzed.json"
    for _ in range(250):
        data = json.dumps(_mutated(rng, TRANSCRIPT)).encode()
        if rng.random() < 0.3:
            flipped = bytearray(data)
            flipped[rng.randrange(len(flipped))] = rng.randrange(128, 256)
            data = bytes(flipped)
        path.write_bytes(data)
        r = agentd("sessions", "import", str(path), "--profile", PROFILE)  # a traceback fails the test here
        errors = [line for line in r.err.splitlines() if not line.startswith(("agentd: warning: ", "nothing new"))]
        assert (r.code, len(errors)) in ((0, 0), (1, 1)), r.err


def test_verify_shows_the_root_as_checkpoints_write_it(agentd, invoices: Path) -> None:
    agentd("wallet", "fund", PROFILE, "1")
    note = agentd("ledger", "checkpoint").out
    root_b64 = note.splitlines()[2]
    verified = agentd("ledger", "verify").out
    assert f"(base64 {root_b64}, as checkpoints write it)" in verified
    assert base64.b64decode(root_b64).hex() in verified
