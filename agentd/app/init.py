"""`agentd init`: the home and the log's own key, which starts the ledger and signs its checkpoints."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agentd.home import PRIVATE_FILE, Home
from agentd.wallets import log_key, log_key_path

# Every setting commented out: the defaults hold until the operator changes one. Mode 0600,
# since the keys it may hold are secrets.
CONFIG_TEMPLATE = """\
# agentd's settings for this home; the README's "The home" says what each does.
# An environment variable named beside a setting wins over it.

# [ledger]
# url = "postgresql://postgres@127.0.0.1:5432/agentd"   # AGENTD_LEDGER_URL; default: ledger.db here

# [openai]                      # OPENAI_BASE_URL, OPENAI_API_KEY
# base_url = "http://127.0.0.1:11434/v1"
# api_key = "..."

# [anthropic]                   # ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY
# api_key = "..."

# [providers]                   # retries of 429, 5xx, time-outs and dropped connections
# attempts = 4
# backoff = 0.5
# backoff_cap = 8.0
# timeout = 120.0
"""


@dataclass(frozen=True)
class Initialised:
    home: Path
    created: bool
    config_created: bool
    key_id: str
    key_created: bool
    ledger: str

    def lines(self) -> list[str]:
        config = self.home / "config.toml"
        return [
            f"home: {self.home} ({'created' if self.created else 'already there'})",
            f"config: {config} ({'created, every setting at its default' if self.config_created else 'already there'})",
            f"log key: {self.home / 'log-key.json'} (id {self.key_id}, {'created' if self.key_created else 'already there'})",
            f"ledger: {self.ledger}",
        ]

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "home": str(self.home)}


def initialise(home: Home) -> Initialised:
    """Sets up `home` and says what it did. What exists is kept."""
    fresh = not home.exists
    home.ensure()
    wrote_config = _write_config(home)
    had_key = log_key_path(home).exists()
    key = log_key(home)
    return Initialised(home.root, fresh, wrote_config, key.id, not had_key, home.ledger_url)


def _write_config(home: Home) -> bool:
    try:
        fd = os.open(home.config_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, PRIVATE_FILE)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(CONFIG_TEMPLATE)
    return True
