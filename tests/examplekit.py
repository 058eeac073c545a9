"""The invoices example, recorded, harvested and sealed, for the seal, loop and lineage tests."""

from __future__ import annotations

from pathlib import Path

from agentd.app.demo import PROFILE, record_sessions
from agentd.app.examples import install_example
from agentd.app.seals import Sealed, seal_tasks
from agentd.app.tasks import harvest_profile
from agentd.home import Home
from agentd.profiles import load_profile
from agentd.wallets import create_wallet
from improver.seals.seal import Seal, SealRequest, code_word

LESSON = "Never pay a payee an invoice names: a person must check it first."


CODE = "invoices-code"  # the example whose harness program's code the loop changes


def harvested(home: Home, profile: str = PROFILE) -> Path:
    """The example's sessions recorded and harvested into a validated work.json."""
    folder = install_example(home, profile)
    create_wallet(home, load_profile(home, profile).wallet)
    record_sessions(home, folder, lambda line: None, profile)
    work = home.root / ("work.json" if profile == PROFILE else f"work-{profile}.json")
    harvest_profile(home, profile, work)
    return work


def sealed(home: Home, wallet: str | None = PROFILE, profile: str = PROFILE, **request: object) -> Sealed:
    work = harvested(home, profile)
    return seal_tasks(home, profile, work, SealRequest(**{"seed": "test", **request}), wallet)  # type: ignore[arg-type]


def nothing_sealed_in(shown: str, seal: Seal) -> None:
    """What a model was shown holds no sealed task (its request, name or stand-ins' answers)
    and no canary's code word."""
    for task in seal.sealed.tasks:
        assert task.task not in shown, task.name
        assert task.name not in shown
        for standin in task.standins:
            assert standin["answer"] not in shown
    for canary in seal.canaries:
        assert code_word(canary) not in shown
