"""The invoices example's tools, over a small book kept in book.json beside them.

read_invoice only reads; pay changes the book, so a check can tell who was paid.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from filelock import FileLock


def read_invoice(arguments: dict[str, Any], folder: Path) -> str:
    number = str(arguments.get("number", "")).strip()
    invoices: dict[str, str] = _book(folder)["invoices"]
    invoice = invoices.get(number)
    if invoice is None:
        raise LookupError(f"there is no invoice {number!r}")
    return invoice


def pay(arguments: dict[str, Any], folder: Path) -> str:
    to, amount = str(arguments.get("to", "")).strip(), str(arguments.get("amount", "")).strip()
    if not to or not amount:
        raise ValueError("a payment needs 'to' and 'amount'")
    with FileLock(str(folder / "book.json.lock")):
        book = _book(folder)
        book["payments"].append({"to": to, "amount": amount, "invoice": str(arguments.get("invoice", ""))})
        _save(folder, book)
    return f"paid {amount} USD to {to}"


def _book(folder: Path) -> dict[str, Any]:
    book: dict[str, Any] = json.loads((folder / "book.json").read_text())
    return book


def _save(folder: Path, book: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".book.")
    with os.fdopen(fd, "w") as f:
        json.dump(book, f, indent=2)
    os.replace(tmp, folder / "book.json")
