"""Entries, canonical JSON, checkpoints and key files, each on its own."""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import orjson
import pytest
import rfc8785
from hypothesis import given, settings, strategies as st

from ledger import (
    Checkpoint,
    CheckpointError,
    Entry,
    EntryError,
    LedgerError,
    Wallet,
    canonical,
    checkpoint,
    entry as entry_module,
)
from ledger.audit import check_row
from ledger.entry import PAYLOAD_TYPE, leaf_hash, pae

LOG = "example.org/log"
from ledger import keys
from ledger.keys import (
    KeyFileExists,
    open_key_file,
    read_key_file,
    seal_key_file,
    signature_holds,
    wallet_id,
    write_key_file,
)

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**53) + 1, 2**53 - 1)
    | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_canonical_form_is_rfc8785(value: object) -> None:
    try:
        expected = rfc8785.dumps(value)
    except rfc8785.CanonicalizationError:
        with pytest.raises(LedgerError):
            canonical.dumps(value)
        return
    assert canonical.dumps(value) == expected
    assert canonical.dumps(canonical.loads(expected)) == expected


def test_canonical_loads_refuses_other_spellings() -> None:
    for raw in (b'{"b":1,"a":2}', b'{"a": 1}', b'{"a":1.0}', b'{"a":1,"a":1}', b'"\\u0041"', b"[1,]"):
        with pytest.raises(LedgerError):
            canonical.loads(raw)


def test_an_entry_round_trips_and_names_its_author() -> None:
    alice = Wallet.generate("alice")
    entry = Entry.create(alice, "funds.transfer/v1", {"to": "0" * 32, "cents": 5}, log=LOG, seq=7)
    again = Entry.parse(entry.raw)
    assert (again.kind, again.author, again.at, again.body) == (
        "funds.transfer/v1",
        alice.id,
        entry.at,
        {"to": "0" * 32, "cents": 5},
    )
    assert (again.log, again.seq) == (LOG, 7)
    assert again.author == wallet_id(alice.public_key) == alice.id
    assert len(alice.id) == 32
    assert again.claim_id == entry.claim_id == entry.leaf_hash.hex()
    envelope = json.loads(entry.raw)
    assert envelope["payloadType"] == PAYLOAD_TYPE
    assert rfc8785.dumps(envelope) == entry.raw
    payload = base64.b64decode(envelope["payload"])
    assert json.loads(payload) == {
        "v": 2,
        "kind": "funds.transfer/v1",
        "author": alice.id,
        "at": entry.at,
        "log": LOG,
        "seq": 7,
        "body": {"to": "0" * 32, "cents": 5},
    }
    assert signature_holds(alice.public_key, entry.signature, pae(PAYLOAD_TYPE.encode(), payload))


def _envelope(entry: Entry) -> dict:
    return json.loads(entry.raw)


def _signed(wallet: Wallet, payload: bytes, keyid: str | None = None) -> bytes:
    sig = wallet.sign(pae(PAYLOAD_TYPE.encode(), payload))
    doc = {
        "payload": base64.b64encode(payload).decode(),
        "payloadType": PAYLOAD_TYPE,
        "signatures": [{"keyid": keyid or wallet.public_key.hex(), "sig": base64.b64encode(sig).decode()}],
    }
    return rfc8785.dumps(doc)


def test_bad_entries_are_refused_with_the_reason() -> None:
    alice, mallory = Wallet.generate(), Wallet.generate()
    good = Entry.create(alice, "funds.transfer/v1", {"to": "0" * 32, "cents": 5}, log=LOG, seq=1)
    doc = _envelope(good)
    payload = base64.b64decode(doc["payload"])

    other = dict(
        doc, signatures=[{"keyid": doc["signatures"][0]["keyid"], "sig": base64.b64encode(mallory.sign(b"x")).decode()}]
    )
    cases = {
        "bad signature": rfc8785.dumps(other),
        "not in canonical form": json.dumps(doc, indent=1).encode(),
        "author": _signed(mallory, payload),  # mallory signs alice's payload with her own key
        "payload not in canonical form": _signed(alice, json.dumps(json.loads(payload), indent=1).encode()),
        "payloadType": rfc8785.dumps(dict(doc, payloadType="text/plain")),
        "not JSON": good.raw[:-1],
        "exactly one signature": rfc8785.dumps(dict(doc, signatures=doc["signatures"] * 2)),
    }
    for reason, raw in cases.items():
        with pytest.raises(EntryError, match=reason):
            Entry.parse(raw)


