"""Exported copies of a log: JSON lines of exact entries, one per Pulse, in order.

Each line is `{"pulse": N, "entry": "<base64 of the stored bytes>"}`, so a copy keeps
the very bytes that were signed and hashed, and an auditor can rebuild and check the
whole log from it.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable, Iterator

from ledger.entry import Entry
from ledger.errors import LedgerError


def export_line(entry: Entry) -> str:
    return json.dumps({"pulse": entry.pulse, "entry": base64.b64encode(entry.raw).decode()}, separators=(",", ":"))


def read_lines(lines: Iterable[str]) -> Iterator[bytes]:
    """The entry bytes of an export, checking that Pulses run 1, 2, 3, … with no gap."""
    expected = 1
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            doc = json.loads(line)
            pulse, raw = doc["pulse"], base64.b64decode(doc["entry"], validate=True)
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise LedgerError(f"line {number} is not an exported entry (expected pulse and base64 entry)") from None
        if pulse != expected:
            raise LedgerError(f"line {number} holds Pulse {pulse} where Pulse {expected} should be: the copy is incomplete")
        expected += 1
        yield raw
