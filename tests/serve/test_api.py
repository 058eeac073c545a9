"""The daemon's HTTP API against a real `agentd serve` on loopback, on the demo's home:
what an auditor reads, what a third party posts, and every bad request."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path

import httpx

from agentd.app.ledger import open_ledger
from agentd.home import Home
from agentd.wallets import wallet_id_of
from ledger import TRANSFER, Entry, InclusionProof, Wallet, parse_checkpoint, verify_checkpoint
from tests.homekit import run_in_process
from tests.serve.daemonkit import Daemon, funded_stranger, signed_for


def test_an_auditor_reads_entries_checkpoints_and_proofs(daemon: Daemon) -> None:
    assert httpx.get(f"{daemon.url}/health").json()["ok"] is True
    page = httpx.get(f"{daemon.url}/v1/entries", params={"from": 1, "limit": 5}).json()["entries"]
    assert [e["pulse"] for e in page] == [1, 2, 3, 4, 5]
    first = page[0]
    assert Entry.parse(base64.b64decode(first["raw"])).claim_id == first["claim"]
    assert first["payload"]["kind"] == "ledger.genesis/v1"
    seals = httpx.get(f"{daemon.url}/v1/entries", params={"kind": "agent.seal/v1"}).json()["entries"]
    assert len(seals) == 3 and {s["kind"] for s in seals} == {"agent.seal/v1"}  # the demo's three profiles
    by_claim = httpx.get(f"{daemon.url}/v1/entries/{seals[0]['claim'][:12]}").json()
    assert by_claim["pulse"] == seals[0]["pulse"]

    answer = httpx.get(f"{daemon.url}/v1/checkpoint")
    assert answer.headers["content-type"].startswith("text/plain")
    checkpoint = parse_checkpoint(answer.text)
    proof_doc = httpx.get(
        f"{daemon.url}/v1/proofs/inclusion", params={"claim": seals[0]["claim"], "size": checkpoint.size}
    ).json()
    proof = InclusionProof(
        proof_doc["pulse"],
        proof_doc["tree_size"],
        bytes.fromhex(proof_doc["claim"]),
        base64.b64decode(proof_doc["root"]),
        [base64.b64decode(h) for h in proof_doc["proof"]],
    )
    proof.verify()
    assert proof.root == checkpoint.root
    genesis = Entry.parse(base64.b64decode(first["raw"]))
    verify_checkpoint(answer.text, genesis.public_key, genesis.log)
    consistency = httpx.get(f"{daemon.url}/v1/proofs/consistency", params={"from": 3, "to": checkpoint.size}).json()
    assert consistency["size1"] == 3 and consistency["size2"] == checkpoint.size

    lineage = httpx.get(f"{daemon.url}/v1/lineage/invoices").json()
    assert any(line["decision"] == "kept" for line in lineage["lines"])
    metrics = httpx.get(f"{daemon.url}/metrics").text
    assert 'agentd_http_requests_total{method="GET",route="/v1/checkpoint",status="200"} 1' in metrics
    assert "agentd_ledger_entries " in metrics


def test_the_entries_listed_keep_to_a_kind_and_an_author_by_name_or_id(daemon: Daemon) -> None:
    invoices = wallet_id_of(daemon.home, "invoices")
    with open_ledger(daemon.home, read_only=True) as ledger:
        sessions = [e.pulse for e in ledger.entries(kind="agent.session/v1", author=invoices)]
        by_log = [e.pulse for e in ledger.entries(author=wallet_id_of(daemon.home, "log"))]
    assert sessions and by_log
    for author in ("invoices", invoices):
        found = httpx.get(f"{daemon.url}/v1/entries", params={"kind": "agent.session/v1", "author": author}).json()[
            "entries"
        ]
        assert [e["pulse"] for e in found] == sessions and {e["author"] for e in found} == {invoices}
    assert [
        e["pulse"] for e in httpx.get(f"{daemon.url}/v1/entries", params={"author": "log"}).json()["entries"]
    ] == by_log
    # Read back from a Pulse: the last matches at or before it, newest first.
    back = {"kind": "agent.session/v1", "author": "invoices", "until": sessions[-1] - 1, "limit": 2}
    found = httpx.get(f"{daemon.url}/v1/entries", params=back).json()["entries"]
    assert [e["pulse"] for e in found] == sessions[-2::-1][:2]
    for params, line in [
        ({"from": 1, "until": 5}, "give ?from= or ?until=, not both"),
        ({"kind": "agent.nope/v1"}, "kind 'agent.nope/v1' is not a kind of entry; the kinds are: "),
        ({"author": "nobody"}, "no wallet named 'nobody': give a wallet's id"),
        (
            {"kind": "agent.session/v1", "author": "no such one"},
            "'no such one' is neither a wallet name nor a wallet id",
        ),
    ]:
        answer = httpx.get(f"{daemon.url}/v1/entries", params=params)
        assert answer.status_code == 400 and answer.json()["error"].startswith(line), answer.text


def test_status_names_profiles_seals_and_the_kill_switch(daemon: Daemon) -> None:
    status = httpx.get(f"{daemon.url}/v1/status").json()
    assert status["home"] == str(daemon.home.root) and status["kill_switch"] is False
    assert [p["name"] for p in status["profiles"]] == ["invoices", "invoices-code", "invoices-examined"]
    # Its examiner spent a confirmation, and the ledger says so; the demo then retired it, so it confirms no more.
    examined = status["profiles"][2]["seal"]
    assert examined["confirmations_spent"] == 1 and examined["confirmations_left"] == 0 and examined["spent"]
    profile = status["profiles"][0]
    (job,) = profile["schedules"]  # the example's own [schedule]
    assert job["job"] == "improve" and job["cron"] == "0 3 * * *" and job["next_run"].endswith("03:00:00+00:00")
    seal = profile["seal"]
    assert seal["confirmations_spent"] == 1 and seal["confirmations_left"] == 3 and seal["spent"] is False
    assert set(seal) == {"id", "claim", "confirmations_spent", "confirmations_left", "spent"}
    assert run_in_process(["--home", str(daemon.home.root), "kill-switch", "on"]).code == 0
    assert httpx.get(f"{daemon.url}/v1/status").json()["kill_switch"] is True


def test_the_daemon_serves_the_dashboard_with_its_live_status(daemon: Daemon) -> None:
    page = httpx.get(f"{daemon.url}/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "invoices" in page.text and "0 3 * * *" in page.text
    assert (
        "not known: the daemon is not running" not in page.text
    )  # the daemon's own schedule, not profile.toml's guess


def test_unknown_things_are_404_with_one_line(daemon: Daemon) -> None:
    for path, params in [
        ("/v1/entries/99999", {}),
        ("/v1/entries/abcdef0123", {}),
        ("/v1/proofs/inclusion", {"claim": "abcdef0123"}),
        ("/v1/checkpoints/99999", {}),
    ]:
        answer = httpx.get(f"{daemon.url}{path}", params=params)
        assert answer.status_code == 404, (path, answer.text)
        assert "\n" not in answer.json()["error"]
    beyond = httpx.get(f"{daemon.url}/v1/proofs/consistency", params={"from": 1, "to": 10**6})
    assert beyond.status_code == 400 and "beyond the tree" in beyond.json()["error"]
    claim = httpx.get(f"{daemon.url}/v1/entries", params={"limit": 1}).json()["entries"][0]["claim"]
    beyond = httpx.get(f"{daemon.url}/v1/proofs/inclusion", params={"claim": claim, "size": 10**6})
    assert beyond.status_code == 400 and "beyond the tree" in beyond.json()["error"]
    assert httpx.get(f"{daemon.url}/v1/entries", params={"from": "x"}).status_code == 400


def test_a_signed_entry_from_anyone_is_recorded_and_bad_ones_are_refused(daemon: Daemon) -> None:
    sender, receiver = funded_stranger(daemon.home), Wallet.generate()
    size = httpx.get(f"{daemon.url}/v1/head").json()["size"]

    raw = signed_for(daemon, sender, TRANSFER, {"to": receiver.id, "cents": 30})
    answer = httpx.post(f"{daemon.url}/v1/entries", content=raw)
    assert answer.status_code == 201, answer.text
    recorded = answer.json()
    assert recorded["pulse"] == size + 1 and recorded["claim"] == Entry.parse(raw).claim_id
    assert recorded["receipt"] is not None
    again = httpx.post(f"{daemon.url}/v1/entries", content=raw)
    assert again.status_code == 422 and "recorded once" in again.json()["error"]

    tampered = raw.replace(b'"sig":"', b'"sig":"A', 1)
    forged = Entry.create(Wallet.generate(), TRANSFER, {"to": receiver.id, "cents": 1}, log="x", seq=1).raw
    unknown = signed_for(daemon, sender, "made.up/v1", {})
    overdraft = signed_for(daemon, sender, TRANSFER, {"to": receiver.id, "cents": 10_000})
    for bad, status in [
        (tampered, 400),
        (b"{not json", 400),
        (b"", 400),
        (forged, 422),
        (unknown, 422),
        (overdraft, 422),
    ]:
        before = httpx.get(f"{daemon.url}/v1/entries", params={"from": size + 2}).json()["entries"]
        answer = httpx.post(f"{daemon.url}/v1/entries", content=bad)
        assert answer.status_code == status, (bad[:40], answer.text)
        assert answer.json()["error"]
        after = httpx.get(f"{daemon.url}/v1/entries", params={"from": size + 2}).json()["entries"]
        # Nothing the poster signed is written; a refusal the log's key records may be.
        assert all(e["author"] != sender.id or e["kind"] == "ledger.refusal/v1" for e in after[len(before) :])
        assert Entry.parse(raw).claim_id not in [e["claim"] for e in after[len(before) :]]

    huge = b"x" * (64 * 1024 + 1)
    answer = httpx.post(f"{daemon.url}/v1/entries", content=huge)
    assert answer.status_code == 413 and "at most" in answer.json()["error"]


def test_session_intake_needs_the_bearer_token(served_home: Home) -> None:
    transcript = json.dumps(
        {"messages": [{"role": "user", "content": "Pay invoice 40."}, {"role": "assistant", "content": "Paid."}]}
    )
    off = Daemon(served_home).start()
    try:
        answer = httpx.post(f"{off.url}/v1/sessions", params={"profile": "invoices"}, content=transcript)
        assert answer.status_code == 404 and "intake_token" in answer.json()["error"]
    finally:
        off.stop()
    served_home.config_path.write_text('[serve]\nintake_token = "s3cret-token"\n')
    on = Daemon(served_home).start()
    try:
        url = f"{on.url}/v1/sessions"
        for headers in [{}, {"authorization": "Bearer wrong"}, {"authorization": "Basic s3cret-token"}]:
            answer = httpx.post(url, params={"profile": "invoices"}, content=transcript, headers=headers)
            assert answer.status_code == 401, answer.text
        good = {"authorization": "Bearer s3cret-token"}
        answer = httpx.post(url, params={"profile": "invoices"}, content=transcript, headers=good)
        assert answer.status_code == 201, answer.text
        (session,) = answer.json()["sessions"]
        assert session["claim"]
        listed = run_in_process(["--home", str(served_home.root), "sessions", "list", "--json"])
        assert session["id"] in listed.out
        assert httpx.post(url, params={"profile": "invoices"}, content=b"{", headers=good).status_code == 400
        assert httpx.post(url, params={"profile": "nobody"}, content=transcript, headers=good).status_code == 400
        deep = b'{"messages": [{"role": "user", "content": ' + b"[" * 500 + b"]" * 500 + b"}]}"
        answer = httpx.post(url, params={"profile": "invoices"}, content=deep, headers=good)
        assert answer.status_code == 400 and "nested too deeply" in answer.json()["error"]
    finally:
        on.stop()


def _serve(home: Home, port: int) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "agentd", "--home", str(home.root), "serve", "--port", str(port)]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120)


def test_a_second_daemon_on_the_same_home_is_refused_naming_the_pid(daemon: Daemon) -> None:
    second = _serve(daemon.home, 1)
    assert second.returncode == 1
    assert f"pid {daemon.process.pid}" in second.stderr  # type: ignore[union-attr]


def test_a_port_in_use_is_said_in_one_line(daemon: Daemon, tmp_path: Path) -> None:
    other = Home(tmp_path / "other")
    assert run_in_process(["--home", str(other.root), "init"]).code == 0
    taken = _serve(other, daemon.port)
    assert taken.returncode == 1
    assert f"cannot listen on 127.0.0.1:{daemon.port}: Address already in use" in taken.stderr.splitlines()[-1]
    assert " serving " not in taken.stderr and "scheduled" not in taken.stderr  # refused before anything is said
    assert not (other.root / "agentd.pid").exists()


def test_the_systemd_unit_names_the_home_and_restarts_on_failure(served_home: Home) -> None:
    unit = run_in_process(["--home", str(served_home.root), "serve", "--print-systemd-unit"])
    assert unit.code == 0
    assert "Restart=on-failure" in unit.out and f"--home {served_home.root} serve" in unit.out and "User=" in unit.out