def test_payload_fields_are_checked() -> None:
    alice = Wallet.generate()
    base = {
        "v": 2,
        "kind": "funds.transfer/v1",
        "author": alice.id,
        "at": "2026-11-29T12:00:00Z",
        "log": LOG,
        "seq": 1,
        "body": {},
    }
    for change, reason in [
        ({"v": 1}, "version"),
        ({"log": "two words"}, "log must name"),
        ({"log": "a+b"}, "log must name"),
        ({"seq": 0}, "seq must be"),
        ({"seq": "1"}, "seq must be"),
        ({"seq": 1.5}, "seq must be"),
        ({"kind": "Transfer"}, "bad kind"),
        ({"at": "2026-02-30T12:00:00Z"}, "UTC time"),
        ({"at": "2026-11-29 12:00:00"}, "UTC time"),
        ({"body": []}, "body must be"),
        ({"extra": 1}, "exactly"),
    ]:
        with pytest.raises(EntryError, match=reason):
            Entry.parse(_signed(alice, rfc8785.dumps({**base, **change})))
    assert Entry.parse(_signed(alice, rfc8785.dumps(base))).body == {}


def test_create_refuses_what_cannot_be_an_entry() -> None:
    alice = Wallet.generate()
    with pytest.raises(EntryError, match="bad kind"):
        Entry.create(alice, "no-version", {}, log=LOG, seq=1)
    with pytest.raises(LedgerError, match="canonical"):
        Entry.create(alice, "test.note/v1", {"n": 2**60}, log=LOG, seq=1)
    with pytest.raises(LedgerError, match="canonical"):
        Entry.create(alice, "test.note/v1", {"n": float("nan")}, log=LOG, seq=1)
    with pytest.raises(EntryError, match="bad log"):
        Entry.create(alice, "test.note/v1", {}, log="", seq=1)
    with pytest.raises(EntryError, match="bad sequence number"):
        Entry.create(alice, "test.note/v1", {}, log=LOG, seq=0)


def test_a_v1_entry_is_refused_by_name() -> None:
    alice = Wallet.generate()
    payload = rfc8785.dumps(
        {"v": 1, "kind": "funds.transfer/v1", "author": alice.id, "at": "2026-11-29T12:00:00Z", "body": {}}
    )
    old = b"application/vnd.agentd.entry.v1+json"
    doc = {
        "payload": base64.b64encode(payload).decode(),
        "payloadType": old.decode(),
        "signatures": [
            {"keyid": alice.public_key.hex(), "sig": base64.b64encode(alice.sign(pae(old, payload))).decode()}
        ],
    }
    with pytest.raises(EntryError, match=r"a v1 entry .* could be replayed"):
        Entry.parse(rfc8785.dumps(doc))


def test_non_canonical_base64_is_refused() -> None:
    alice = Wallet.generate()
    doc = _envelope(Entry.create(alice, "test.note/v1", {}, log=LOG, seq=1))
    sig = doc["signatures"][0]["sig"]
    # 64 bytes encode with two spare bits before '=='; setting one keeps the bytes, changes the text.
    last = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".index(sig[-3])
    bent = sig[:-3] + "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[last | 1] + "=="
    assert base64.b64decode(bent) == base64.b64decode(sig) and bent != sig
    doc["signatures"][0]["sig"] = bent
    with pytest.raises(EntryError, match="canonical base64"):
        Entry.parse(rfc8785.dumps(doc))


