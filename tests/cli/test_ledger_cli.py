"""`agentd ledger`, as a user and an offline auditor run it."""

from __future__ import annotations

import base64
import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys

from agentd.app.ledger import open_ledger
from agentd.wallets import log_key
from ledger import MINT, Wallet, checkpoint as notes, merkle
from ledger.entry import Entry
from tests.cli.test_wallet_cli import one_error_line


def _tour(agentd, transfers: int = 3) -> None:
    for name in ("alice", "bob"):
        assert agentd("wallet", "new", name).code == 0
    assert agentd("wallet", "fund", "alice", "10").code == 0
    for i in range(transfers):
        assert agentd("wallet", "transfer", "alice", "bob", "0.01", "--memo", str(i)).code == 0


def test_log_lists_and_filters(agentd) -> None:
    _tour(agentd)
    table = agentd("ledger", "log").out.splitlines()
    assert table[0].split() == ["PULSE", "AT", "KIND", "AUTHOR", "CLAIM"]
    assert [row.split()[2] for row in table[1:]] == ["ledger.genesis/v1", "funds.mint/v1"] + ["funds.transfer/v1"] * 3
    assert table[2].split()[3] == "log" and table[3].split()[3] == "alice"

    lines = json.loads(agentd("ledger", "log", "--json", "--kind", "funds.transfer/v1", "--from", "4").out)
    assert [x["pulse"] for x in lines] == [4, 5]
    assert {x["author_name"] for x in lines} == {"alice"} and lines[0]["body"]["memo"] == "1"
    by_alice = json.loads(agentd("ledger", "log", "--json", "--author", "alice").out)
    assert len(by_alice) == 3
    assert agentd("ledger", "log", "--author", "nobody").code == 1
    last = json.loads(agentd("ledger", "log", "--json", "--last", "2", "--author", "alice").out)
    assert [x["pulse"] for x in last] == [4, 5]  # the last two that match, in Pulse order
    assert [x["pulse"] for x in json.loads(agentd("ledger", "log", "--json", "--last", "9", "--from", "4").out)] == [
        4,
        5,
    ]
    r = agentd("ledger", "log", "--last", "0")
    assert r.code == 2 and "--last" in r.err


def test_show_by_pulse_and_by_claim(agentd) -> None:
    _tour(agentd, transfers=1)
    shown = json.loads(agentd("ledger", "show", "3", "--json").out)
    assert (shown["pulse"], shown["kind"], shown["author_name"], shown["body"]["cents"]) == (
        3,
        "funds.transfer/v1",
        "alice",
        1,
    )
    entry = Entry.parse(base64.b64decode(shown["entry"]))
    assert entry.claim_id == shown["claim"]
    by_claim = agentd("ledger", "show", shown["claim"][:12])
    assert by_claim.code == 0 and "funds.transfer/v1" in by_claim.out and shown["claim"] in by_claim.out
    missing = agentd("ledger", "show", "99")
    assert missing.code == 1 and "no Pulse 99" in missing.err


def test_an_auditor_checks_proofs_offline(agentd, home) -> None:
    _tour(agentd)
    note = agentd("ledger", "checkpoint").out
    log_key = base64.b64decode(json.loads((home.root / "log-key.json").read_text())["public_key"])
    origin = note.splitlines()[0]
    cp = notes.verify(note, log_key, origin)
    assert cp.size == 5

    proof = json.loads(agentd("ledger", "prove", "4").out)
    assert proof["checkpoint"] == note
    leaf = base64.b64decode(proof["leaf_hash"])
    path = [base64.b64decode(p) for p in proof["proof"]]
    merkle.verify_inclusion(proof["leaf_index"], proof["tree_size"], leaf, path, cp.root)
    shown = json.loads(agentd("ledger", "show", "4", "--json").out)
    assert Entry.parse(base64.b64decode(shown["entry"])).leaf_hash == leaf

    agentd("wallet", "transfer", "alice", "bob", "1")
    grown = json.loads(agentd("ledger", "prove", "--from-size", "5").out)
    later = notes.verify(agentd("ledger", "checkpoint").out, log_key, origin)
    assert (grown["size1"], grown["size2"]) == (5, 6) and grown["checkpoint"] is not None
    merkle.verify_consistency(5, 6, [base64.b64decode(p) for p in grown["proof"]], cp.root, later.root)

    old = json.loads(agentd("ledger", "prove", "2", "--size", "5").out)
    assert old["checkpoint"] == note and old["tree_size"] == 5
    assert agentd("ledger", "prove").code == 2


