"""`agentd wallet` and `agentd init`, as a user runs them."""

from __future__ import annotations

import json
import os
import stat

PASS = {"AGENTD_WALLET_PASSPHRASE": "correct horse"}


def one_error_line(r) -> str:
    assert r.code == 1, (r.out, r.err)
    lines = r.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("agentd: error: "), r.err
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
    assert "overdraft" in line and "holds 100 cents" in line


def test_amounts_must_be_whole_cents(agentd) -> None:
    agentd("wallet", "new", "alice")
    assert "two decimals" in one_error_line(agentd("wallet", "fund", "alice", "1.005"))
    assert "not an amount" in one_error_line(agentd("wallet", "fund", "alice", "lots"))
    assert "above 0" in one_error_line(agentd("wallet", "fund", "alice", "--", "-3"))


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


def test_a_corrupt_log_key_is_one_line(agentd, home) -> None:
    agentd("init")
    (home.root / "log-key.json").write_text("garbage")
    line = one_error_line(agentd("wallet", "list"))
    assert "log's key" in line and "corrupt" in line
