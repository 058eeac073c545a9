"""Every file a user hands agentd, mutated from a real one: a profile.toml, a task set, a
rubric, a schedule, a patch, a transcript to import and a statement's envelope. Whatever a
mutant holds, agentd answers it without a traceback: the command does its work (exit 0),
or refuses in one line (`agentd: error: ...` or `agentd: check failed: ...`, a wrong value
with its one hint line) with the README's exit code; a file that does not parse is
always refused.

Hypothesis makes the mutants, bounded and derandomized so that CI runs the same ones
each time: a part of the file's data replaced by an odd value, dropped, added, nested
deep or a character put into a string (written back as the file's format), or the file's
bytes cut, put in, changed or truncated.
"""

from __future__ import annotations

import base64
import json
import shutil
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, reject, settings, strategies as st

from agentd.home import Home
from agentd.profiles import load_profile
from improver import ImproverError, digest, statement_about, statement_envelope
from ledger import Wallet, pae
from tests.cli.test_bad_input_cli import TRANSCRIPT, invoices  # noqa: F401  (a fixture)
from tests.cli.test_install_cli import World, install_args, released, world  # noqa: F401  (fixtures)
from tests.cli.test_rubric_cli import RUBRIC
from tests.cli.test_tasks_cli import sessions  # noqa: F401  (a fixture)
from tests.examplekit import CODE

EXAMPLE = Path(__file__).parents[2] / "agentd" / "examples" / "invoices"
TASKS = EXAMPLE / "problems" / "p0-train.json"

# A few hundred mutants of each file, the same ones every run. The fixtures' home is made
# once per test and each example writes its file afresh, so a mutant finds the home as
# the ones before left it, as a user's would be.
FUZZ = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# What a part of a file may become: every kind of value, and some that have hurt before.
ODD = st.one_of(
    st.sampled_from([None, True, 0, -1, 10**30, 1.5, "", "\x00", "é", "../..", [], {}, [[]], {"": ""}]),
    st.integers(),
    st.floats(),
    st.text(max_size=12),
)
ODD_IN_TOML = ODD.filter(lambda value: value is not None)  # TOML has no null
# Bytes put into a file: short runs, a byte that is not UTF-8, a non-ASCII letter, half
# an escape, and brackets enough to overflow a recursive parser.
INSERTED = st.one_of(
    st.binary(min_size=1, max_size=6),
    st.sampled_from([b"\xff", "é".encode(), b"\x00", b'"', b"\\u", b"\n", b"[" * 5000, b"{" * 5000]),
)
# Nesting that no parser recursing once a level survives (Python's stops near 1,000).
TOO_DEEP = st.sampled_from([1_000, 100_000])


@st.composite
def mutants(
    draw: st.DrawFn, value: Any, odd: st.SearchStrategy[Any] = ODD, deepest: int = 495, within: bool = False
) -> Any:
    """`value` with one of its parts replaced, dropped, added, nested `deepest` levels or
    so, or, in a string, a character put in; `within` it, never it whole."""
    if isinstance(value, dict | list) and value and (within or draw(st.integers(0, 4))):  # mostly, a part within
        keys = sorted(value) if isinstance(value, dict) else list(range(len(value)))
        key = draw(st.sampled_from(keys))
        how = draw(st.sampled_from(["change", "drop", "add"]))
        if isinstance(value, dict):
            if how == "change":
                return {**value, key: draw(mutants(value[key], odd, deepest))}
            if how == "drop":
                return {k: v for k, v in value.items() if k != key}
            return {**value, draw(st.text(max_size=8)): draw(odd)}
        if how == "change":
            return [*value[:key], draw(mutants(value[key], odd, deepest)), *value[key + 1 :]]
        if how == "drop":
            return value[:key] + value[key + 1 :]
        return [*value[:key], draw(odd), *value[key:]]
    how = draw(st.sampled_from(["odd", "nest", "letter"]))
    if how == "nest":
        for _ in range(draw(st.sampled_from([2, 101, deepest]))):
            value = [value]
        return value
    if how == "letter" and isinstance(value, str):
        at = draw(st.integers(0, len(value)))
        return value[:at] + draw(st.characters(codec="utf-8")) + value[at:]
    return draw(odd)


