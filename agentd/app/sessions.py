"""The home's sessions store as a command opens it: read-only when the home is, and
otherwise first cleared of whatever a crash or a full disk left half-written."""

from __future__ import annotations

from agentd.app.ledger import open_ledger
from agentd.errors import AgentdError
from agentd.home import Home
from agentd.sessions import SessionStore, settle


def open_sessions(home: Home, *, write: bool = False) -> SessionStore:
    """The store; a command that records (`write`) refuses a read-only home."""
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
    return store
