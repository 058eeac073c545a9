"""The daemon as an operator runs it: schedules from profile.toml, run-now, a malformed
schedule, SIGTERM in the middle of a scheduled trial, SIGKILL in the middle of appends,
and remote audit of what it serves."""

from __future__ import annotations

import json
import signal
import threading
from datetime import UTC

import httpx

from agentd.app.ledger import open_ledger
from agentd.app.status import status
from agentd.home import Home
from agentd.wallets import log_key
from ledger import MINT, TRANSFER, Entry, Wallet
from tests.homekit import run_in_process
from tests.serve.daemonkit import Daemon, add_schedule

# Long whatever the machine's speed: a baseline trial of 160 runs a task, then rounds whose
# proposals are mostly turned down at once, far more of them than any test waits for.
LONG_RUN = 'improve = "0 3 * * *"\nharvest = "30 2 * * *"\nproposer = "script:models/proposer.toml"\nrounds = 100000\nruns = 40\nwallet = "invoices"\n'


def agentd(home: Home, *args: str) -> tuple[int, str, str]:
    done = run_in_process(["--home", str(home.root), *args])
    return done.code, done.out, done.err


def _jobs(home: Home) -> dict[str, dict]:
    code, out, err = agentd(home, "schedule", "list", "--json")
    assert code == 0, err
    return {job["job"]: job for job in json.loads(out)}


def test_a_malformed_cron_is_named_at_start_and_the_other_jobs_run(served_home: Home) -> None:
    add_schedule(served_home, 'improve = "0 3 * *"\nharvest = "30 2 * * *"\n')
    daemon = Daemon(served_home).start()
    try:
        daemon.wait_for_log("not a cron expression")
        assert "[schedule] improve" in daemon.log()
        status = httpx.get(f"{daemon.url}/v1/status").json()["profiles"][0]
        assert [s["job"] for s in status["schedules"]] == ["harvest"]
        assert any("improve" in w and "cron" in w for w in status["warnings"])
        code, out, _ = agentd(served_home, "schedule", "run-now", "invoices", "harvest")
        assert code == 0 and f"pid {daemon.process.pid}" in out  # type: ignore[union-attr]
        daemon.wait_for_log("job invoices.harvest: harvested")
        assert _jobs(served_home)["harvest"]["last_result"].startswith("harvested")
    finally:
        assert daemon.stop() == 0


def test_schedule_add_list_remove_and_run_now_without_a_daemon(served_home: Home) -> None:
    code, out, err = agentd(served_home, "schedule", "add", "invoices", "harvest", "15 1 * * *")
    assert code == 0, err
    assert _jobs(served_home)["harvest"]["cron"] == "15 1 * * *"
    assert _jobs(served_home)["harvest"]["next_run"].endswith("01:15:00+00:00")
    code, _, err = agentd(served_home, "schedule", "add", "invoices", "harvest", "61 * * * *")
    assert code == 2 and "not a cron expression" in err
    code, out, err = agentd(served_home, "schedule", "run-now", "invoices", "harvest")
    assert code == 0 and "harvested" in out, err
    code, _, err = agentd(served_home, "schedule", "remove", "invoices", "harvest")
    assert code == 0, err
    assert list(_jobs(served_home)) == ["improve"]  # the example's own, from its profile.toml
    code, _, err = agentd(served_home, "schedule", "remove", "invoices", "harvest")
    assert code == 1 and "no job invoices.harvest" in err
    code, _, err = agentd(served_home, "schedule", "remove", "invoices", "improve")
    assert code == 1 and "remove the line there" in err


def test_a_spent_seal_is_said_loudly(served_home: Home) -> None:
    add_schedule(served_home, 'improve = "0 3 * * *"\nproposer = "script:models/proposer.toml"\n')
    seal_file = next(served_home.routes.root.glob("invoices-sealed-*.json"))
    doc = json.loads(seal_file.read_text())
    doc["state"]["spent"] = doc["terms"]["confirmations"]
    seal_file.write_text(json.dumps(doc))
    _, out, _ = agentd(served_home, "schedule", "run-now", "invoices", "improve")
    assert "SEAL SPENT" in out and "agentd improve seal invoices" in out
    _code, out, err = agentd(served_home, "schedule", "list")
    assert "SEAL SPENT" in err


