"""Wallets in the home: `wallets/NAME.json`, and the log's own key in `log-key.json`.

A wallet's seed is sealed with AGENTD_WALLET_PASSPHRASE when it is set, else with a
passphrase asked for on the terminal, else (no terminal: scripts, CI, the daemon) kept
unencrypted in a file only its owner can read. The log's key signs checkpoints, receipts
and mints unattended, so it has its own variable, AGENTD_LOG_PASSPHRASE, and no prompt:
set, the key is sealed with it (and `agentd wallet seal-log-key` seals one made before);
unset, it is kept unencrypted, mode 0600. It is made only for a ledger that holds no
entries yet: a log's genesis entry names the key that started it, and no other key can
mint or sign checkpoints for it.
"""

from __future__ import annotations

import getpass
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

from agentd.errors import AgentdError, NotFound, WrongValue, did_you_mean
from agentd.home import Home
from ledger import (
    WALLET_ID,
    KeyFile,
    KeyFileExists,
    LedgerError,
    Wallet,
    open_key_file,
    open_store,
    read_key_file,
    seal_key_file,
    write_key_file,
)

PASSPHRASE_ENV = "AGENTD_WALLET_PASSPHRASE"
LOG_PASSPHRASE_ENV = "AGENTD_LOG_PASSPHRASE"
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
LOG_KEY_NAME = "log"


def wallet_path(home: Home, name: str) -> Path:
    if not NAME.fullmatch(name):
        raise AgentdError(
            f"bad wallet name {name!r}: use letters, digits, '.', '_' or '-' (up to 64, starting with a letter or digit)"
        )
    return home.wallets_dir / f"{name}.json"


def log_key_path(home: Home) -> Path:
    return home.log_key_path


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
    except KeyFileExists:
        raise AgentdError(f"wallet {name} already exists ({path})") from None
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


def wallet_id_of(home: Home, who: str) -> str:
    """The wallet id `who` names: a wallet id as it is, "log" for the log's key, or the
    name of a wallet in this home."""
    if WALLET_ID.fullmatch(who):
        return who
    if who == "log" and log_key_id(home):
        return str(log_key_id(home))
    if NAME.fullmatch(who):
        return _read(_existing(home, who, own=False), who).id
    raise WrongValue(f"{who!r} is neither a wallet name nor a wallet id (32 hex digits)")


def list_wallets(home: Home, skip: Callable[[AgentdError], None] | None = None) -> list[KeyFile]:
    """Every wallet in the home, by name. A file that is not a wallet is an error naming
    it, or, given `skip`, is passed over after `skip` is told why."""
    if not home.wallets_dir.is_dir():
        return []
    found = []
    for path in sorted(home.wallets_dir.glob("*.json")):
        try:
            found.append(_read(path, path.stem))
        except AgentdError as exc:
            if skip is None:
                raise
            skip(exc)
    return found


def wallet_names(home: Home, skip: Callable[[AgentdError], None] | None = None) -> dict[str, str]:
    """The names this home gives wallet ids, the log's key as "log": for listings that
    show a name beside an id. A wallet file that cannot be read is passed to `skip`, or
    is an error without it (see `list_wallets`)."""
    names = {w.id: w.name for w in list_wallets(home, skip)}
    key = log_key_id(home)
    if key:
        names[key] = "log"
    return names


def log_key(home: Home) -> Wallet:
    """The log's own key, created the first time it is needed if the ledger has no
    entries yet (sealed with AGENTD_LOG_PASSPHRASE when it is set). Opened once a
    process: a sealed key costs a third of a second of scrypt."""
    path = log_key_path(home)
    if not path.exists():
        _start_log_key(home, path)
    passphrase = os.environ.get(LOG_PASSPHRASE_ENV) or None
    try:
        stat = path.stat()
        cached = _LOG_KEYS.get(path)
        if cached and cached[0] == (stat.st_ino, stat.st_mtime_ns, passphrase):
            return cached[1]
        sealed = read_key_file(path).encrypted
        if sealed and passphrase is None:
            raise AgentdError(f"{path} is sealed: set {LOG_PASSPHRASE_ENV} to its passphrase")
        if not sealed and passphrase is not None:
            raise AgentdError(
                f"{LOG_PASSPHRASE_ENV} is set but {path} holds the log's key unencrypted: seal it with "
                "`agentd wallet seal-log-key`, or unset the variable"
            )
        key = open_key_file(path, passphrase)
    except OSError as exc:
        raise AgentdError(f"the log's key: cannot read {path}: {exc.strerror}") from None
    except LedgerError as exc:
        hint = f" (from {LOG_PASSPHRASE_ENV})" if "wrong passphrase" in str(exc) else ""
        raise AgentdError(f"the log's key: {exc}{hint}") from None
    _LOG_KEYS[path] = ((stat.st_ino, stat.st_mtime_ns, passphrase), key)
    return key


