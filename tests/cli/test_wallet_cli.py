"""`agentd wallet` and `agentd init`, as a user runs them."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys

import pytest

PASS = {"AGENTD_WALLET_PASSPHRASE": "correct horse"}


def one_error_line(r, code: int = 1, prefix: str = "agentd: error: ") -> str:
    """The one line a failed command printed: an error (exit 1), or with code 3 and
    prefix "agentd: check failed: ", a failed check."""
    assert r.code == code, (r.out, r.err)
    lines = r.err.strip().splitlines()
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
    assert "overdraft" in line and "holds 100 cents" in line


def test_amounts_must_be_whole_cents(agentd) -> None:
    agentd("wallet", "new", "alice")
    assert "two decimals" in one_error_line(agentd("wallet", "fund", "alice", "1.005"))
    assert "not an amount" in one_error_line(agentd("wallet", "fund", "alice", "lots"))
    assert "above 0" in one_error_line(agentd("wallet", "fund", "alice", "--", "-3"))
    assert "give at most 90071992547409.91 USD" in one_error_line(agentd("wallet", "fund", "alice", "90071992547410"))


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


# Several processes at once: each prints "ready", waits for a line on stdin, then acts.
LOG_KEY_USER = """
import sys
from pathlib import Path
from agentd.home import Home
from agentd.wallets import log_key
home = Home(Path(sys.argv[1]))
print("ready", flush=True)
sys.stdin.readline()
print(log_key(home).id, flush=True)
"""

WALLET_MAKER = """
import sys
from agentd.cli import invoke
print("ready", flush=True)
sys.stdin.readline()
sys.exit(invoke(["--home", sys.argv[1], "wallet", "new", sys.argv[2], "--json"]))
"""


def _all_at_once(count: int, code: str, *args: str) -> list[tuple[int, str, str]]:
    """Runs `count` processes of `code`, released together; their exit codes and output."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(count)
    ]
    for p in procs:
        assert p.stdout.readline() == "ready\n"
    for p in procs:
        p.stdin.write("go\n")
        p.stdin.flush()
    done = [(p, *p.communicate(timeout=120)) for p in procs]
    return [(p.returncode, out, err) for p, out, err in done]


@pytest.mark.slow
def test_processes_starting_the_log_key_at_once_all_get_the_same_key(home) -> None:
    # A fresh home each round. A few rounds: one alone would let a replacing write slip
    # by about one time in five.
    for round_ in range(5):
        root = home.root / f"round{round_}"
        results = _all_at_once(8, LOG_KEY_USER, str(root))
        assert all(code == 0 for code, _, _ in results), [err for _, _, err in results]
        on_disk = json.loads((root / "log-key.json").read_text())["id"]
        assert {out.strip() for _, out, _ in results} == {on_disk}


@pytest.mark.slow
def test_two_wallets_of_one_name_cannot_both_be_created(home) -> None:
    home.ensure()
    for round_ in range(2):
        name = f"alice{round_}"
        results = _all_at_once(6, WALLET_MAKER, str(home.root), name)
        made = [json.loads(out) for code, out, _ in results if code == 0]
        refused = [err for code, _, err in results if code != 0]
        assert len(made) == 1, results
        assert all(err.strip() == f"agentd: error: wallet {name} already exists ({home.wallets_dir / name}.json)" for err in refused)
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
        assert f"{key_file} is missing but the ledger at sqlite:///{home.ledger_db} was started by key {started_by}" in line
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