@st.composite
def garbled(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` with bytes cut, put in or changed at one place, or cut short there."""
    at = draw(st.integers(0, len(data) - 1))
    how = draw(st.sampled_from(["cut", "put in", "change", "cut short"]))
    if how == "cut":
        return data[:at] + data[at + draw(st.integers(1, 16)) :]
    if how == "put in":
        return data[:at] + draw(INSERTED) + data[at:]
    if how == "change":
        return data[:at] + bytes([draw(st.integers(0, 255).filter(lambda b: b != data[at]))]) + data[at + 1 :]
    return data[:at]


def json_file(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


def toml_file(table: dict[str, Any]) -> bytes:
    """`table` as TOML that tomllib reads back as it is: every key quoted, every value
    inline."""
    return "".join(f"{_toml(key)} = {_toml(value)}\n" for key, value in table.items()).encode()


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)  # nan, inf and -inf are TOML's words too
    if isinstance(value, str):  # a JSON string is a TOML one, once DEL is escaped
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, list):
        return "[" + ", ".join(map(_toml, value)) + "]"
    return "{" + ", ".join(f"{_toml(k)} = {_toml(v)}" for k, v in value.items()) + "}"


def mutated_json(value: Any, write: Callable[[Any], Any] = lambda v: v) -> st.SearchStrategy[bytes]:
    """The file `value` is, its data or its bytes mutated, or it whole nested too deep for
    a parser that recurses; `write` has the last word on the data (it redigests a task set)."""
    text = json_file(value)
    deep = TOO_DEEP.map(lambda n: b"[" * n + text + b"]" * n)
    return st.one_of(mutants(value).map(write).map(json_file), garbled(text), deep)


def mutated_toml(text: bytes) -> st.SearchStrategy[bytes]:
    table = tomllib.loads(text.decode())
    deep = TOO_DEEP.map(lambda n: b"deep = " + b"[" * n + b"]" * n + b"\n" + text)  # before its first table
    return st.one_of(mutants(table, ODD_IN_TOML, deepest=300, within=True).map(toml_file), garbled(text), deep)


@st.composite
def mutated_table(draw: st.DrawFn, text: bytes, name: str) -> bytes:
    """The TOML file `text` with its table `name` (its last) mutated: as data, or in its bytes."""
    if draw(st.booleans()):
        table = tomllib.loads(text.decode())
        return toml_file({**table, name: draw(mutants(table[name], ODD_IN_TOML, deepest=300))})
    head, header, rest = text.partition(f"[{name}]".encode())
    return head + draw(garbled(header + rest))


def parses(data: bytes, parse: Callable[[str], Any]) -> bool:
    try:
        parse(data.decode())
    except (ValueError, RecursionError):  # UnicodeDecodeError, JSONDecodeError, TOMLDecodeError
        return False
    return True


def json_lines(text: str) -> list[Any]:
    """A file of one JSON document, or of JSON lines, as `sessions import` reads it."""
    try:
        return [json.loads(text)]
    except json.JSONDecodeError:
        return [json.loads(line) for line in text.splitlines() if line.strip()]


def done_or_refused_in_one_line(r: Any, *, must_fail: bool = False, codes: tuple[int, ...] = (1, 2, 3)) -> None:
    """Exit 0, or one of `codes` with one line saying why (and, for a wrong value, the
    hint naming --help); warnings about other things may come before it."""
    assert "Traceback" not in r.out + r.err, r.err
    assert r.code in ((*codes,) if must_fail else (0, *codes)), (r.code, r.err)
    if r.code == 0:
        return
    lines = [line for line in r.err.splitlines() if not line.startswith("agentd: warning: ")]
    if r.code == 2 and len(lines) == 2 and lines[1].startswith("(see: agentd "):
        lines = lines[:1]
    assert len(lines) == 1 and lines[0].startswith(("agentd: error: ", "agentd: check failed: ")), r.err


@FUZZ
@given(data=st.data())
def test_a_mutated_profile_toml(agentd, invoices: Path, data: st.DataObject) -> None:  # noqa: F811
    toml = invoices / "profile.toml"
    original = toml.read_bytes()
    mutant = data.draw(mutated_toml(original))
    toml.write_bytes(mutant)
    must_fail = not parses(mutant, tomllib.loads)
    done_or_refused_in_one_line(agentd("profile", "show", "invoices"), must_fail=must_fail)
    r = agentd("run", "invoices", "Pay invoice 21 from Acme, 5 USD, to acme.")
    done_or_refused_in_one_line(r, must_fail=must_fail)
    toml.write_bytes(original)


def redigested(taskset: Any) -> Any:
    """The set with each task's digest and its own made to match what they now hold, so a
    mutant reaches the checks past the digests; as it is when they cannot be taken."""
    try:
        tasks = [{**t, "digest": digest({k: v for k, v in t.items() if k != "digest"})} for t in taskset["tasks"]]
        excluded = [{"task": e["task"]["digest"], "reason": e["reason"]} for e in taskset["excluded"]]
        parts = {k: taskset[k] for k in ("profile", "operator", "validated")}
        return {
            **taskset,
            "tasks": tasks,
            "digest": digest({**parts, "tasks": [t["digest"] for t in tasks], "excluded": excluded}),
        }
    except (KeyError, TypeError, AttributeError, ImproverError):
        return taskset


@FUZZ
@given(data=st.data())
def test_a_mutated_task_set(agentd, tmp_path: Path, data: st.DataObject) -> None:
    original = json.loads(TASKS.read_text())
    assert redigested(original) == original
    mutant = data.draw(mutated_json(original, redigested))
    given_file, out = tmp_path / "tasks.json", tmp_path / "validated.json"
    given_file.write_bytes(mutant)
    r = agentd("improve", "validate", given_file, "--out", out)
    done_or_refused_in_one_line(r, must_fail=not parses(mutant, json.loads))
    assert r.code == 0 or not out.exists()  # a refused set writes nothing
    out.unlink(missing_ok=True)


@FUZZ
@given(data=st.data())
def test_a_mutated_rubric(agentd, home: Home, sessions, tmp_path: Path, data: st.DataObject) -> None:  # noqa: F811
    toml = load_profile(home, "invoices").toml_path
    original = toml.read_bytes()
    mutant = data.draw(mutated_table(original + RUBRIC.encode(), "rubric"))
    toml.write_bytes(mutant)
    out = tmp_path / "work.json"
    r = agentd("improve", "harvest", "invoices", "--out", out)
    done_or_refused_in_one_line(r, must_fail=not parses(mutant, tomllib.loads))
    assert r.code == 0 or not out.exists()  # a refused harvest writes nothing
    toml.write_bytes(original)
    out.unlink(missing_ok=True)


@FUZZ
@given(data=st.data())
def test_a_mutated_schedule(agentd, invoices: Path, data: st.DataObject) -> None:  # noqa: F811
    toml = invoices / "profile.toml"
    original = toml.read_bytes()
    mutant = data.draw(mutated_table(original, "schedule"))
    toml.write_bytes(mutant)
    r = agentd("schedule", "add", "invoices", "harvest", "0 3 * * *")
    done_or_refused_in_one_line(r, must_fail=not parses(mutant, tomllib.loads))
    listed = agentd("schedule", "list")  # a profile's schedule that is wrong is a warning in the list
    assert listed.code == 0 and "Traceback" not in listed.err, listed.err
    toml.write_bytes(original)


PATCH_LINES = [
    b"new file mode 120000\n",
    b"old mode 100644\nnew mode 100755\n",
    b"rename from agent.py\nrename to ../agent.py\n",
    b"+++ b/../../outside.py\n",
    b"diff --git a/x.py b/x.py\n",
    b"@@ -1,1 +1,2 @@\n",
    b"GIT binary patch\nliteral 0\n",
    b"Binary files a/agent.py and b/agent.py differ\n",
    b"\\ No newline at end of file\n",
]


@st.composite
def mutated_patch(draw: st.DrawFn, patch: bytes) -> bytes:
    """The patch's bytes garbled, or a line git's headers know put in at a line's start."""
    if draw(st.booleans()):
        return draw(garbled(patch))
    lines = patch.splitlines(keepends=True)
    at = draw(st.integers(0, len(lines)))
    return b"".join(lines[:at]) + draw(st.sampled_from(PATCH_LINES)) + b"".join(lines[at:])


@pytest.fixture
def attested(world: World) -> tuple[World, str]:  # noqa: F811
    """The release's home, and an attestation by alice that counts for it."""
    return world, world.attest("alice")


@FUZZ
@given(data=st.data())
def test_a_mutated_patch_is_never_installed(
    agentd, attested: tuple[World, str], tmp_path: Path, data: st.DataObject
) -> None:
    w, claim = attested
    before = w.files()
    mutant = data.draw(mutated_patch(w.patch.read_bytes()))
    assume(mutant != w.patch.read_bytes())
    given_patch = tmp_path / "given.patch"
    given_patch.write_bytes(mutant)
    r = agentd(*install_args(w, "--attestation", claim, "--verifier", "alice", patch=given_patch))
    done_or_refused_in_one_line(r, must_fail=True, codes=(3,))
    assert w.files() == before and not w.home.routes.install_record(CODE, w.release).exists()


@FUZZ
@given(data=st.data())
def test_a_mutated_session_import(agentd, invoices: Path, tmp_path: Path, data: st.DataObject) -> None:  # noqa: F811
    mutant = data.draw(mutated_json(TRANSCRIPT))
    given_file = tmp_path / "transcript.json"
    given_file.write_bytes(mutant)
    r = agentd("sessions", "import", given_file, "--profile", "invoices")
    done_or_refused_in_one_line(r, must_fail=not parses(mutant, json_lines), codes=(1,))


SIGNER = Wallet.from_seed(bytes(range(32)), "publisher")  # one key, so every run signs alike
STATEMENT = statement_about(
    {"release": "ab" * 8, "patch": "cd" * 32}, "https://agentd.dev/release/v1", {"files": ["agent.py"]}
)


@st.composite
def mutated_envelope(draw: st.DrawFn) -> bytes:
    """The envelope mutated as a file, or a mutated statement signed as it is."""
    if draw(st.booleans()):
        return draw(mutated_json(statement_envelope(STATEMENT, SIGNER)))
    statement = draw(mutants(STATEMENT))
    try:
        return json_file(statement_envelope(statement, SIGNER))
    except ImproverError:  # it has no canonical form (a NaN), so no one could sign it
        reject()


@FUZZ
@given(data=st.data())
def test_a_mutated_statement_envelope(agentd, tmp_path: Path, data: st.DataObject) -> None:
    mutant = data.draw(mutated_envelope())
    given_file = tmp_path / "statement.json"
    given_file.write_bytes(mutant)
    r = agentd("verify-statement", given_file, "--key", SIGNER.public_key.hex())
    done_or_refused_in_one_line(r, must_fail=not parses(mutant, json.loads), codes=(3,))


def signed_envelope(payload: bytes) -> bytes:
    """`payload`, whatever it holds, in a DSSE envelope SIGNER signed."""
    kind = "application/vnd.in-toto+json"
    sig = SIGNER.sign(pae(kind.encode(), payload))
    signature = {"keyid": SIGNER.id, "sig": base64.b64encode(sig).decode()}
    return json_file({"payload": base64.b64encode(payload).decode(), "payloadType": kind, "signatures": [signature]})


DEEP = b"[" * 5000 + b"]" * 5000  # JSON that Python's parser gives up on (a RecursionError)


@pytest.mark.parametrize(
    "command, file, said, code",
    [
        (
            ["improve", "validate", "{file}", "--out", "out.json"],
            DEEP,
            "not a JSON task set (nested deeper than 100",
            1,
        ),
        (["verify-statement", "{file}", "--key", SIGNER.public_key.hex()], DEEP, "not a DSSE envelope", 3),
        (["verify-statement", "{file}", "--key", SIGNER.public_key.hex()], signed_envelope(DEEP), "not JSON", 3),
    ],
    ids=["a task set", "an envelope", "a signed payload"],
)
def test_a_file_nested_too_deep_to_parse_is_refused_in_one_line(
    agentd, tmp_path: Path, monkeypatch, command: list[str], file: bytes, said: str, code: int
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "given.json").write_bytes(file)
    r = agentd(*[part.format(file="given.json") for part in command])
    done_or_refused_in_one_line(r, must_fail=True, codes=(code,))
    assert said in r.err and not (tmp_path / "out.json").exists()


def test_the_fuzzed_files_are_real_ones(agentd, invoices: Path, tmp_path: Path) -> None:  # noqa: F811
    """Unmutated, each file does its work: the mutants start from files agentd takes."""
    shutil.copy(TASKS, tmp_path / "tasks.json")
    assert agentd("improve", "validate", tmp_path / "tasks.json", "--out", tmp_path / "v.json").code == 0
    (tmp_path / "t.json").write_text(json.dumps(TRANSCRIPT))
    assert agentd("sessions", "import", tmp_path / "t.json", "--profile", "invoices").code == 0
    (tmp_path / "s.json").write_bytes(json_file(statement_envelope(STATEMENT, SIGNER)))
    assert agentd("verify-statement", tmp_path / "s.json", "--key", SIGNER.public_key.hex()).code == 0
    assert agentd("schedule", "add", "invoices", "harvest", "0 3 * * *").code == 0
    toml = invoices / "profile.toml"
    toml.write_text(toml.read_text() + RUBRIC)
    assert agentd("profile", "show", "invoices").code == 0
