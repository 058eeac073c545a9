"""Exported copies of a log: JSON lines of exact entries, one per Pulse, in order.

Each line is `{"pulse": N, "entry": "<base64 of the stored bytes>"}`, so a copy keeps
the very bytes that were signed and hashed, and an auditor can rebuild and check the
whole log from it. A copy is meant to be handed on, so it is written readable by others
(0644, less what the umask takes away).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import secrets
from collections.abc import Iterable, Iterator
from pathlib import Path

from ledger.entry import Entry
from ledger.errors import LedgerError
from ledger.keys import b64


def export_line(entry: Entry) -> str:
    return json.dumps({"pulse": entry.pulse, "entry": b64(entry.raw)}, separators=(",", ":"))


def write_copy(path: Path, lines: Iterable[str]) -> int:
    """Writes an export's lines to `path` as they come, whole or not at all (a temp file
    beside it, then a rename), in a folder that must exist already; the count of lines
    written, or LedgerError saying why it cannot."""
    # os.open with a mode, rather than mkstemp's fixed 0600, so the umask applies as for any file.
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    written = 0
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with os.fdopen(fd, "w") as f:
                for line in lines:
                    f.write(line + "\n")
                    written += 1
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    except OSError as exc:
        raise LedgerError(
            f"cannot write {path}: {exc.strerror or exc}; give a file in a folder you can write to"
        ) from None
    return written


def read_copy(lines: Iterable[str]) -> Iterator[bytes]:
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
            raise LedgerError(
                f"line {number} holds Pulse {pulse} where Pulse {expected} should be: the copy is incomplete"
            )
        expected += 1
        yield raw
