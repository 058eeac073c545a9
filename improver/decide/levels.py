"""The tests a decision may use and the levels they are held to, without numpy.

The ledger's rules check a kept change's claimed level against its seal's confirmations
whenever any command opens the ledger, so these live apart from improver.decide.stats, whose
numpy costs every command's start-up tens of milliseconds.
"""

from __future__ import annotations

from improver.base.errors import ImproverError

TESTS: tuple[str, ...] = ("stratified", "newcombe", "paired")
DEFAULT_TEST = "stratified"  # what a seal is judged by unless it names another (see improver.decide.stats)

# The chance, over everything one seal confirms, that a change no better is kept.
FAMILY_LEVEL = 0.05


def check_level(level: float) -> float:
    if not isinstance(level, (int, float)) or isinstance(level, bool) or not 0 < level < 1:
        raise ImproverError(f"a level must be between 0 and 1 (0.05 for a 95% interval), not {level!r}")
    return float(level)


def confirmation_level(confirmations: int, family: float = FAMILY_LEVEL) -> float:
    """The one-sided level each of a seal's confirmations is held to: family / k (Bonferroni)."""
    if not isinstance(confirmations, int) or isinstance(confirmations, bool) or confirmations < 1:
        raise ImproverError(f"a seal allows at least one confirmation, not {confirmations!r}")
    return check_level(family) / confirmations
