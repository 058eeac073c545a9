"""A code change confirmed by an examiner: the agent's code loop hands it the change's
patch and commands, the examiner rebuilds both arms from its own checkout in its own
sandbox (bubblewrap), runs them on the sealed tasks it holds and signs what it found;
the release is kept on that word, and a rerun on the revealed seal rebuilds them again."""

from __future__ import annotations

import subprocess
from pathlib import Path

from agentd.app.code import CodeRequest, run_code
from agentd.app.examiner import Examiner, open_examiner
from agentd.app.examining import reveal_seal
from agentd.app.examples import install_example
from agentd.app.ledger import open_ledger
from agentd.app.lineage import check_lineage
from agentd.app.reexamine import reexamine
from agentd.app.seals import Examiner as ExaminerAt, seal_tasks
from agentd.home import Home
from agentd.profiles import profile_dir
from agentd.wallets import create_wallet
from improver import EXAMINATION, SealRequest
from tests.agentd.test_examiner import serving
from tests.examplekit import CODE, harvested

HARNESS = {"build": "python3 -m py_compile agent.py", "test": "python3 test_agent.py", "candidate": "python3 agent.py"}


def code_examiner(root: Path, agent: Home, with_source: bool = True) -> Examiner:
    """Another party's home: its wallet, the example's scripted models, and its own clone
    of the agent's code (which is not secret)."""
    home = Home(root)
    home.ensure()
    folder = install_example(home, CODE)
    source = None
    if with_source:
        source = root / "checkout"
        subprocess.run(["git", "clone", "-q", str(profile_dir(agent, CODE) / "harness"), str(source)], check=True)
    return open_examiner(home, create_wallet(home, "examiner"), folder, source=source)


def code_request(home: Home) -> CodeRequest:
    return CodeRequest(
        "script:models/coder.toml",
        profile_dir(home, CODE) / "harness",
        **HARNESS,
        allow=("agent.py",),
        rounds=2,
        runs=4,
        baseline_runs=4,
        wallet=CODE,
    )


def sealed_to(home: Home, url: str) -> None:
    work = home.root / f"work-{CODE}.json"
    seal_tasks(home, CODE, work, SealRequest(seed="test", confirmations=2), CODE, examiner=ExaminerAt(url, None))


def test_a_release_is_kept_on_the_word_of_an_examiner_that_rebuilt_it(home: Home, tmp_path: Path) -> None:
    events: list[str] = []
    harvested(home, CODE)
    with_source = code_examiner(tmp_path / "examiner", home)
    with serving(with_source) as url:
        sealed_to(home, url)
        assert run_code(home, CODE, code_request(home), lambda e: events.append(e.text)) is None
        revealed = reveal_seal(home, CODE, CODE, retire=True)
    assert any(line.startswith("round 2: ") and "kept as release " in line for line in events), events
    with open_ledger(home, read_only=True) as ledger:
        [kept] = [e for e in ledger.entries(kind=EXAMINATION) if e.body["outcome"] == "kept"]
        [release] = list(ledger.entries(kind="agent.release/v1"))
        assert release.body["examination"] == kept.claim_id and kept.author == with_source.wallet.id
        assert ledger.verify().ok
    assert not check_lineage(home, CODE).problems
    assert not list((with_source.home.root / "examiner" / "work").iterdir())  # its trees removed
    again = reexamine(home, kept.claim_id, revealed.path, profile_dir(home, CODE), source=with_source.source)
    assert again.holds and again.found.said.outcome.value == "kept"


def test_an_examiner_with_no_checkout_stops_a_code_loop_with_nothing_spent(home: Home, tmp_path: Path) -> None:
    harvested(home, CODE)
    without = code_examiner(tmp_path / "examiner", home, with_source=False)
    with serving(without) as url:
        sealed_to(home, url)
        stopped = run_code(home, CODE, code_request(home), lambda e: None)
    assert stopped is not None and "holds no checkout of the agent's code" in str(stopped)
    assert "not judged" in str(stopped)
    with open_ledger(home, read_only=True) as ledger:
        assert not list(ledger.entries(kind=EXAMINATION))
        assert not list(ledger.entries(kind="agent.release/v1"))
