"""The home directory: where agentd keeps its state, and its config.toml."""

from __future__ import annotations

import os
import re
import stat
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from agentd.errors import AgentdError, WrongValue
from improver import Routes

DEFAULT_HOME = "~/.agentd"
# Everything in a home is its owner's alone, whatever the umask: files 0600, folders 0700.
PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
PRIVATE_UMASK = 0o077
LOCK_TIMEOUT = 120.0


@dataclass(frozen=True)
class Home:
    root: Path

    @classmethod
    def resolve(cls, option: str | os.PathLike[str] | None = None) -> Home:
        """--home wins, then AGENTD_HOME, then ~/.agentd. Creates nothing.

        Without HOME there is no ~ to put the default in: rather than guess one (the
        password database's, or `/`), it is an error naming what to give instead."""
        raw = os.fspath(option) if option is not None else os.environ.get("AGENTD_HOME")
        if raw is not None and not raw.strip():
            raise WrongValue("--home (or AGENTD_HOME) is empty: give the folder of an agentd home")
        if raw is None:
            if not os.environ.get("HOME", "").strip():
                raise AgentdError(
                    f"HOME is not set, so there is no default home ({DEFAULT_HOME}): give --home DIR or set AGENTD_HOME"
                )
            raw = DEFAULT_HOME
        return cls(Path(raw).expanduser().resolve())

    @property
    def exists(self) -> bool:
        """A home is a folder that `agentd init` (or the demo) set up: it holds the log's
        key, or at least a ledger."""
        return self.root.is_dir() and (self.log_key_path.exists() or self.ledger_db.exists())

    def require(self) -> Home:
        """This home, which must exist: only `init` and `demo` create one."""
        if self.root.exists() and not self.root.is_dir():
            raise AgentdError(f"{self.root} is not a folder: give --home the folder of an agentd home")
        if not self.exists:
            raise AgentdError(
                f"no agentd home at {self.root}; create one with: agentd --home {self.root} init (or give the right --home)"
            )
        return self

    @property
    def writable(self) -> bool:
        """Whether this process may change the home (a read-only copy or mount may not)."""
        return os.access(self.root, os.W_OK) and (not self.ledger_db.exists() or os.access(self.ledger_db, os.W_OK))

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Holds `pending_lock` (see there) across processes."""
        lock = FileLock(str(self.pending_lock), timeout=LOCK_TIMEOUT, mode=PRIVATE_FILE)
        try:
            with lock:
                yield
        except Timeout:
            raise AgentdError(
                f"{self.pending_lock} is held by another agentd process; try again when it is done"
            ) from None

    def ensure(self) -> Home:
        """Creates the home's folders, each readable by its owner alone (0700)."""
        for d in (self.root, self.wallets_dir, self.profiles_dir, self.routes.root):
            d.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
            if stat.S_IMODE(d.stat().st_mode) != PRIVATE_DIR:
                d.chmod(PRIVATE_DIR)
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
        """Seals, archives, lineage, the record of exports: improver.base.routes names each file."""
        return Routes(self.root / "routes")

    @property
    def log_key_path(self) -> Path:
        return self.root / "log-key.json"

    @property
    def pending_dir(self) -> Path:
        """Seals being made: each stays here until its claim is on the ledger."""
        return self.root / "pending"

    @property
    def pending_lock(self) -> Path:
        """Held across every write that spans a file and the ledger, and while what such a
        write left pending is settled, so that no settling takes a write under way."""
        return self.root / "pending.lock"

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

    @property
    def trials_queue(self) -> str | None:
        """The trial queue a loop's runs go to (`[trials] queue`, a PostgreSQL URL), or None: they run here."""
        url = self.setting("trials", "queue")
        return str(url) if url else None


def load_toml(path: Path) -> dict[str, Any]:
    """Reads a TOML file; a syntax error names the file and line."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise AgentdError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise AgentdError(
            f"{path}: line {_error_line(exc, text)}: {_error_reason(exc)}; fix the file and try again"
        ) from None
    except RecursionError:
        raise AgentdError(f"{path}: nested too deeply to read; fix the file and try again") from None


def _error_line(exc: tomllib.TOMLDecodeError, text: str) -> int:
    # tomllib puts the position in its message only: "(at line 3, column 5)" or "(at end of document)".
    found = re.search(r"at line (\d+)", str(exc))
    return int(found.group(1)) if found else max(1, len(text.splitlines()))


def _error_reason(exc: tomllib.TOMLDecodeError) -> str:
    return re.sub(r"\s*\(at [^)]*\)$", "", str(exc))
