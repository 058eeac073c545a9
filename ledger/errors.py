"""Errors of the ledger package."""


class LedgerError(Exception):
    """A user-facing ledger failure (bad entry, broken rule, corrupt store, bad key)."""


class RuleViolation(LedgerError):
    """An entry breaks one of the state rules; the message says which and why."""


class RefusalRecorded(RuleViolation):
    """A rule refused an entry signed elsewhere, and the log recorded the refusal, which
    spends the entry's sequence number (see ledger.log): the one refusal that writes."""


class DamagedStore(LedgerError):
    """The store cannot be read as a ledger: its file or database is damaged. `verify`
    reports it as what it found, not as a failure to run."""


# What a message about a store that disagrees with itself tells the user to do.
VERIFY_HINT = "run `agentd ledger verify` to find the first bad Pulse"
# And one about a store that cannot be read as a ledger at all.
RESTORE_HINT = "restore it from a backup, or rebuild the log from an export with `agentd ledger import` in a fresh home"
