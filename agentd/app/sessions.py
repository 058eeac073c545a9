"""The home's sessions store as a command opens it: read-only when the home is, and
otherwise first cleared of whatever a crash or a full disk left half-written, and of
live sessions whose process ended before recording them (`recover`)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field

from agentd.app.ledger import open_ledger
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.sessions import (
    SessionRecord,
    SessionStore,
    interrupted_record,
    keep,
    process_ended,
    settle,
)
from agentd.wallets import PASSPHRASE_ENV, load_wallet, wallet_info
from ledger import LedgerError, Wallet


def open_sessions(home: Home, *, write: bool = False, recovering: bool = True) -> SessionStore:
    """The store; a command that records (`write`) refuses a read-only home. Unless told
    not to (`recovering`), sessions whose process ended are recorded as interrupted
    first, as far as their wallets open without asking; each is said on stderr."""
    if not home.writable:
        if write:
            raise AgentdError(f"the home {home.root} is read-only here: nothing can be recorded in it")
        return SessionStore(home, read_only=True)
    store = SessionStore(home)
    if store.pending():
        # As far as the disk lets it now: what stays pending is never shown, and the
        # next command tries again.
        with store.writing(), open_ledger(home, read_only=True) as ledger:
            settle(store, ledger)
    if recovering and any(process_ended(u.process) for u in store.under_way()):
        recovered = recover(home, store, ask=False)
        for record in recovered.recorded:
            _say(f"agentd: session {record.id} {record.error}; recorded at Pulse {record.pulse}")
        for session, why in recovered.waiting:
            _say(
                f"agentd: warning: session {session} was interrupted and is not recorded yet ({why}); "
                "record it with: agentd sessions recover"
            )
    return store


@dataclass
class Recovered:
    recorded: list[SessionRecord] = field(default_factory=list)
    waiting: list[tuple[str, str]] = field(default_factory=list)  # (session, why it could not be recorded)


def recover(home: Home, store: SessionStore, *, ask: bool) -> Recovered:
    """Records every live session whose process ended before recording it, as
    interrupted with every call it made, signed by the wallet it was to be signed by.
    `ask`: a sealed wallet's passphrase may be asked for, and what cannot be recorded
    is an error; otherwise such a session waits, with the reason, for a later command."""
    recovered = Recovered()
    ended = [u for u in store.under_way() if process_ended(u.process)]
    signers: dict[str, Wallet] = {}
    for under_way in ended:  # before the lock: a passphrase may be asked for
        try:
            signers[under_way.signer] = signers.get(under_way.signer) or _signer(home, under_way.signer, ask)
        except AgentdError as exc:
            if ask:
                raise
            recovered.waiting.append((under_way.session, str(exc)))
    ready = [u for u in ended if u.signer in signers]
    if not ready:
        return recovered
    with store.writing():  # and again under the lock, so that no two commands record one session
        still = {u.session for u in store.under_way()}
        try:
            with open_ledger(home) as ledger:
                for under_way in (u for u in ready if u.session in still):
                    record = interrupted_record(home, store, under_way)
                    recovered.recorded += keep(store, [record], signers[under_way.signer], ledger, held=True)
        except (AgentdError, LedgerError) as exc:
            if ask:
                raise
            done = {r.id for r in recovered.recorded}
            recovered.waiting += [(u.session, str(exc)) for u in ready if u.session in still - done]
    return recovered


def _say(line: str) -> None:
    """A line on stderr, where every command says what it did beside its output (the
    daemon's log, for the dashboard's and the API's reads)."""
    print(line, file=sys.stderr, flush=True)


def _signer(home: Home, name: str, ask: bool) -> Wallet:
    """Wallet `name`; unless it may `ask`, only when it opens without a passphrase asked for."""
    if not ask and wallet_info(home, name).encrypted and not os.environ.get(PASSPHRASE_ENV):
        raise AgentdError(f"wallet {name} is sealed and {PASSPHRASE_ENV} is not set")
    return load_wallet(home, name)