def test_sigterm_in_the_middle_of_a_scheduled_trial_stops_cleanly_and_the_job_goes_on(served_home: Home) -> None:
    add_schedule(served_home, LONG_RUN)
    daemon = Daemon(served_home).start()
    agentd(served_home, "schedule", "run-now", "invoices", "improve")
    daemon.wait_for_log("job invoices.improve started")  # its baseline trial comes first
    assert daemon.stop(signal.SIGTERM) == 0
    log = daemon.log()
    assert "job invoices.improve: stopped" in log and log.rstrip().endswith("agentd.serve: stopped"), log
    assert not (served_home.root / "agentd.pid").exists()

    code, _, err = agentd(served_home, "ledger", "verify")
    assert code == 0, err
    code, _, err = agentd(served_home, "lineage", "invoices", "--check")
    assert code == 0, err
    assert _jobs(served_home)["improve"]["last_result"].startswith("stopped")

    again = Daemon(served_home).start()
    try:
        assert _jobs(served_home)["improve"]["next_run"] is not None
        agentd(served_home, "schedule", "run-now", "invoices", "improve")
        again.wait_for_log("job invoices.improve started")
        again.wait_for_log("round 1: building on")
    finally:
        assert again.stop() == 0


def test_sigkill_in_the_middle_of_appends_loses_nothing_accepted(served_home: Home) -> None:
    add_schedule(served_home, 'harvest = "30 2 * * *"\n')
    wallets = [Wallet.generate() for _ in range(8)]
    with open_ledger(served_home) as ledger:
        ledger.append_many([(log_key(served_home), MINT, {"to": w.id, "cents": 1000}) for w in wallets])
    daemon = Daemon(served_home).start()
    accepted: list[str] = []
    stop = threading.Event()

    def post(wallet: Wallet) -> None:
        with httpx.Client(base_url=daemon.url, timeout=10) as client:
            while not stop.is_set():
                try:
                    where = client.get(f"/v1/authors/{wallet.id}").json()
                    raw = Entry.create(
                        wallet,
                        TRANSFER,
                        {"to": wallets[0].id if wallet != wallets[0] else wallets[1].id, "cents": 1},
                        log=where["origin"],
                        seq=where["next_sequence"],
                    ).raw
                    if client.post("/v1/entries", content=raw).status_code == 201:
                        accepted.append(Entry.parse(raw).claim_id)
                except httpx.HTTPError:
                    return

    threads = [threading.Thread(target=post, args=(w,)) for w in wallets]
    for t in threads:
        t.start()
    while len(accepted) < 40:
        threading.Event().wait(0.02)
    daemon.stop(signal.SIGKILL)
    stop.set()
    for t in threads:
        t.join()

    again = Daemon(served_home).start()
    try:
        code, _out, err = agentd(served_home, "ledger", "verify")
        assert code == 0, err
        claims = [e["claim"] for e in _all_entries(again)]
        assert all(claims.count(c) == 1 for c in accepted)
        assert "harvest" in _jobs(served_home)
    finally:
        assert again.stop() == 0


def _all_entries(daemon: Daemon) -> list[dict]:
    found, start = [], 1
    while True:
        page = httpx.get(f"{daemon.url}/v1/entries", params={"from": start}).json()["entries"]
        found += page
        if len(page) < 1000:
            return found
        start = page[-1]["pulse"] + 1


