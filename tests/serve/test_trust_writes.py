"""What a stranger may make a daemon's log store, against a real `agentd serve` on
loopback: nothing for wallets the log does not know, one bounded entry at a time and at
a bounded rate for the others, and a log that still verifies afterwards."""

from __future__ import annotations

import subprocess
import sys
import time

import httpx
from starlette.testclient import TestClient

from agentd.home import Home
from agentd.server.api import ENTRY_CAP, app
from agentd.server.ledgers import Rates
from ledger import MAX_ENTRY_BYTES, TRANSFER, Entry, Wallet
from tests.homekit import run_in_process
from tests.ledger.ledgerkit import footprint
from tests.serve.daemonkit import Daemon, free_port, funded_stranger, signed_for


def _verified(home: Home) -> None:
    done = run_in_process(["--home", str(home.root), "ledger", "verify"])
    assert done.code == 0, done.err + done.out


def _configure(home: Home, text: str) -> None:
    kept = home.config_path.read_text() if home.config_path.exists() else ""
    home.config_path.write_text(kept + "\n[serve]\n" + text)


def test_fresh_keys_posting_refused_transfers_leave_the_store_as_it_was(served_home: Home) -> None:
    # No checkpoint signed on the daemon's timer while it runs: the store must show only what the posts did.
    kept = served_home.config_path.read_text() if served_home.config_path.exists() else ""
    served_home.config_path.write_text(kept + "\n[ledger]\ncheckpoint_seconds = 86400\n")
    daemon = Daemon(served_home).start()
    try:
        _post_refused_transfers(daemon)
    finally:
        daemon.stop()


def _post_refused_transfers(daemon: Daemon) -> None:
    home = daemon.home
    receiver = Wallet.generate()
    head = httpx.get(f"{daemon.url}/v1/head").json()
    before = footprint(home.ledger_url)
    for _ in range(50):
        key = Wallet.generate()  # no funds, no entry of its own: the log knows nothing of it
        raw = signed_for(daemon, key, TRANSFER, {"to": receiver.id, "cents": 100_000, "memo": "x" * 500})
        answer = httpx.post(f"{daemon.url}/v1/entries", content=raw)
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error.startswith(f"overdraft: wallet {key.id} holds 0 cents")
        assert "nothing is recorded, not even the refusal, and sequence number 1" in error
        assert "the log knows nothing of the wallet" in error
        assert httpx.get(f"{daemon.url}/v1/authors/{key.id}").json()["next_sequence"] == 1
    assert httpx.get(f"{daemon.url}/v1/head").json() == head
    assert footprint(home.ledger_url) == before  # not a row, not a byte
    metrics = httpx.get(f"{daemon.url}/metrics").text
    assert 'agentd_entries_refused_total{reason="rule"} 50' in metrics
    _verified(home)


def test_a_known_wallets_refused_entry_is_recorded_and_spends_its_number(daemon: Daemon) -> None:
    sender = funded_stranger(daemon.home, 100)
    raw = signed_for(daemon, sender, TRANSFER, {"to": Wallet.generate().id, "cents": 500})
    size = httpx.get(f"{daemon.url}/v1/head").json()["size"]
    answer = httpx.post(f"{daemon.url}/v1/entries", content=raw)
    assert answer.status_code == 422
    assert f"the refusal is recorded at Pulse {size + 1}, which spends sequence number 1" in answer.json()["error"]
    refusal = httpx.get(f"{daemon.url}/v1/entries/{size + 1}").json()
    assert refusal["kind"] == "ledger.refusal/v1" and refusal["payload"]["body"]["entry"]
    assert httpx.get(f"{daemon.url}/v1/authors/{sender.id}").json()["next_sequence"] == 2
    again = httpx.post(f"{daemon.url}/v1/entries", content=raw)  # once funded or not, never later
    assert again.status_code == 422 and "recorded once" in again.json()["error"]
    _verified(daemon.home)


def test_an_entry_over_the_cap_is_refused_naming_it(daemon: Daemon) -> None:
    sender = funded_stranger(daemon.home)
    where = httpx.get(f"{daemon.url}/v1/authors/{sender.id}").json()
    big = Entry.create(sender, "agent.mark/v1", {"note": "x" * ENTRY_CAP}, log=where["origin"], seq=1).raw
    before = footprint(daemon.home.ledger_url)
    answer = httpx.post(f"{daemon.url}/v1/entries", content=big)
    assert answer.status_code == 413
    assert answer.json()["error"] == f"the body is {len(big)} bytes; at most {ENTRY_CAP} are taken"
    assert footprint(daemon.home.ledger_url) == before
    assert httpx.get(f"{daemon.url}/v1/authors/{sender.id}").json()["next_sequence"] == 1


