"""The home directory: where agentd keeps its state, and its config.toml."""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from agentd.errors import AgentdError
from improver import Routes

DEFAULT_HOME = "~/.agentd"


@dataclass(frozen=True)
class Home:
    root: Path

    @classmethod
    def resolve(cls, option: str | os.PathLike[str] | None = None) -> Home:
        """--home wins, then AGENTD_HOME, then ~/.agentd."""
        raw = option or os.environ.get("AGENTD_HOME") or DEFAULT_HOME
        return cls(Path(raw).expanduser().resolve())

    def ensure(self) -> Home:
        for d in (self.root, self.wallets_dir, self.profiles_dir, self.routes.root):
            d.mkdir(parents=True, exist_ok=True)
        return self

    @property
    def config_path(self) -> Path:
        return self.root / "config.toml"

    @property
    def ledger_db(self) -> Path:
        return self.root / "ledger.db"

    @property
    def agentd_db(self) -> Path:
        return self.root / "agentd.db"

    @property
    def wallets_dir(self) -> Path:
        return self.root / "wallets"

    @property
    def profiles_dir(self) -> Path:
        return self.root / "profiles"

    @property
    def routes(self) -> Routes:
        """Seals, archives, lineage, the record of exports: improver.routes names each file."""
        return Routes(self.root / "routes")

    @property
    def kill_switch_path(self) -> Path:
        return self.root / "kill-switch"

    @cached_property
    def config(self) -> dict[str, Any]:
        return load_toml(self.config_path) if self.config_path.exists() else {}

    def setting(self, section: str, key: str, env: str | None = None) -> Any:
        """An environment variable, when named and set, wins over config.toml."""
        if env and os.environ.get(env):
            return os.environ[env]
        value = self.config.get(section, {})
        return value.get(key) if isinstance(value, dict) else None

    @property
    def ledger_url(self) -> str:
        """The ledger store: PostgreSQL when configured, else SQLite in the home."""
        url = self.setting("ledger", "url", env="AGENTD_LEDGER_URL")
        return str(url) if url else f"sqlite:///{self.ledger_db}"


def load_toml(path: Path) -> dict[str, Any]:
    """Reads a TOML file; a syntax error names the file and line."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentdError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise AgentdError(f"{path}: line {_error_line(exc, text)}: {_error_reason(exc)}; fix the file and try again") from None


def _error_line(exc: tomllib.TOMLDecodeError, text: str) -> int:
    # tomllib puts the position in its message only: "(at line 3, column 5)" or "(at end of document)".
    found = re.search(r"at line (\d+)", str(exc))
    return int(found.group(1)) if found else max(1, len(text.splitlines()))


def _error_reason(exc: tomllib.TOMLDecodeError) -> str:
    return re.sub(r"\s*\(at [^)]*\)$", "", str(exc))