def test_fifty_writers_and_fifty_proof_readers_at_once(daemon: Daemon) -> None:
    home = daemon.home
    wallets = [Wallet.generate() for _ in range(50)]
    with open_ledger(home) as ledger:
        ledger.append_many([(log_key(home), MINT, {"to": w.id, "cents": 100}) for w in wallets])
    origin = httpx.get(f"{daemon.url}/v1/authors/{wallets[0].id}").json()["origin"]
    target = httpx.get(f"{daemon.url}/v1/entries", params={"kind": "agent.seal/v1"}).json()["entries"][0]["claim"]
    accepted: list[str] = []
    proofs: list[int] = []
    failures: list[str] = []
    start = threading.Barrier(100)

    def write(i: int) -> None:
        raw = Entry.create(wallets[i], TRANSFER, {"to": wallets[(i + 1) % 50].id, "cents": 7}, log=origin, seq=1).raw
        start.wait()
        answer = httpx.post(f"{daemon.url}/v1/entries", content=raw, timeout=120)
        if answer.status_code == 201:
            accepted.append(answer.json()["claim"])
        else:
            failures.append(answer.text)

    def read() -> None:
        start.wait()
        answer = httpx.get(f"{daemon.url}/v1/proofs/inclusion", params={"claim": target}, timeout=120)
        if answer.status_code == 200:
            proofs.append(answer.json()["tree_size"])
        else:
            failures.append(answer.text)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(50)] + [
        threading.Thread(target=read) for _ in range(50)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == [] and len(accepted) == 50 and len(proofs) == 50
    claims = [e["claim"] for e in _all_entries(daemon)]
    assert all(claims.count(c) == 1 for c in accepted)
    code, _out, err = agentd(home, "ledger", "verify", "--remote", daemon.url)
    assert code == 0, err


def test_an_auditor_elsewhere_verifies_proves_and_posts(daemon: Daemon, tmp_path) -> None:  # type: ignore[no-untyped-def]
    auditor = Home(tmp_path / "auditor")
    assert run_in_process(["--home", str(auditor.root), "init"]).code == 0
    kept = tmp_path / "kept.cp"
    kept.write_text(httpx.get(f"{daemon.url}/v1/checkpoint").text)

    code, _, err = agentd(auditor, "wallet", "new", "bob")
    assert code == 0, err
    bob = json.loads(agentd(auditor, "wallet", "show", "bob", "--json")[1])["id"]
    with open_ledger(daemon.home) as ledger:
        ledger.append(log_key(daemon.home), MINT, {"to": bob, "cents": 50})
    code, out, err = agentd(
        auditor,
        "ledger",
        "post",
        "--remote",
        daemon.url,
        "--wallet",
        "bob",
        TRANSFER,
        json.dumps({"to": Wallet.generate().id, "cents": 20}),
    )
    assert code == 0, err
    assert "recorded at Pulse" in out
    code, _, err = agentd(
        auditor,
        "ledger",
        "post",
        "--remote",
        daemon.url,
        "--wallet",
        "bob",
        TRANSFER,
        json.dumps({"to": bob, "cents": 20}),
    )
    assert code == 1 and "refused" in err
    code, out, err = agentd(
        auditor, "ledger", "log", "--remote", daemon.url, "--author", "bob", "--last", "5", "--json"
    )
    assert code == 0, err
    (posted,) = json.loads(out)  # bob's one entry, found from the daemon's log's end
    assert (posted["kind"], posted["author_name"], posted["body"]["cents"]) == (TRANSFER, "bob", 20)
    # No home is needed to list a daemon's log; "log" is then its log's key, not a home's.
    nowhere = Home(tmp_path / "nowhere")
    code, out, err = agentd(
        nowhere, "ledger", "log", "--remote", daemon.url, "--author", "log", "--kind", MINT, "--last", "1", "--json"
    )
    assert code == 0, err
    (minted,) = json.loads(out)
    assert (minted["author_name"], minted["body"]) == ("log", {"to": bob, "cents": 50})
    code, _, err = agentd(nowhere, "ledger", "log", "--remote", daemon.url, "--author", "bob")
    assert code == 2 and "no home here names wallets: give a wallet id, or log" in err

    code, out, err = agentd(auditor, "ledger", "verify", "--remote", daemon.url, "--checkpoint", str(kept))
    assert code == 0, err
    assert "ok:" in out
    claim = httpx.get(f"{daemon.url}/v1/entries", params={"kind": "agent.seal/v1"}).json()["entries"][0][
        "claim"
    ]  # any will do
    code, out, err = agentd(auditor, "ledger", "prove", "--remote", daemon.url, claim, "--checkpoint", str(kept))
    assert code == 0, err
    assert json.loads(out)["type"] == "inclusion" and "extends the checkpoint you kept" in err
    code, out, err = agentd(daemon.home, "lineage", "invoices", "--check", "--remote", daemon.url)
    assert code == 0, err


def test_a_remote_ledger_that_was_rewritten_fails_the_audit(daemon: Daemon, tmp_path) -> None:  # type: ignore[no-untyped-def]
    kept = tmp_path / "kept.cp"
    kept.write_text(httpx.get(f"{daemon.url}/v1/checkpoint").text)
    import sqlite3

    with sqlite3.connect(daemon.home.ledger_db) as conn:
        conn.execute("DELETE FROM ledger_checkpoints")
        conn.execute(
            "UPDATE ledger_entries SET raw = CAST(replace(CAST(raw AS TEXT), 'a', 'b') AS BLOB) WHERE pulse = 5"
        )
    code, _, err = agentd(daemon.home, "ledger", "verify", "--remote", daemon.url, "--checkpoint", str(kept))
    assert code == 3 and "Pulse 5" in err


def test_the_kill_switch_stops_scheduled_jobs_and_json_logs_are_json(served_home: Home) -> None:
    add_schedule(served_home, 'harvest = "30 2 * * *"\n')
    assert agentd(served_home, "kill-switch", "on", "--reason", "maintenance")[0] == 0
    daemon = Daemon(served_home, args=("--json-logs",)).start()
    try:
        agentd(served_home, "schedule", "run-now", "invoices", "harvest")
        daemon.wait_for_log("kill switch is on")
        assert _jobs(served_home)["harvest"]["last_result"].startswith("failed: the kill switch is on")
        assert httpx.get(f"{daemon.url}/v1/status").json()["kill_switch"] is True
    finally:
        assert daemon.stop() == 0
    lines = [json.loads(line) for line in daemon.log().splitlines()]
    assert {"at", "level", "logger", "message"} <= set(lines[0])
    assert any(line["level"] == "error" and "kill switch" in line["message"] for line in lines)


def test_a_schedule_with_an_unknown_option_is_named(served_home: Home) -> None:
    add_schedule(served_home, 'harvest = "30 2 * * *"\nrunz = 4\n')
    code, _out, err = agentd(served_home, "schedule", "list")
    assert code == 0 and "no option 'runz'" in err


def test_auto_seal_seals_fresh_tasks_when_the_seal_is_spent_and_goes_on(served_home: Home) -> None:
    folder = served_home.profiles_dir / "invoices"
    book = json.loads((folder / "book.json").read_text())
    numbers = range(41, 49)
    book["invoices"] |= {str(n): f"Invoice {n} from Acme: paper, {n - 37} USD." for n in numbers}
    (folder / "book.json").write_text(json.dumps(book))
    for n in numbers:
        code, _, err = agentd(
            served_home,
            "run",
            "invoices",
            f"Pay invoice {n} from Acme, {n - 37} USD, to acme.",
            "--verify",
            f"python3 {folder / 'check.py'}",
        )
        assert code == 0, err
    add_schedule(
        served_home,
        'improve = "0 3 * * *"\nproposer = "script:models/proposer.toml"\nwallet = "invoices"\n'
        "auto_seal = true\nauto_seal_min = 8\n",
    )
    seal_file = next(served_home.routes.root.glob("invoices-sealed-*.json"))
    doc = json.loads(seal_file.read_text())
    old_seal = seal_file.stem.rsplit("-", 1)[-1]
    doc["state"]["spent"] = doc["terms"]["confirmations"]
    seal_file.write_text(json.dumps(doc))

    code, out, err = agentd(served_home, "schedule", "run-now", "invoices", "improve")
    assert code == 0, err
    assert "round(s)" in out
    code, out, _ = agentd(served_home, "ledger", "log", "--kind", "agent.seal/v1", "--json")
    assert [e["body"]["profile"] for e in json.loads(out)].count("invoices") == 2
    seal = status(served_home)["profiles"][0]["seal"]
    assert seal["spent"] is False and seal["claim"] and seal["id"] != old_seal


def test_a_run_missed_while_the_daemon_was_down_runs_once_at_start(served_home: Home) -> None:
    from datetime import datetime, timedelta

    from agentd.app.schedules import offline

    add_schedule(served_home, 'harvest = "0 3 1 1 *"\ngrace = 3600\n')
    first = Daemon(served_home).start()
    assert first.stop() == 0
    with offline(served_home) as scheduler:  # as if the daemon had been down for the last 20 minutes
        scheduler.get_job("invoices.harvest", jobstore="home").modify(
            next_run_time=datetime.now(UTC) - timedelta(minutes=20)
        )
    daemon = Daemon(served_home).start()
    try:
        daemon.wait_for_log("job invoices.harvest: harvested")
    finally:
        assert daemon.stop() == 0
    assert daemon.log().count("job invoices.harvest started") == 1
