"""Errors of the ledger package."""


class LedgerError(Exception):
    """A user-facing ledger failure (bad entry, broken rule, corrupt store, bad key)."""


class RuleViolation(LedgerError):
    """An entry breaks one of the state rules; the message says which and why."""
