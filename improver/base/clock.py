"""The one way agentd and the improver write the time: UTC, ISO 8601, with a Z.

Stamps that must sort in the order things happened within a second (sessions, seals)
are precise to the microsecond; the others, read by people, stop at the second.
"""

from __future__ import annotations

from datetime import UTC, datetime


def utc_now(precise: bool = False) -> str:
    """E.g. "2026-11-07T04:00:30Z", or "2026-11-07T04:00:30.123456Z" when `precise`."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ" if precise else "%Y-%m-%dT%H:%M:%SZ")
