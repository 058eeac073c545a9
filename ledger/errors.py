"""Errors of the ledger package."""


class LedgerError(Exception):
    """A user-facing ledger failure (bad entry, broken rule, corrupt store, bad key)."""


class RuleViolation(LedgerError):
    """An entry breaks one of the state rules; the message says which and why."""


class DamagedStore(LedgerError):
    """The store cannot be read as a ledger: its file or database is damaged. `verify`
    reports it as what it found, not as a failure to run."""
