"""The examiner: a second home on loopback holds the sealed tasks, the agent's home keeps
only their digests, and a change kept on them is confirmed by the examiner's signed
entry on the agent's ledger, which `lineage --check` and `ledger verify` accept.

The examiner is a real uvicorn server in a thread, over HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn

from agentd.app.demo import PROFILE
from agentd.app.examiner import Examiner, open_examiner
from agentd.app.examples import install_example
from agentd.app.ledger import open_ledger
from agentd.app.lineage import check_lineage
from agentd.app.loop import RunRequest, run_improvement
from agentd.app.seals import Examiner as ExaminerAt, seal_tasks
from agentd.errors import AgentdError, WrongValue
from agentd.home import Home
from agentd.server.examiner import server_config
from agentd.wallets import create_wallet
from improver import EXAMINATION, Seal, SealRequest, current_seal, open_seal
from ledger import Entry, Ledger, LedgerError, RuleViolation, Wallet
from tests.examplekit import harvested

PROPOSER = "script:models/proposer.toml"


@contextmanager
def serving(examiner: Examiner) -> Iterator[str]:
    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # else each answer waits ~40 ms (Nagle)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(server_config(examiner, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        while not server.started and thread.is_alive():
            thread.join(0.05)
        assert server.started, "the examiner did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)
        sock.close()


def examiner_home(root: Path) -> Examiner:
    """A home of its own, with its own wallet and its own copy of the example's scripted models."""
    home = Home(root)
    home.ensure()
    folder = install_example(home, PROFILE)
    return open_examiner(home, create_wallet(home, "examiner"), folder)


def sealed_to(home: Home, url: str, wallet: str | None = None, **request: object) -> Seal:
    work = harvested(home)
    sealed = seal_tasks(
        home,
        PROFILE,
        work,
        SealRequest(**{"seed": "test", **request}),
        PROFILE,
        examiner=ExaminerAt(url, wallet),  # type: ignore[arg-type]
    )
    return sealed.seal


def asked(seal: Seal, ledger: Ledger, examiner: Examiner, lessons: str) -> dict[str, object]:
    """What an agent sends to ask the examiner about a change of `lessons`, 2 runs each arm."""
    return {
        "change": {"operator": "x", "lessons": lessons, "models": []},
        "current": {"operator": "x", "lessons": "", "models": []},
        "runs": 2,
        "baseline_runs": 2,
        "gain": 0.5,
        "seal_claim": seal.state().claim,
        "log": ledger.origin,
        "seq": ledger.next_sequence(examiner.wallet.id),
    }


def test_a_change_is_kept_on_the_examiners_word_with_no_sealed_task_here(home: Home, tmp_path: Path) -> None:
    examiner = examiner_home(tmp_path / "examiner")
    with serving(examiner) as url:
        seal = sealed_to(home, url, examiner.wallet.id)
        held = open_seal(examiner.folder / f"{seal.id}.json")
        assert not seal.held_here and held.terms == seal.terms
        # No file the seal or the loop wrote holds a sealed task's text or a canary's code
        # word: only the sessions they came from (agentd.db) and the task file given do.
        texts = {t.task for t in held.real_tasks} | {c.checks[0]["text"] for c in held.canaries}
        given = {home.root / "work.json", *home.root.glob("agentd.db*")}
        for path in home.root.rglob("*"):
            if path.is_file() and path not in given:
                data = path.read_bytes()
                for text in texts:
                    assert text.encode() not in data, (path, text)
        request = RunRequest(PROPOSER, rounds=1, runs=2, baseline_runs=2, wallet=PROFILE, apply=True)
        events: list[str] = []
        assert run_improvement(home, PROFILE, request, lambda e: events.append(e.text)) is None
    with open_ledger(home, read_only=True) as ledger:
        exams = list(ledger.entries(kind=EXAMINATION))
        [kept] = list(ledger.entries(kind="agent.improvement/v1"))
        assert ledger.verify().ok
    assert [e.author for e in exams] == [examiner.wallet.id] * len(exams)
    assert kept.body["examination"] == exams[-1].claim_id and exams[-1].body["outcome"] == "kept"
    assert exams[-1].body["confirmation"] == 1
    sealed_names = {t.name for t in held.sealed.tasks}
    assert not any(name in json.dumps(e.body) for e in exams for name in sealed_names)
    report = check_lineage(home, PROFILE)
    assert not report.problems, report.problems
    assert current_seal(home.routes, PROFILE).state().claim == seal.state().claim