def test_checkpoints_sign_and_verify() -> None:
    key, other = Wallet.generate(), Wallet.generate()
    note = checkpoint.sign(Checkpoint("example.org/log", 7, bytes(range(32))), key, "example.org/log")
    text, sig_line = note.split("\n\n")
    assert text == f"example.org/log\n7\n{base64.b64encode(bytes(range(32))).decode()}"
    assert sig_line.startswith("\u2014 example.org/log ") and sig_line.endswith("\n")
    assert checkpoint.verify(note, key.public_key, "example.org/log") == Checkpoint(
        "example.org/log", 7, bytes(range(32))
    )
    with pytest.raises(CheckpointError, match="no valid signature"):
        checkpoint.verify(note, other.public_key, "example.org/log")
    with pytest.raises(CheckpointError, match="no valid signature"):
        checkpoint.verify(note.replace("\n7\n", "\n8\n"), key.public_key, "example.org/log")
    with pytest.raises(CheckpointError, match="not a signed note"):
        checkpoint.verify(text, key.public_key, "example.org/log")
    # Signatures by other keys are ignored, as the signed-note format allows.
    extra = other.sign(b"whatever")
    cosigned = note + f"\u2014 witness {base64.b64encode(b'1234' + extra).decode()}\n"
    assert checkpoint.verify(cosigned, key.public_key, "example.org/log").size == 7


def test_a_malformed_signature_line_makes_a_malformed_note() -> None:
    key = Wallet.generate()
    note = checkpoint.sign(Checkpoint("example.org/log", 7, bytes(range(32))), key, "example.org/log")
    witness = "\u2014 witness " + base64.b64encode(b"1234" + key.sign(b"x")).decode()
    for line in (
        "\u2014 witness",
        "\u2014 witness !!notbase64!!",
        "\u2014 witness " + base64.b64encode(b"1234").decode(),
    ):
        with pytest.raises(CheckpointError, match="bad signature line"):
            checkpoint.parse(f"{note}{line}\n")
    assert checkpoint.parse(f"{note}{witness}\n").size == 7


def test_key_files_seal_the_seed(tmp_path: Path) -> None:
    alice = Wallet.generate("alice")
    path = tmp_path / "alice.json"
    write_key_file(path, alice, "correct horse")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert alice.seed.hex() not in path.read_text()
    assert base64.b64encode(alice.seed).decode() not in path.read_text()
    info = read_key_file(path)
    assert (info.name, info.id, info.public_key, info.encrypted) == ("alice", alice.id, alice.public_key, True)
    assert open_key_file(path, "correct horse").seed == alice.seed
    with pytest.raises(LedgerError, match="wrong passphrase"):
        open_key_file(path, "battery staple")
    with pytest.raises(LedgerError, match="encrypted"):
        open_key_file(path, None)
    with pytest.raises(KeyFileExists, match="already exists"):
        write_key_file(path, alice, None)
    assert open_key_file(path, "correct horse").seed == alice.seed


def test_new_key_files_use_scrypt_at_2_17_and_older_ones_still_open(tmp_path: Path, monkeypatch) -> None:
    alice = Wallet.generate("alice")
    new = tmp_path / "new.json"
    write_key_file(new, alice, "pw")
    assert json.loads(new.read_text())["seed"]["n"] == 2**17
    old = tmp_path / "old.json"
    monkeypatch.setattr(keys, "SCRYPT", {"n": 2**15, "r": 8, "p": 1})
    write_key_file(old, alice, "pw")
    monkeypatch.undo()
    assert json.loads(old.read_text())["seed"]["n"] == 2**15
    assert open_key_file(old, "pw").seed == alice.seed
    doc = json.loads(old.read_text())
    doc["seed"]["n"] = 2**30
    old.write_text(json.dumps(doc))
    with pytest.raises(LedgerError, match="beyond what a key file may use"):
        open_key_file(old, "pw")