def test_verify_passes_then_names_the_first_bad_pulse(agentd, home) -> None:
    _tour(agentd)
    r = agentd("ledger", "verify", "--jobs", "2")
    assert r.code == 0, r.err
    assert "ok: 5 entries, 5 signatures" in r.out
    report = json.loads(agentd("ledger", "verify", "--json").out)
    assert report["ok"] is True and report["size"] == 5

    db = sqlite3.connect(home.ledger_db)
    raw = bytearray(db.execute("SELECT raw FROM ledger_entries WHERE pulse = 4").fetchone()[0])
    raw[30] ^= 4
    with db:
        db.execute("UPDATE ledger_entries SET raw = ? WHERE pulse = 4", [bytes(raw)])
    db.close()
    r = agentd("ledger", "verify")
    assert r.code == 3
    assert r.err.strip().startswith("agentd: check failed: Pulse 4: its bytes changed")
    r = agentd("ledger", "verify", "--json")
    assert r.code == 3 and json.loads(r.out)["first_bad_pulse"] == 4


def test_verify_with_a_saved_checkpoint_catches_truncation(agentd, home, tmp_path) -> None:
    _tour(agentd)
    saved = tmp_path / "checkpoint.txt"
    saved.write_text(agentd("ledger", "checkpoint").out)
    db = sqlite3.connect(home.ledger_db)
    leaves = [row[0] for row in db.execute("SELECT leaf FROM ledger_entries WHERE pulse <= 3 ORDER BY pulse")]
    with db:
        db.execute("DELETE FROM ledger_entries WHERE pulse > 3")
        db.execute("UPDATE ledger_head SET size = 3, root = ?", [merkle.root(leaves)])
        db.execute("DELETE FROM ledger_checkpoints")
        db.execute("DELETE FROM ledger_snapshot")
    db.close()
    assert agentd("ledger", "verify").code == 0
    r = agentd("ledger", "verify", "--checkpoint", saved)
    assert r.code == 3 and "Pulse 4: missing" in r.err and "covers 5 entries" in r.err