def test_an_entry_over_the_ledgers_own_bound_is_a_413_naming_it(served_home: Home) -> None:
    # The daemon's cap on a posted body (64 kB) is well under the ledger's bound (1 MiB);
    # a server taking larger bodies still records no entry over the ledger's bound.
    sender = funded_stranger(served_home)
    web = app(served_home)
    web.state.server.entry_cap = 2 * MAX_ENTRY_BYTES
    with TestClient(web) as client:
        where = client.get(f"/v1/authors/{sender.id}").json()
        big = Entry.create(sender, "agent.mark/v1", {"note": "x" * MAX_ENTRY_BYTES}, log=where["origin"], seq=1).raw
        before = footprint(served_home.ledger_url)
        answer = client.post("/v1/entries", content=big)
        assert answer.status_code == 413
        assert answer.json()["error"] == (
            f"it is {len(big):,} bytes, over the {MAX_ENTRY_BYTES:,} an entry may hold (MAX_ENTRY_BYTES)"
        )
        assert footprint(served_home.ledger_url) == before
    _verified(served_home)


def test_a_wallet_posting_past_its_rate_hears_429_with_retry_after(served_home: Home) -> None:
    _configure(served_home, "entries_per_second = 0.25\nentries_burst = 3\n")
    sender, other = funded_stranger(served_home, 1000), funded_stranger(served_home, 1000)
    daemon = Daemon(served_home).start()
    try:
        first = signed_for(daemon, sender, TRANSFER, {"to": other.id, "cents": 1, "memo": "0"})
        assert httpx.post(f"{daemon.url}/v1/entries", content=first).status_code == 201
        # Replaying a wallet's recorded entry, which anyone can read, spends none of its tokens...
        for _ in range(5):
            answer = httpx.post(f"{daemon.url}/v1/entries", content=first)
            assert answer.status_code == 422 and "recorded once" in answer.json()["error"]
        for i in (1, 2):  # ...so the burst of 3 is still there
            raw = signed_for(daemon, sender, TRANSFER, {"to": other.id, "cents": 1, "memo": str(i)})
            answer = httpx.post(f"{daemon.url}/v1/entries", content=raw)
            assert answer.status_code == 201, answer.text
        # A fourth entry at once is past its rate.
        fourth = signed_for(daemon, sender, TRANSFER, {"to": other.id, "cents": 1, "memo": "3"})
        size = httpx.get(f"{daemon.url}/v1/head").json()["size"]
        answer = httpx.post(f"{daemon.url}/v1/entries", content=fourth)
        assert answer.status_code == 429, answer.text
        wait = int(answer.headers["retry-after"])
        assert 1 <= wait <= 4
        assert answer.json()["error"] == (
            f"too many entries from wallet {sender.id}: this server records 3 at once from one wallet, "
            f"then 0.25 a second; post again in {wait} s"
        )
        assert httpx.get(f"{daemon.url}/v1/head").json()["size"] == size  # nothing recorded
        # Another wallet has its own bucket.
        elsewhere = signed_for(daemon, other, TRANSFER, {"to": sender.id, "cents": 1})
        assert httpx.post(f"{daemon.url}/v1/entries", content=elsewhere).status_code == 201
        time.sleep(wait)
        answer = httpx.post(f"{daemon.url}/v1/entries", content=fourth)  # the same bytes, in time
        assert answer.status_code == 201, answer.text
        assert 'agentd_entries_refused_total{reason="rate"} 1' in httpx.get(f"{daemon.url}/metrics").text
    finally:
        assert daemon.stop() == 0
    _verified(served_home)


def test_a_wrong_rate_in_config_stops_the_daemon_naming_it(served_home: Home) -> None:
    _configure(served_home, "entries_burst = 0\n")
    argv = [sys.executable, "-m", "agentd", "--home", str(served_home.root), "serve", "--port", str(free_port())]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"agentd: error: {served_home.config_path}: [serve] entries_burst must be a whole number of 1 or more, not 0"
    )


def test_the_buckets_of_keys_made_by_the_thousand_are_forgotten() -> None:
    now = [0.0]
    rates = Rates(rate=2.0, burst=3, clock=lambda: now[0])
    for i in range(5000):  # refused, nothing recorded: each token comes back at once
        author = f"{i:032x}"
        assert rates.take(author) is None
        rates.give_back(author)
    assert rates.tracked == 0
    for i in range(5000):  # recorded: each bucket is tracked until it has filled again
        assert rates.take(f"{i:032x}") is None
    assert rates.tracked == 5000
    now[0] += 1.5  # once a bucket emptied then would have filled again, the full ones go
    assert rates.take("f" * 32) is None
    assert rates.tracked == 1
    # One wallet: its burst, then one token every 1/rate seconds.
    assert [rates.take("a" * 32) for _ in range(3)] == [None, None, None]
    assert rates.take("a" * 32) == 0.5
    now[0] += 0.25
    assert rates.take("a" * 32) == 0.25
    now[0] += 0.25
    assert rates.take("a" * 32) is None