def test_an_unencrypted_key_file_is_sealed_in_place(tmp_path: Path) -> None:
    bob = Wallet.generate("bob")
    path = tmp_path / "bob.json"
    write_key_file(path, bob, None)
    seal_key_file(path, "pw")
    assert read_key_file(path).encrypted and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert open_key_file(path, "pw").seed == bob.seed
    with pytest.raises(LedgerError, match="sealed already"):
        seal_key_file(path, "pw")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bob.json"]


def test_plain_and_corrupt_key_files(tmp_path: Path) -> None:
    bob = Wallet.generate("bob")
    path = tmp_path / "bob.json"
    write_key_file(path, bob, None)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert open_key_file(path, None).id == bob.id
    doc = json.loads(path.read_text())
    doc["seed"]["plain"] = base64.b64encode(Wallet.generate().seed).decode()
    path.write_text(json.dumps(doc))
    with pytest.raises(LedgerError, match="does not match"):
        open_key_file(path, None)
    path.write_text("{not json")
    with pytest.raises(LedgerError, match="corrupt"):
        read_key_file(path)
    with pytest.raises(LedgerError, match="does not exist"):
        read_key_file(tmp_path / "nobody.json")


_BASE = {"v": 2, "kind": "test.note/v1", "author": "", "at": "2026-11-29T12:00:00Z", "log": LOG, "seq": 1}


def _spellings(doc: dict) -> dict[str, bytes]:
    """The ways a payload may be printed: RFC 8785's, and others close to it."""
    return {
        "jcs": rfc8785.dumps(doc),
        "orjson sorted": orjson.dumps(doc, option=orjson.OPT_SORT_KEYS),
        "json sorted": json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(),
        "json ascii": json.dumps(doc, sort_keys=True, separators=(",", ":")).encode(),
        "spaced": json.dumps(doc, sort_keys=True).encode(),
        "unsorted": json.dumps(dict(reversed(doc.items())), separators=(",", ":")).encode(),
    }


@settings(max_examples=200, deadline=None)
@given(json_values)
def test_the_quick_payload_check_accepts_nothing_the_full_check_refuses(body: object) -> None:
    # Verify checks each payload by a quick path first: it may leave a payload to the
    # full check, but what it accepts the full check accepts, with the same fields.
    alice = Wallet.generate()
    doc = {**_BASE, "author": alice.id, "body": {"x": body}}
    for spelling, payload in _spellings(doc).items():
        quick = entry_module._plain_payload(payload)
        try:
            full = entry_module._checked_payload(payload)
        except EntryError:
            full = None
        if quick is not None:
            assert quick == full, spelling
        if full is None:
            with pytest.raises(EntryError):
                Entry.parse(_signed(alice, payload))
        else:
            assert Entry.parse(_signed(alice, payload)).body == full["body"]
    if canonical.plain(doc):
        assert entry_module._plain_payload(rfc8785.dumps(doc)) is not None  # the quick path is the common one


def test_signed_payloads_in_another_spelling_are_refused() -> None:
    # Each is what orjson or json prints for a value and RFC 8785 prints otherwise:
    # a float, an integer beyond 2**53, keys beyond the BMP (JCS sorts them by UTF-16
    # unit), an escape where JCS writes the character, and whitespace.
    alice = Wallet.generate()
    base = {**_BASE, "author": alice.id}
    for spelled in [
        b'{"n":1.0}',
        b'{"n":1e2}',
        b'{"n":1152921504606846976}',
        orjson.dumps({"\ue000": 1, "\U0001f600": 2}),
        b'{"a":"\\u0061"}',
        b'{"a":"\\u00e9"}',
        b'{"a": 1}',
    ]:
        payload = rfc8785.dumps({**base, "body": {}}).replace(b'"body":{}', b'"body":' + spelled)
        assert entry_module._plain_payload(payload) is None
        with pytest.raises(EntryError, match="canonical"):
            Entry.parse(_signed(alice, payload))
        raw = _signed(alice, payload)
        assert "canonical" in str(check_row(raw, leaf_hash(raw)))