def test_export_then_import_elsewhere_and_verify(agentd, home, tmp_path) -> None:
    _tour(agentd)
    copy = tmp_path / "copy.jsonl"
    r = agentd("ledger", "export", copy)
    assert r.code == 0 and "exported 5 entries" in r.err
    lines = [json.loads(x) for x in copy.read_text().splitlines()]
    assert [x["pulse"] for x in lines] == [1, 2, 3, 4, 5]
    piped = agentd("ledger", "export", "-")
    assert piped.out == copy.read_text() and "exported 5 entries to -" in piped.err
    saved = tmp_path / "checkpoint.txt"
    saved.write_text(agentd("ledger", "checkpoint").out)

    auditor = tmp_path / "auditor"
    assert agentd("--home", auditor, "init").code == 0
    r = agentd("--home", auditor, "ledger", "import", copy)
    assert r.code == 0, r.err
    assert "imported 5 entries" in r.out
    r = agentd("--home", auditor, "ledger", "verify", "--checkpoint", saved)
    assert r.code == 0, r.err
    assert "consistent with checkpoints at sizes: 5" in r.out
    again = agentd("--home", auditor, "ledger", "import", copy)
    assert again.code == 1 and "not empty" in again.err
    # From stdin too; and a copy that is not text is one line, with nothing recorded.
    for other in ("piped", "binary"):
        assert agentd("--home", tmp_path / other, "init").code == 0
    piped = agentd("--home", tmp_path / "piped", "ledger", "import", "-", input=copy.read_text())
    assert piped.code == 0 and "imported 5 entries" in piped.out, piped.err
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(copy.read_bytes()[:200] + b"\xff\xfe" + copy.read_bytes()[200:])
    line = one_error_line(agentd("--home", tmp_path / "binary", "ledger", "import", binary))
    assert line.startswith(f"agentd: error: cannot read {binary}: ")
    assert json.loads(agentd("--home", tmp_path / "binary", "ledger", "log", "--json").out) == []

    tampered = tmp_path / "tampered.jsonl"
    bad = dict(
        lines[2],
        entry=base64.b64encode(
            base64.b64decode(lines[2]["entry"]).replace(b'"payloadType"', b'"payloadTyp\\u0065"')
        ).decode(),
    )
    tampered.write_text("\n".join(json.dumps(x) for x in [*lines[:2], bad, *lines[3:]]) + "\n")
    assert agentd("--home", tmp_path / "second", "init").code == 0
    r = agentd("--home", tmp_path / "second", "ledger", "import", tampered)
    assert r.code == 1 and "Pulse 3 refused" in r.err
    assert json.loads(agentd("--home", tmp_path / "second", "ledger", "log", "--json").out) == []


def test_a_copy_without_its_genesis_entry_is_not_imported(agentd, home, tmp_path) -> None:
    _tour(agentd)
    copy = tmp_path / "copy.jsonl"
    agentd("ledger", "export", copy)
    lines = [json.loads(x) for x in copy.read_text().splitlines()]
    headless = tmp_path / "headless.jsonl"
    headless.write_text("".join(json.dumps({**x, "pulse": x["pulse"] - 1}) + "\n" for x in lines[1:]))
    auditor = tmp_path / "auditor"
    assert agentd("--home", auditor, "init").code == 0
    line = one_error_line(agentd("--home", auditor, "ledger", "import", headless))
    assert "the copy does not start with its genesis entry" in line and "funds.mint/v1" in line
    assert json.loads(agentd("--home", auditor, "ledger", "log", "--json").out) == []


