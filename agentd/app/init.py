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
# checkpoint_every = 1000       # appends sign a checkpoint after this many entries...
# checkpoint_seconds = 60       # ...or once this long has passed since the last

# [openai]                      # OPENAI_BASE_URL, OPENAI_API_KEY
# base_url = "http://127.0.0.1:11434/v1"
# api_key = "..."
# text_tool_calls = false       # read tool calls a model writes as text

# [anthropic]                   # ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY
# base_url = "https://api.anthropic.com"
# api_key = "..."

# [providers]                   # retries of 429, 5xx, time-outs and dropped connections
# attempts = 4
# backoff = 0.5
# backoff_cap = 8.0
# timeout = 120.0

# [local]                       # local: models, run by llama.cpp on this machine
# threads = 1                   # default: one per free core
# context = 8192
# answer_tokens = 512
# text_tool_calls = true
# base_url = "http://127.0.0.1:8080/v1"   # AGENTD_LOCAL_BASE_URL: a server already running

# [sandbox]                     # where candidates, builds and tests run
# runner = "bwrap"              # or "docker"; default: bwrap where it works, else Docker
# wall_seconds = 300
# cpu_seconds = 300
# memory_mb = 2048
# processes = 64
# file_mb = 64
# open_files = 256
# output_mb = 4
# scratch_mb = 64

# [serve]                       # agentd serve, agentd examiner serve, agentd improve env --serve
# intake_token = "..."          # AGENTD_INTAKE_TOKEN; POST /v1/sessions is off without one
# entries_per_second = 2        # entries one wallet may have recorded a second over POST /v1/entries
# entries_burst = 20            # ...and at once
# header_timeout = 10
# body_timeout = 120
# idle_timeout = 10

# [trials]                      # trials run by agentd worker on other machines
# queue = "postgresql://agentd@db.internal:5432/agentd"   # default: trials run here
# lease = 30                    # seconds without a worker's heartbeat before its runs go out again
# trusted = []                  # workers (wallet ids or names) given sealed tasks
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
