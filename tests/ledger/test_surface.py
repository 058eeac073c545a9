"""The ledger's public surface: what the layers above may use."""

from __future__ import annotations

import ast
from pathlib import Path

import ledger


def test_all_is_exactly_what_the_package_imports_for_others() -> None:
    tree = ast.parse(Path(ledger.__file__).read_text())
    imported = {
        alias.asname or alias.name for node in tree.body if isinstance(node, ast.ImportFrom) for alias in node.names
    }
    assert set(ledger.__all__) == imported
    assert len(ledger.__all__) == len(set(ledger.__all__))
    for name in ledger.__all__:
        assert hasattr(ledger, name), name
