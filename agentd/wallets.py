"""Wallets in the home: `wallets/NAME.json`, and the log's own key in `log-key.json`.

A wallet's seed is sealed with AGENTD_WALLET_PASSPHRASE when it is set, else with a
passphrase asked for on the terminal, else (no terminal: scripts, CI, the daemon) kept
unencrypted in a file only its owner can read. The log's key is always kept that way:
the daemon signs checkpoints and mints unattended.
"""

from __future__ import annotations

import getpass
import os
import re
import sys
from pathlib import Path

from agentd.errors import AgentdError
from agentd.home import Home
from ledger import KeyFile, LedgerError, Wallet, open_key_file, read_key_file, write_key_file

PASSPHRASE_ENV = "AGENTD_WALLET_PASSPHRASE"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
LOG_KEY_NAME = "log"


def wallet_path(home: Home, name: str) -> Path:
    if not NAME.fullmatch(name):
        raise AgentdError(
            f"bad wallet name {name!r}: use letters, digits, '.', '_' or '-' (up to 64, starting with a letter or digit)"
        )
    return home.wallets_dir / f"{name}.json"


def log_key_path(home: Home) -> Path:
    return home.root / "log-key.json"


def wallet_exists(home: Home, name: str) -> bool:
    return wallet_path(home, name).exists()


def create_wallet(home: Home, name: str) -> Wallet:
    """A new wallet NAME with a fresh key, sealed as the module docstring says."""
    path = wallet_path(home, name)
    if path.exists():
        raise AgentdError(f"wallet {name} already exists ({path})")
    wallet = Wallet.generate(name)
    try:
        write_key_file(path, wallet, _new_passphrase(name))
    except LedgerError as exc:
        raise AgentdError(str(exc)) from None
    return wallet


def load_wallet(home: Home, name: str) -> Wallet:
    """Wallet NAME with its signing key; asks for the passphrase if it is sealed."""
    path = _existing(home, name)
    info = _read(path, name)
    passphrase = _passphrase(name) if info.encrypted else None
    try:
        return open_key_file(path, passphrase)
    except LedgerError as exc:
        raise AgentdError(f"wallet {name}: {exc}") from None


def wallet_info(home: Home, name: str) -> KeyFile:
    """What wallet NAME's file says in the clear (no passphrase needed)."""
    return _read(_existing(home, name), name)


def list_wallets(home: Home) -> list[KeyFile]:
    """Every wallet in the home, by name; a file that is not a wallet is an error naming it."""
    if not home.wallets_dir.is_dir():
        return []
    return [_read(path, path.stem) for path in sorted(home.wallets_dir.glob("*.json"))]


def log_key(home: Home) -> Wallet:
    """The log's own key, created (unencrypted, mode 0600) the first time it is needed."""
    path = log_key_path(home)
    if not path.exists():
        try:
            write_key_file(path, Wallet.generate(LOG_KEY_NAME), None)
        except LedgerError as exc:
            if not path.exists():  # another process may have created it first
                raise AgentdError(str(exc)) from None
    try:
        return open_key_file(path, None)
    except LedgerError as exc:
        raise AgentdError(f"the log's key: {exc}") from None


def _existing(home: Home, name: str) -> Path:
    path = wallet_path(home, name)
    if not path.exists():
        raise AgentdError(f"no wallet named {name} in {home.wallets_dir}; create it with `agentd wallet new {name}`")
    return path


def _read(path: Path, name: str) -> KeyFile:
    try:
        return read_key_file(path)
    except LedgerError as exc:
        raise AgentdError(f"wallet {name}: {exc}") from None


def _new_passphrase(name: str) -> str | None:
    if os.environ.get(PASSPHRASE_ENV):
        return os.environ[PASSPHRASE_ENV]
    if not sys.stdin.isatty():
        return None
    first = getpass.getpass(f"passphrase for wallet {name} (empty: store unencrypted): ")
    if first and getpass.getpass("again: ") != first:
        raise AgentdError("the two passphrases differ; nothing was created")
    return first or None


def _passphrase(name: str) -> str:
    if os.environ.get(PASSPHRASE_ENV):
        return os.environ[PASSPHRASE_ENV]
    if sys.stdin.isatty():
        return getpass.getpass(f"passphrase for wallet {name}: ")
    raise AgentdError(f"wallet {name} is encrypted: set {PASSPHRASE_ENV} to its passphrase")
