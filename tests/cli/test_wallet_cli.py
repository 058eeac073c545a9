"""`agentd wallet` and `agentd init`, as a user runs them."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from agentd.cli import invoke
from agentd.home import Home
from agentd.wallets import log_key
from tests.atonce import all_at_once
from tests.mounts import read_only_view

PASS = {"AGENTD_WALLET_PASSPHRASE": "correct horse"}


def one_error_line(r, code: int = 1, prefix: str = "agentd: error: ") -> str:
    """The one line a failed command printed: an error (exit 1), a wrong option or value
    (exit 2, which may add one hint line naming the command's help), or with code 3 and
    prefix "agentd: check failed: ", a failed check."""
    assert r.code == code, (r.out, r.err)
    lines = r.err.strip().splitlines()
    if code == 2 and len(lines) == 2:
        assert lines[1].startswith("(see: agentd ") and lines[1].endswith(" --help)"), r.err
        lines = lines[:1]
    assert len(lines) == 1 and lines[0].startswith(prefix), r.err
    assert "Traceback" not in r.err
    return lines[0]


def test_init_creates_the_home_and_the_log_key(agentd, home) -> None:
    r = agentd("init")
    assert r.code == 0, r.err
    key_file = home.root / "log-key.json"
    assert f"home: {home.root} (created)" in r.out
    assert f"log key: {key_file}" in r.out and "created" in r.out
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    again = agentd("init")
    assert again.code == 0 and "already there" in again.out
    assert json.loads(key_file.read_text())["id"] in again.out


def test_new_list_show_fund_and_transfer(agentd, home) -> None:
    r = agentd("wallet", "new", "alice")
    assert r.code == 0, r.err
    alice = json.loads(agentd("wallet", "show", "alice", "--json").out)
    assert alice["id"] in r.out and alice["balance_cents"] == 0 and alice["encrypted"] is False
    assert stat.S_IMODE(os.stat(home.wallets_dir / "alice.json").st_mode) == 0o600
    agentd("wallet", "new", "bob")

    r = agentd("wallet", "fund", "alice", "12.50")
    assert r.code == 0, r.err
    assert "minted 12.50 USD to alice: Pulse 2" in r.out and "balance of alice: 12.50 USD" in r.out

    r = agentd("wallet", "transfer", "alice", "bob", "2.25", "--memo", "lunch")
    assert r.code == 0, r.err
    assert "sent 2.25 USD from alice to bob: Pulse 3" in r.out

    listed = {w["name"]: w for w in json.loads(agentd("wallet", "list", "--json").out)}
    assert (listed["alice"]["balance_cents"], listed["bob"]["balance_cents"]) == (1025, 225)
    table = agentd("wallet", "list").out.splitlines()
    assert table[0].split() == ["NAME", "ID", "BALANCE", "KEY"]
    assert table[1].split()[:4] == ["alice", alice["id"], "10.25", "USD"]
    shown = agentd("wallet", "show", "bob").out
    assert "2.25 USD" in shown and "public key" in shown


def test_an_overdraft_is_refused_in_one_line(agentd) -> None:
    agentd("wallet", "new", "alice")
    agentd("wallet", "new", "bob")
    agentd("wallet", "fund", "alice", "1")
    line = one_error_line(agentd("wallet", "transfer", "alice", "bob", "1.01"))
    assert (
        line
        == "agentd: error: alice holds 1.00 USD, less than the 1.01 USD to send; fund it first (agentd wallet fund alice USD)"
    )
    assert json.loads(agentd("wallet", "show", "alice", "--json").out)["balance_cents"] == 100


def test_amounts_must_be_whole_cents(agentd) -> None:
    agentd("wallet", "new", "alice")
    assert "two decimals" in one_error_line(agentd("wallet", "fund", "alice", "1.005"), code=2)
    assert "not an amount" in one_error_line(agentd("wallet", "fund", "alice", "abc"), code=2)
    assert "above 0" in one_error_line(agentd("wallet", "fund", "alice", "--", "-3"), code=2)
    assert "above 0" in one_error_line(agentd("wallet", "fund", "alice", "-5"), code=2)
    assert "above 0" in one_error_line(agentd("wallet", "transfer", "alice", "alice", "-0.01"), code=2)
    assert "give at most 90071992547409.91 USD" in one_error_line(
        agentd("wallet", "fund", "alice", "90071992547410"), code=2
    )
    assert json.loads(agentd("wallet", "show", "alice", "--json").out)["balance_cents"] == 0


def test_an_encrypted_wallet_needs_its_passphrase(agentd, home) -> None:
    r = agentd("wallet", "new", "carol", env=PASS)
    assert r.code == 0 and "(encrypted)" in r.out
    text = (home.wallets_dir / "carol.json").read_text()
    assert '"plain"' not in text and "scrypt" in text and "chacha20-poly1305" in text
    agentd("wallet", "new", "dave")
    agentd("wallet", "fund", "carol", "5")
    assert agentd("wallet", "transfer", "carol", "dave", "1", env=PASS).code == 0
    # Reading a sealed wallet's id and balance needs no passphrase.
    assert agentd("wallet", "show", "carol").code == 0

    line = one_error_line(agentd("wallet", "transfer", "carol", "dave", "1", env={"AGENTD_WALLET_PASSPHRASE": "wrong"}))
    assert "wrong passphrase" in line
    line = one_error_line(agentd("wallet", "transfer", "carol", "dave", "1"))
    assert "encrypted" in line and "AGENTD_WALLET_PASSPHRASE" in line


def test_unknown_missing_and_corrupt_wallets_are_one_line_each(agentd, home) -> None:
    line = one_error_line(agentd("wallet", "show", "nobody"))
    assert "no wallet named nobody" in line and "agentd wallet new nobody" in line
    agentd("wallet", "new", "alice")
    (home.wallets_dir / "alice.json").write_text('{"format": "agentd-wallet/v1", "name": "alice"')
    assert "corrupt" in one_error_line(agentd("wallet", "show", "alice"))
    assert "corrupt" in one_error_line(agentd("wallet", "list"))
    (home.wallets_dir / "alice.json").unlink()
    assert "no wallet named alice" in one_error_line(agentd("wallet", "transfer", "alice", "0" * 32, "1"))
    agentd("wallet", "new", "bob")
    assert "already exists" in one_error_line(agentd("wallet", "new", "bob"))
    assert "bad wallet name" in one_error_line(agentd("wallet", "new", "../evil"))


def test_a_mistyped_wallet_names_the_nearest_and_a_strangers_is_never_to_be_made_here(agentd, home) -> None:
    agentd("wallet", "new", "carol")
    assert "did you mean 'carol'?" in one_error_line(agentd("wallet", "show", "carl"))
    # An adjudicator is someone else: the advice is their id, never a key made here in their name.
    line = one_error_line(agentd("bond", "post", "carol", "1", "--adjudicator", "judge"))
    assert "no wallet named judge" in line and "give its id (32 hex digits)" in line
    assert "wallet new" not in line


def test_a_corrupt_log_key_is_one_line(agentd, home) -> None:
    agentd("init")
    (home.root / "log-key.json").write_text("garbage")
    line = one_error_line(agentd("wallet", "list"))
    assert "log's key" in line and "corrupt" in line


def _log_key_id(root: str) -> str:  # runs in a forked process
    return log_key(Home(Path(root))).id


def _new_wallet(root: str, name: str) -> int:  # runs in a forked process
    return invoke(["--home", root, "wallet", "new", name, "--json"])


def test_processes_starting_the_log_key_at_once_all_get_the_same_key(home) -> None:
    # A fresh home each round. A few rounds: one alone would let a replacing write slip
    # by about one time in five.
    for round_ in range(5):
        root = home.root / f"round{round_}"
        results = all_at_once(6, _log_key_id, str(root))
        on_disk = json.loads((root / "log-key.json").read_text())["id"]
        assert [key for key, _ in results] == [on_disk] * 6, results


def test_two_wallets_of_one_name_cannot_both_be_created(agentd, home) -> None:
    assert agentd("init").code == 0
    for round_ in range(2):
        name = f"alice{round_}"
        results = all_at_once(4, _new_wallet, str(home.root), name)
        made = [json.loads(out) for code, out in results if code == 0]
        refused = [out for code, out in results if code != 0]
        assert len(made) == 1, results
        assert all(
            out.strip() == f"agentd: error: wallet {name} already exists ({home.wallets_dir / name}.json)"
            for out in refused
        )
        assert json.loads((home.wallets_dir / f"{name}.json").read_text())["id"] == made[0]["id"]


def test_a_missing_log_key_is_not_replaced_once_the_log_has_entries(agentd, home) -> None:
    agentd("wallet", "new", "alice")
    assert agentd("wallet", "fund", "alice", "5").code == 0
    key_file = home.root / "log-key.json"
    started_by = json.loads(key_file.read_text())["id"]
    saved = key_file.read_bytes()
    key_file.unlink()
    for args in (("wallet", "fund", "alice", "1"), ("init",), ("ledger", "checkpoint")):
        line = one_error_line(agentd(*args))
        assert (
            f"{key_file} is missing but the ledger at sqlite:///{home.ledger_db} was started by key {started_by}"
            in line
        )
        assert "restore the file" in line
        assert not key_file.exists()
    key_file.write_bytes(saved)
    assert agentd("wallet", "fund", "alice", "1").code == 0


LOG_PASS = {"AGENTD_LOG_PASSPHRASE": "log passphrase"}


def test_the_log_key_is_sealed_when_its_passphrase_is_set(agentd, home) -> None:
    assert agentd("init", env=LOG_PASS).code == 0
    key_file = home.root / "log-key.json"
    doc = json.loads(key_file.read_text())
    assert "plain" not in doc["seed"] and doc["seed"]["kdf"] == "scrypt" and doc["seed"]["n"] >= 2**17
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    agentd("wallet", "new", "alice")
    funded = agentd("wallet", "fund", "alice", "1", "--json", env=LOG_PASS)
    assert funded.code == 0, funded.err
    assert json.loads(funded.out)["receipt"]["checkpoint"] is not None
    line = one_error_line(agentd("wallet", "fund", "alice", "1"))
    assert f"{key_file} is sealed: set AGENTD_LOG_PASSPHRASE to its passphrase" in line
    line = one_error_line(agentd("ledger", "checkpoint", env={"AGENTD_LOG_PASSPHRASE": "wrong"}))
    assert f"wrong passphrase for {key_file}" in line and "AGENTD_LOG_PASSPHRASE" in line
    assert agentd("ledger", "verify", env=LOG_PASS).code == 0


def test_a_plaintext_log_key_is_not_used_once_its_passphrase_is_set(agentd, home) -> None:
    agentd("init")
    key_file = home.root / "log-key.json"
    started = json.loads(key_file.read_text())
    agentd("wallet", "new", "alice")
    line = one_error_line(agentd("wallet", "fund", "alice", "1", env=LOG_PASS))
    assert f"AGENTD_LOG_PASSPHRASE is set but {key_file} holds the log's key unencrypted" in line
    assert "agentd wallet seal-log-key" in line
    assert "AGENTD_LOG_PASSPHRASE" in one_error_line(agentd("wallet", "seal-log-key"))
    sealed = agentd("wallet", "seal-log-key", env=LOG_PASS)
    assert sealed.code == 0 and f"sealed {key_file}" in sealed.out
    doc = json.loads(key_file.read_text())
    assert (doc["id"], "plain" in doc["seed"]) == (started["id"], False)
    assert stat.S_IMODE(os.stat(key_file).st_mode) == 0o600
    assert [p.name for p in home.root.iterdir() if p.name.startswith(".")] == []
    assert agentd("wallet", "fund", "alice", "1", env=LOG_PASS).code == 0
    assert "sealed already" in one_error_line(agentd("wallet", "seal-log-key", env=LOG_PASS))


def test_no_balance_grows_past_the_largest_amount(agentd) -> None:
    agentd("wallet", "new", "alice")
    agentd("wallet", "new", "bob")
    assert agentd("wallet", "fund", "alice", "90071992547409.91").code == 0
    line = one_error_line(agentd("wallet", "fund", "alice", "0.01"))
    assert "cannot receive 1 more" in line and "may not exceed 9007199254740991 cents" in line
    assert agentd("wallet", "fund", "bob", "0.01").code == 0
    assert "may not exceed" in one_error_line(agentd("wallet", "transfer", "bob", "alice", "0.01"))
    balances = {w["name"]: w["balance_cents"] for w in json.loads(agentd("wallet", "list", "--json").out)}
    assert balances == {"alice": 2**53 - 1, "bob": 1}


def test_a_sealed_log_key_locks_no_auditor_out(agentd, home) -> None:
    agentd("init")
    agentd("wallet", "new", "alice")
    assert agentd("wallet", "fund", "alice", "3").code == 0
    assert agentd("wallet", "seal-log-key", env=LOG_PASS).code == 0
    # Reading needs only the log's public key: no passphrase is asked for.
    assert agentd("ledger", "verify").code == 0
    assert [e["kind"] for e in json.loads(agentd("ledger", "log", "--json").out)][-1] == "funds.mint/v1"
    copy = home.root.parent / "copy.jsonl"
    assert agentd("ledger", "export", str(copy)).code == 0
    assert len(copy.read_text().splitlines()) >= 2
    assert {w["name"]: w["balance_cents"] for w in json.loads(agentd("wallet", "list", "--json").out)} == {"alice": 300}
    # Signing still needs it.
    assert "AGENTD_LOG_PASSPHRASE" in one_error_line(agentd("wallet", "fund", "alice", "1"))


def test_a_read_only_copy_of_a_home_with_a_sealed_log_key_is_audited_without_its_passphrase(agentd, home) -> None:
    agentd("init")
    agentd("wallet", "new", "alice")
    assert agentd("wallet", "fund", "alice", "3").code == 0
    assert agentd("wallet", "transfer", "alice", "log", "1").code == 0
    assert agentd("wallet", "seal-log-key", env=LOG_PASS).code == 0
    with read_only_view(home.root) as view:
        # What an auditor given the home runs, holding no secret of it.
        verified = agentd("--home", view, "ledger", "verify")
        assert verified.code == 0 and "ok: 3 entries, 3 signatures and every rule hold" in verified.out, verified.err
        assert json.loads(agentd("--home", view, "ledger", "verify", "--json").out)["ok"] is True
        listed = json.loads(agentd("--home", view, "ledger", "log", "--json").out)
        assert [(e["kind"], e["author_name"]) for e in listed][1:] == [
            ("funds.mint/v1", "log"),
            ("funds.transfer/v1", "alice"),
        ]
        exported = agentd("--home", view, "ledger", "export", "-")
        assert exported.code == 0 and len(exported.out.splitlines()) == 3
        wallets = json.loads(agentd("--home", view, "wallet", "list", "--json").out)
        assert {w["name"]: w["balance_cents"] for w in wallets} == {"alice": 200}
        # Appending needs the log's key, and says what to set; the copy is unchanged.
        line = one_error_line(agentd("--home", view, "wallet", "fund", "alice", "1"))
        assert line == f"agentd: error: {view / 'log-key.json'} is sealed: set AGENTD_LOG_PASSPHRASE to its passphrase"
    assert len(json.loads(agentd("ledger", "log", "--json").out)) == 3