def test_the_examiner_down_stops_the_loop_with_nothing_spent(home: Home, tmp_path: Path) -> None:
    examiner = examiner_home(tmp_path / "examiner")
    with serving(examiner) as url:
        sealed_to(home, url)
    request = RunRequest(PROPOSER, rounds=1, runs=2, baseline_runs=2, wallet=PROFILE)
    stopped = run_improvement(home, PROFILE, request, lambda e: None)
    assert stopped is not None and "cannot be reached" in str(stopped) and "not judged" in str(stopped)
    with open_ledger(home, read_only=True) as ledger:
        assert not list(ledger.entries(kind=EXAMINATION))
        assert not list(ledger.entries(kind="agent.improvement/v1"))


def test_a_wrong_examiner_wallet_or_a_forged_key_is_refused_before_anything_is_sealed(
    home: Home, tmp_path: Path
) -> None:
    examiner = examiner_home(tmp_path / "examiner")
    with serving(examiner) as url:
        with pytest.raises(AgentdError, match=r"not 0+, the examiner named"):
            sealed_to(home, url, "0" * 32)
        assert not home.routes.sealed_files(PROFILE)
        real = examiner.key_document
        examiner.key_document = lambda: {**real(), "key": "11" * 32}  # type: ignore[method-assign]
        with pytest.raises(AgentdError, match="not signed by the wallet it names"):
            seal_tasks(home, PROFILE, home.root / "work.json", SealRequest(seed="t"), PROFILE, examiner=ExaminerAt(url))
    assert not home.routes.sealed_files(PROFILE)
    with pytest.raises(WrongValue, match="--examiner needs --wallet"):
        seal_tasks(home, PROFILE, home.root / "work.json", SealRequest(seed="t"), None, examiner=ExaminerAt(url))


def test_forged_replayed_and_past_k_examinations_are_refused(home: Home, tmp_path: Path) -> None:
    examiner = examiner_home(tmp_path / "examiner")
    with serving(examiner) as url:
        seal = sealed_to(home, url, confirmations=1)
        request = RunRequest(PROPOSER, rounds=1, runs=2, baseline_runs=2, wallet=PROFILE)
        assert run_improvement(home, PROFILE, request, lambda e: None) is None
        with open_ledger(home) as ledger:
            [exam] = list(ledger.entries(kind=EXAMINATION))
            with pytest.raises(LedgerError, match="recorded once"):
                ledger.append_raw([exam.raw])  # replayed
            stranger = Wallet.generate("stranger")
            forged = Entry.create(
                stranger, EXAMINATION, exam.body, log=ledger.origin, seq=ledger.next_sequence(stranger.id)
            )
            with pytest.raises(RuleViolation, match="names examiner"):
                ledger.append_raw([forged.raw])
            # The seal's one confirmation is spent: the examiner refuses another, and spends nothing.
            body = asked(seal, ledger, examiner, "y")
        answer = httpx.post(f"{url}/v1/examiner/seals/{seal.id}/examinations", json=body, timeout=60)
        assert answer.status_code == 409 and "spent its 1 confirmations" in answer.json()["error"]
        assert httpx.get(f"{url}/v1/examiner/seals/{seal.id}").json()["spent"] == 1
        assert httpx.get(f"{url}/v1/examiner/seals/nope").status_code == 404


def test_a_change_holding_a_sealed_tasks_words_is_not_examined(home: Home, tmp_path: Path) -> None:
    examiner = examiner_home(tmp_path / "examiner")
    with serving(examiner) as url:
        seal = sealed_to(home, url)
        held = open_seal(examiner.folder / f"{seal.id}.json")
        with open_ledger(home) as ledger:
            body = asked(seal, ledger, examiner, f"Remember: {held.real_tasks[0].task}")
        answer = httpx.post(f"{url}/v1/examiner/seals/{seal.id}/examinations", json=body, timeout=60)
        assert answer.status_code == 422 and "holds a sealed task's words" in answer.json()["error"]
        assert held.real_tasks[0].task not in answer.text
        assert httpx.get(f"{url}/v1/examiner/seals/{seal.id}").json()["spent"] == 0
