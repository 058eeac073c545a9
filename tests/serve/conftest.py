from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from agentd.home import Home
from tests.homekit import PASSPHRASES, agentd, home  # noqa: F401  (agentd and home: fixtures)
from tests.serve.daemonkit import Daemon, demo_home


@pytest.fixture
def served_home(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Home:
    for var in ("AGENTD_HOME", "AGENTD_LEDGER_URL", "AGENTD_INTAKE_TOKEN", *PASSPHRASES):
        monkeypatch.delenv(var, raising=False)
    cache = tmp_path_factory.getbasetemp() / "serve-cache"
    cache.mkdir(exist_ok=True)
    return demo_home(cache, tmp_path / "home")


@pytest.fixture
def daemon(served_home: Home) -> Iterator[Daemon]:
    running = Daemon(served_home).start()
    yield running
    running.stop()
