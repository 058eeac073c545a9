from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote

import pytest

from tests.homekit import agentd, agentd_process, home  # noqa: F401  (fixtures)
from tests.ledger.ledgerkit import temporary_store
from tests.postgres import POSTGRES_URL


@pytest.fixture
def queue_url(tmp_path: Path) -> Iterator[str]:
    """A trial queue in a schema of its own on the test database, dropped afterwards."""
    with temporary_store("postgres", tmp_path) as store:
        schema = unquote(store).rsplit("search_path=", 1)[1]
        yield f"{POSTGRES_URL}?schema={schema}&queue=runs"
