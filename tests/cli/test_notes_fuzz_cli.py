"""What agentd reads of checkpoints and witnesses, made by hypothesis: checkpoint and
cosigned-note files (verify --checkpoint, checkpoint --add, witness cosign, fork-proof) and
the list of trusted witnesses (verify --witness-key). Whatever they hold, a command does
its work or says what is wrong in one line with a non-zero exit, never a traceback.

The examples share one home and witness: what a command keeps of a well-formed note (a
cosignature line, the witness's last checkpoint) is what the next example finds, as a
user running them one after another would."""

from __future__ import annotations

import base64
from itertools import chain

from hypothesis import HealthCheck, given, settings, strategies as st

from ledger import cosignature, parse_witness_vkey
from tests.cli.test_ledger_cli import _log_key_of, _tour, _witness
from tests.cli.test_wallet_cli import one_error_line
from tests.homekit import Result

SHARED_HOME = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture], database=None
)
ANY_TEXT = st.text(st.characters(exclude_categories=()), max_size=120)  # lone surrogates and NULs too
PIECES = st.one_of(
    ANY_TEXT, st.integers(-1, 10**40).map(str), st.binary(max_size=80).map(lambda b: base64.b64encode(b).decode())
)


def _encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # a lone surrogate makes bytes that are not UTF-8


def _mutated(lines: list[str], op: str, at: int, piece: str) -> list[str]:
    at %= len(lines) + 1
    if op == "drop":
        return lines[:at] + lines[at + 1 :]
    if op == "replace":
        return [*lines[:at], piece, *lines[at + 1 :]]
    if op == "sign":  # a well-formed signature line, by no one
        piece = f"\u2014 {''.join(piece.split()) or 'w'} {base64.b64encode(_encoded(piece)).decode()}"
    return [*lines[:at], piece, *lines[at:]]


def _notes(valid: str) -> st.SearchStrategy[tuple[bytes, bool]]:
    """A note file's bytes, and whether it was made from `valid` (and so may still be one)."""
    ops = st.tuples(st.sampled_from(["drop", "replace", "insert", "sign"]), st.integers(0, 20), PIECES)
    mutated = st.lists(ops, min_size=1, max_size=3).map(lambda todo: "\n".join(_apply(valid.split("\n"), todo)))
    garbage = st.one_of(st.binary(max_size=400), ANY_TEXT.map(_encoded))
    return st.one_of(garbage.map(lambda raw: (raw, False)), mutated.map(lambda text: (_encoded(text), True)))


def _apply(lines: list[str], todo: list[tuple[str, int, str]]) -> list[str]:
    for op, at, piece in todo:
        lines = _mutated(lines, op, at, piece)
    return lines


def _said_clearly(r: Result, args: tuple[str, ...]) -> None:
    assert "Traceback" not in r.err, (args, r.err)
    if r.code != 0:
        one_error_line(r, code=r.code, prefix="agentd: check failed: " if r.code == 3 else "agentd: error: ")


def test_any_note_file_is_read_or_refused_in_one_line(agentd, home, tmp_path) -> None:
    _tour(agentd)
    valid = agentd("ledger", "checkpoint").out
    witness = tmp_path / "witness"
    _witness(agentd, witness)
    log_vkey = _log_key_of(agentd)
    note, other = tmp_path / "note.txt", tmp_path / "valid.txt"
    other.write_text(valid)

    @SHARED_HOME
    @given(_notes(valid))
    def read_back(made: tuple[bytes, bool]) -> None:
        raw, from_valid = made
        note.write_bytes(raw)
        for args in (
            ("ledger", "verify", "--checkpoint", note),
            ("ledger", "checkpoint", "--add", note),
            ("--home", witness, "witness", "cosign", note, "--log-key", log_vkey),
            ("ledger", "fork-proof", note, other),
        ):
            r = agentd(*args)
            _said_clearly(r, args)
            assert r.code != 0 or from_valid, (args, raw)

    read_back()


def _renamed(name: str, key: bytes, vkey: str) -> str:
    """`key` as a verifier key under `name`; for a name that is not text (a lone
    surrogate), in a verifier key's form anyway."""
    try:
        return cosignature.vkey(name, key)
    except UnicodeEncodeError:
        return f"{name}+00000000+{vkey.split('+')[2]}"


def _trusted(vkey: str) -> st.SearchStrategy[str]:
    """A --witness-key value: the witness's own, its key under another name, or not one."""
    _, key = parse_witness_vkey(vkey)
    renamed = ANY_TEXT.map(lambda name: _renamed(name, key, vkey))
    typo = st.tuples(st.integers(0, len(vkey) - 1), st.characters()).map(
        lambda edit: vkey[: edit[0]] + edit[1] + vkey[edit[0] + 1 :]
    )
    return st.one_of(st.just(vkey), renamed, typo, ANY_TEXT)


def test_any_list_of_trusted_witnesses_is_used_or_refused_in_one_line(agentd, home, tmp_path) -> None:
    _tour(agentd)
    note = tmp_path / "cp.txt"
    note.write_text(agentd("ledger", "checkpoint").out)
    vkey = _witness(agentd, tmp_path / "witness")
    cosigned = agentd("--home", tmp_path / "witness", "witness", "cosign", note, "--log-key", _log_key_of(agentd))
    note.write_text(cosigned.out)
    assert agentd("ledger", "checkpoint", "--add", note).code == 0

    @SHARED_HOME
    @given(st.lists(_trusted(vkey), min_size=1, max_size=4), st.integers(1, 5))
    def trusted(keys: list[str], quorum: int) -> None:
        args = (
            "ledger",
            "verify",
            "--witnesses",
            str(quorum),
            *chain.from_iterable(("--witness-key", k) for k in keys),
        )
        r = agentd(*args)
        _said_clearly(r, args)
        assert r.code != 0 or (vkey in keys and quorum == 1), (args, r.out)

    trusted()
