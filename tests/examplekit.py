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