def seal_log_key(home: Home) -> Path:
    """Seals the home's unencrypted log key with AGENTD_LOG_PASSPHRASE."""
    path = log_key_path(home)
    passphrase = os.environ.get(LOG_PASSPHRASE_ENV)
    if not passphrase:
        raise AgentdError(f"set {LOG_PASSPHRASE_ENV} to the passphrase to seal {path} with")
    if not path.exists():
        raise AgentdError(f"{path} does not exist: `agentd init` makes it, sealed when {LOG_PASSPHRASE_ENV} is set")
    try:
        seal_key_file(path, passphrase)
    except LedgerError as exc:
        raise AgentdError(f"the log's key: {exc}") from None
    return path


# The log's key as last opened in this process, by path, with what it was opened from.
_LOG_KEYS: dict[Path, tuple[tuple[int, int, str | None], Wallet]] = {}


def log_key_sealed(home: Home) -> bool:
    """Whether this home's log key is sealed with a passphrase (read in the clear)."""
    path = log_key_path(home)
    try:
        return path.exists() and read_key_file(path).encrypted
    except LedgerError:
        return False  # a damaged file: opening it says what is wrong, in the log key's own words


def existing_log_key(home: Home) -> Wallet | None:
    """The log's key when this home holds it and it opens without asking; never makes
    one. For reading alone, which needs only the log's public key (its genesis entry
    carries it): a sealed key with no AGENTD_LOG_PASSPHRASE set is left shut, so an
    auditor needs no secret to list, verify or export a log."""
    if not log_key_path(home).exists() or (log_key_sealed(home) and not os.environ.get(LOG_PASSPHRASE_ENV)):
        return None
    return log_key(home)


def log_key_id(home: Home) -> str | None:
    """The id of the log's key, read in the clear; None when this home holds none."""
    path = log_key_path(home)
    return _read(path, LOG_KEY_NAME).id if path.exists() else None


def _start_log_key(home: Home, path: Path) -> None:
    """Creates the log's key for a ledger with no entries; refuses for one that has some,
    whose genesis entry names another key."""
    store = open_store(home.ledger_url)
    try:
        head, first = store.head(), store.row(1)
    finally:
        store.close()
    if head.size:
        started = f"was started by key {first.author}" if first else f"already holds {head.size} entries"
        raise AgentdError(
            f"{path} is missing but the ledger at {store.url} {started}; restore the file (or copy it from the "
            "home that started the log): no other key may mint or sign its checkpoints"
        )
    try:
        write_key_file(path, Wallet.generate(LOG_KEY_NAME), os.environ.get(LOG_PASSPHRASE_ENV) or None)
    except KeyFileExists:
        pass  # another process created it at the same moment: everyone uses that one
    except LedgerError as exc:
        raise AgentdError(f"the log's key: {exc}") from None


def _existing(home: Home, name: str, *, own: bool = True) -> Path:
    """Wallet NAME's file. Missing, the nearest name is suggested when one is close (a
    typo); else, for a wallet that signs here (`own`), how to make it, and for anyone
    else's, to give its id: a key made here would not be theirs."""
    path = wallet_path(home, name)
    if path.exists():
        return path
    close = did_you_mean(name, [p.stem for p in home.wallets_dir.glob("*.json")])
    if close:
        advice = close
    elif own:
        advice = f"create it with `agentd wallet new {name}`"
    else:
        advice = "for someone else's wallet give its id (32 hex digits), as its owner's `agentd wallet list` shows it"
    raise NotFound(
        f"no wallet named {name} in {home.wallets_dir}; {advice}",
        f"no wallet named {name!r}: give a wallet's id (32 hex digits)",
    )


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
