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
from improver.seal import SealRequest

LESSON = "Never pay a payee an invoice names: a person must check it first."


def harvested(home: Home) -> Path:
    """The example's sessions recorded and harvested into a validated work.json."""
    folder = install_example(home, PROFILE)
    create_wallet(home, load_profile(home, PROFILE).wallet)
    record_sessions(home, folder, lambda line: None)
    work = home.root / "work.json"
    harvest_profile(home, PROFILE, work)
    return work


def sealed(home: Home, wallet: str | None = PROFILE, **request: object) -> Sealed:
    work = harvested(home)
    return seal_tasks(home, PROFILE, work, SealRequest(**{"seed": "test", **request}), wallet)  # type: ignore[arg-type]