def _damage_pages(path) -> None:
    """Overwrites the start of every page after the first, as a bad disk might."""
    size = path.stat().st_size
    with open(path, "r+b") as f:
        for page in range(1, size // 4096):
            f.seek(page * 4096)
            f.write(b"\xff" * 16)


def test_a_damaged_ledger_file_is_a_failed_check_not_a_traceback(agentd, home) -> None:
    _tour(agentd)
    _damage_pages(home.ledger_db)
    line = one_error_line(agentd("ledger", "verify"), code=3, prefix="agentd: check failed: ")
    assert f"the ledger file {home.ledger_db} is damaged" in line and "restore it from a backup" in line
    r = agentd("ledger", "verify", "--json")
    report = json.loads(r.out)
    assert r.code == 3 and report["ok"] is False and "is damaged" in report["problem"]
    for args in (("ledger", "log"), ("ledger", "show", "2"), ("wallet", "fund", "alice", "1")):
        assert "is damaged" in one_error_line(agentd(*args))

    home.ledger_db.write_bytes(b"\xff" * 8192)
    line = one_error_line(agentd("ledger", "verify"), code=3, prefix="agentd: check failed: ")
    assert "is damaged (file is not a database)" in line


def test_export_errors_are_one_line_and_the_copy_is_readable_by_others(agentd, home, tmp_path) -> None:
    _tour(agentd)
    missing = tmp_path / "no-such-folder" / "copy.jsonl"
    line = one_error_line(agentd("ledger", "export", missing))
    assert f"cannot write {missing}: No such file or directory" in line
    assert not missing.parent.exists()
    line = one_error_line(agentd("ledger", "export", "/etc/passwd/copy.jsonl"))
    assert "cannot write /etc/passwd/copy.jsonl: Not a directory" in line

    umask = os.umask(0)
    os.umask(umask)
    copy = tmp_path / "copy.jsonl"
    assert agentd("ledger", "export", copy).code == 0
    assert stat.S_IMODE(copy.stat().st_mode) == 0o644 & ~umask
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_an_unreadable_wallet_file_does_not_stop_listings(agentd, home) -> None:
    _tour(agentd, transfers=1)
    (home.wallets_dir / "zed.json").write_text("not a key file")
    r = agentd("ledger", "log")
    assert r.code == 0, r.err
    assert r.err.startswith("agentd: warning: skipped wallet zed:") and "corrupt" in r.err
    assert [row.split()[3] for row in r.out.splitlines()[1:]] == ["log", "log", "alice"]
    shown = agentd("ledger", "show", "3", "--json")
    assert shown.code == 0 and json.loads(shown.out)["author_name"] == "alice"


def test_a_malformed_checkpoint_file_is_an_error_not_a_failed_check(agentd, home, tmp_path) -> None:
    _tour(agentd)
    note = agentd("ledger", "checkpoint").out
    bad = tmp_path / "bad.txt"
    for text in ("not a checkpoint\n", note.replace("\u2014 ", "\u2014"), note.rsplit(" ", 1)[0] + " !!!\n"):
        bad.write_text(text)
        assert f"{bad} is not a checkpoint" in one_error_line(agentd("ledger", "verify", "--checkpoint", bad))
    # A well-formed checkpoint the log does not extend is the log's problem.
    bad.write_text(note.replace(note.splitlines()[1], "99", 1))
    assert agentd("ledger", "verify", "--checkpoint", bad).code == 3


def test_checkpoint_as_json(agentd, home) -> None:
    _tour(agentd)
    note = agentd("ledger", "checkpoint").out
    r = agentd("ledger", "checkpoint", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    signed = notes.parse(note)
    log_key = json.loads((home.root / "log-key.json").read_text())["public_key"]
    assert doc == {
        "origin": signed.origin,
        "size": 5,
        "root": signed.root.hex(),
        "log_key": notes.vkey(signed.origin, base64.b64decode(log_key)),
        "cosignatures": [],
        "note": note,
    }
    assert doc["root"] == json.loads(agentd("ledger", "verify", "--json").out)["root"]


APPENDER = """
import sys
from pathlib import Path
from agentd.home import Home
from agentd.app.ledger import open_ledger
from agentd.wallets import load_wallet
from ledger import TRANSFER
home = Home(Path(sys.argv[1]))
alice = load_wallet(home, "alice")
with open_ledger(home) as ledger:
    n = 0
    while True:
        ledger.append(alice, TRANSFER, {"to": "0" * 32, "cents": 1, "memo": f"busy {n}"})
        n += 1
        if n == 1:
            print("appending", flush=True)
"""


def test_a_proof_and_its_checkpoint_cover_the_same_tree_while_others_append(agentd, home) -> None:
    _tour(agentd)
    assert agentd("wallet", "fund", "alice", "1000000").code == 0
    log_key = base64.b64decode(json.loads((home.root / "log-key.json").read_text())["public_key"])
    appender = subprocess.Popen(
        [sys.executable, "-c", APPENDER, str(home.root)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        assert appender.stdout.readline() == "appending\n", appender.stderr.read()
        for _ in range(5):
            r = agentd("ledger", "prove", "2")
            assert r.code == 0, r.err
            proof = json.loads(r.out)
            assert proof["checkpoint"] is not None
            cp = notes.verify(proof["checkpoint"], log_key, proof["checkpoint"].splitlines()[0])
            assert cp.size == proof["tree_size"]
            path = [base64.b64decode(p) for p in proof["proof"]]
            merkle.verify_inclusion(1, cp.size, base64.b64decode(proof["leaf_hash"]), path, cp.root)
    finally:
        appender.kill()
        appender.communicate()
    assert appender.returncode == -signal.SIGKILL


def test_import_with_a_checkpoint_refuses_a_copy_cut_short(agentd, home, tmp_path) -> None:
    _tour(agentd)
    copy, saved = tmp_path / "copy.jsonl", tmp_path / "checkpoint.txt"
    agentd("ledger", "export", copy)
    saved.write_text(agentd("ledger", "checkpoint").out)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(copy.read_text().splitlines(keepends=True)[:3]))
    for auditor in ("a1", "a2", "a3"):
        assert agentd("--home", tmp_path / auditor, "init").code == 0
    line = one_error_line(agentd("--home", tmp_path / "a1", "ledger", "import", cut, "--checkpoint", saved))
    assert "Pulse 4: missing: the checkpoint covers 5 entries and the copy holds 3" in line
    unchecked = agentd("--home", tmp_path / "a2", "ledger", "import", cut)
    assert (
        unchecked.code == 0 and "only self-consistency was checked" in unchecked.out and "--checkpoint" in unchecked.out
    )
    whole = agentd("--home", tmp_path / "a3", "ledger", "import", copy, "--checkpoint", saved)
    assert whole.code == 0 and "consistent with the checkpoint at size 5" in whole.out


def test_a_ledger_of_the_first_format_is_one_line_saying_what_to_do(agentd, home) -> None:
    home.ensure()
    db = sqlite3.connect(home.ledger_db)
    with db:
        db.execute("CREATE TABLE ledger_entries (pulse INTEGER PRIMARY KEY, raw BLOB)")
        db.execute("INSERT INTO ledger_entries VALUES (1, x'00'), (2, x'00')")
    db.close()
    for args in (("ledger", "log"), ("ledger", "verify"), ("wallet", "list")):
        line = one_error_line(agentd(*args))
        assert "holds 2 entries in format v1" in line and "can be replayed" in line and "move it aside" in line


def _log_key_of(agentd) -> str:
    return json.loads(agentd("ledger", "checkpoint", "--json").out)["log_key"]


def _witness(agentd, root) -> str:
    assert agentd("--home", root, "init").code == 0  # a witness keeps its key in a home of its own
    made = agentd("--home", root, "witness", "new", "--name", f"witness.example/{root.name}")
    assert made.code == 0, made.err
    return made.out.split("verifier key: ")[1].strip()


def test_a_witness_cosigns_and_verify_counts_it(agentd, home, tmp_path) -> None:
    _tour(agentd)
    w1, w2 = tmp_path / "w1", tmp_path / "w2"
    keys = [_witness(agentd, w1), _witness(agentd, w2)]
    assert json.loads(agentd("--home", w1, "witness", "show", "--json").out)["vkey"] == keys[0]
    first = tmp_path / "cp1.txt"
    first.write_text(agentd("ledger", "checkpoint").out)
    cosigned = tmp_path / "cosigned.txt"
    r = agentd("--home", w1, "witness", "cosign", first, "--log-key", _log_key_of(agentd))
    assert r.code == 0, r.err
    cosigned.write_text(r.out)
    kept = agentd("ledger", "checkpoint", "--add", cosigned)
    assert kept.code == 0 and kept.out == r.out and "cosigned by witness.example/w1" in kept.err
    assert json.loads(agentd("ledger", "checkpoint", "--json").out)["cosignatures"][0]["name"] == "witness.example/w1"
    ok = agentd("ledger", "verify", "--witnesses", "1", "--witness-key", keys[0], "--witness-key", keys[1])
    assert ok.code == 0, ok.err
    assert "witnessed: the checkpoint at size 5 is cosigned by witness.example/w1" in ok.out
    line = one_error_line(
        agentd("ledger", "verify", "--witnesses", "2", "--witness-key", keys[0], "--witness-key", keys[1]),
        code=3,
        prefix="agentd: check failed: ",
    )
    assert "carries 2 valid cosignatures" in line
    assert agentd("ledger", "verify", "--witnesses", "2", "--witness-key", keys[0]).code == 2
    assert agentd("ledger", "verify", "--witnesses", "1", "--witness-key", "not-a-key").code == 2
    # One witness trusted twice would count twice toward the quorum.
    twice = agentd("ledger", "verify", "--witnesses", "2", "--witness-key", keys[0], "--witness-key", keys[0])
    assert twice.code == 2 and "have one key: trust each witness once" in twice.err and "Traceback" not in twice.err
    # The log grows; the witness needs a proof that it grew from what it cosigned.
    agentd("wallet", "transfer", "alice", "bob", "1")
    second = tmp_path / "cp2.txt"
    second.write_text(agentd("ledger", "checkpoint").out)
    assert "needs a consistency proof from size 5 to size 6" in one_error_line(
        agentd("--home", w1, "witness", "cosign", second)
    )
    proof = tmp_path / "proof.json"
    proof.write_text(agentd("ledger", "prove", "--from-size", "5").out)
    assert agentd("--home", w1, "witness", "cosign", second, "--proof", proof).code == 0
    # A witness reading the ledger itself keeps its cosignature there.
    r = agentd("--home", w2, "witness", "cosign", "--ledger", f"sqlite:///{home.ledger_db}")
    assert r.code == 0 and "trusting the log's key its genesis entry names" in r.err
    assert "witness.example/w2" in agentd("ledger", "checkpoint").out
    assert agentd("ledger", "verify", "--witnesses", "1", "--witness-key", keys[1]).code == 0


def test_one_witness_key_under_two_names_is_not_two_cosigners(agentd, home, tmp_path) -> None:
    _tour(agentd)
    one, alias = tmp_path / "one", tmp_path / "alias"
    vkey = _witness(agentd, one)
    # The same key, moved to another home under another name: a second "witness" in name only.
    assert agentd("--home", alias, "init").code == 0
    key_file = json.loads((one / "witness" / "witness-key.json").read_text())
    (alias / "witness").mkdir()
    (alias / "witness" / "witness-key.json").write_text(json.dumps({**key_file, "name": "witness.example/alias"}))
    alias_vkey = json.loads(agentd("--home", alias, "witness", "show", "--json").out)["vkey"]
    assert alias_vkey != vkey and alias_vkey.split("+")[2] == vkey.split("+")[2]
    note = tmp_path / "cp.txt"
    note.write_text(agentd("ledger", "checkpoint").out)
    for witness in (one, alias):
        cosigned = agentd("--home", witness, "witness", "cosign", note, "--log-key", _log_key_of(agentd))
        assert cosigned.code == 0, cosigned.err
        note.write_text(cosigned.out)
    assert agentd("ledger", "checkpoint", "--add", note).code == 0
    assert "cosigned by witness.example/one" in agentd("ledger", "checkpoint").err
    line = one_error_line(
        agentd("ledger", "verify", "--witnesses", "2", "--witness-key", vkey, "--witness-key", alias_vkey), code=2
    )
    assert line == (
        "agentd: error: Invalid value for --witness-key: the witnesses witness.example/one and "
        "witness.example/alias have one key: trust each witness once, under one name"
    )
    assert agentd("ledger", "verify", "--witnesses", "1", "--witness-key", vkey).code == 0


def test_a_forked_log_is_refused_by_its_witness_with_a_fork_proof(agentd, home, tmp_path) -> None:
    _tour(agentd)
    witness, other = tmp_path / "w", tmp_path / "other"
    _witness(agentd, witness)
    log_key = _log_key_of(agentd)
    # Another home holding the same store and log key grows the log its own way.
    other.mkdir()
    with sqlite3.connect(home.ledger_db) as source, sqlite3.connect(other / "ledger.db") as copy:
        source.backup(copy)
    (other / "log-key.json").write_bytes((home.root / "log-key.json").read_bytes())
    agentd("wallet", "transfer", "alice", "bob", "0.50")
    ours = tmp_path / "ours.txt"
    ours.write_text(agentd("ledger", "checkpoint").out)
    assert agentd("--home", witness, "witness", "cosign", ours, "--log-key", log_key).code == 0
    agentd("--home", other, "wallet", "new", "carol")
    for _ in range(3):
        assert agentd("--home", other, "wallet", "fund", "carol", "1").code == 0
    theirs, proof = tmp_path / "theirs.txt", tmp_path / "proof.json"
    theirs.write_text(agentd("--home", other, "ledger", "checkpoint").out)
    proof.write_text(agentd("--home", other, "ledger", "prove", "--from-size", "6").out)
    refused = agentd("--home", witness, "witness", "cosign", theirs, "--proof", proof)
    line = one_error_line(refused, code=3, prefix="agentd: check failed: ")
    assert "refusing to cosign: the checkpoint of size 8" in line and "the log forked" in line
    saved = tmp_path / "fork.json"
    saved.write_text(refused.out)
    held = agentd("ledger", "fork-proof", "--check", saved, "--log-key", log_key)
    assert (
        held.code == 0
        and "holds: the log" in held.out
        and "signed checkpoints at sizes 6 and 8 that conflict" in held.out
    )
    # The other home, which holds the larger tree, proves the fork from its own ledger.
    made = agentd("--home", other, "ledger", "fork-proof", ours, theirs)
    assert made.code == 0 and json.loads(made.out)["checkpoints"] == [ours.read_text(), theirs.read_text()]
    bent = json.loads(saved.read_text())
    bent["prefix_root"] = base64.b64encode(notes.parse(ours.read_text()).root).decode()
    saved.write_text(json.dumps(bent))
    assert "the fork proof does not hold" in one_error_line(
        agentd("ledger", "fork-proof", "--check", saved), code=3, prefix="agentd: check failed: "
    )
    assert "consistent: the log only grew" in one_error_line(agentd("ledger", "fork-proof", ours, ours))
    assert agentd("ledger", "fork-proof", ours).code == 2


def test_the_checkpoint_policy_comes_from_the_home_s_config(agentd, home) -> None:
    home.ensure()
    home.config_path.write_text("[ledger]\ncheckpoint_every = 2\ncheckpoint_seconds = 3600\n")
    _tour(agentd, transfers=4)  # Pulses 1-2, signed at once, then transfers at Pulses 3 to 6
    assert json.loads(agentd("ledger", "verify", "--json").out)["checkpoints"] == [2, 4, 6]
    home.config_path.write_text("[ledger]\ncheckpoint_every = 0\n")
    assert "checkpoint_every" in one_error_line(agentd("wallet", "fund", "alice", "1"))


def test_a_long_log_lists_whole_and_a_reader_that_stops_early_ends_it_quietly(agentd, home) -> None:
    agentd("init")
    with open_ledger(home) as ledger:
        key = log_key(home)
        ledger.append_many([(key, MINT, {"to": Wallet.generate().id, "cents": 1}) for _ in range(3000)])
    listed = json.loads(agentd("ledger", "log", "--json").out)
    assert [x["pulse"] for x in listed] == list(range(1, 3002))  # the array whole, item by item
    # `| head -1`: the reader takes the header and goes; agentd stops there, without a word
    # (click's own handling of a closed pipe: exit 1).
    reader = subprocess.Popen(
        [sys.executable, "-m", "agentd", "--home", str(home.root), "ledger", "log"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert reader.stdout.readline().split() == [b"PULSE", b"AT", b"KIND", b"AUTHOR", b"CLAIM"]
    reader.stdout.close()
    assert reader.wait(timeout=60) == 1 and reader.stderr.read() == b""
