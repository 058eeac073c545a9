"""The sandbox's public surface: what the layers above may use."""

from __future__ import annotations

import ast
import pkgutil
from pathlib import Path

import sandbox


def test_every_public_name_resolves_and_none_is_a_submodule() -> None:
    assert sandbox.__all__ == sorted(sandbox.__all__)
    submodules = {m.name for m in pkgutil.iter_modules(sandbox.__path__)}
    assert not submodules & set(sandbox.__all__)
    for name in sandbox.__all__:
        assert getattr(sandbox, name) is not None, name


def test_what_a_type_checker_sees_is_the_surface() -> None:
    tree = ast.parse(Path(sandbox.__file__).read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    seen = {alias.asname or alias.name for node in block.body for alias in node.names}  # type: ignore[attr-defined]
    assert seen == set(sandbox.__all__)
