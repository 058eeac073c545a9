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
    imports = [node for node in block.body if isinstance(node, ast.ImportFrom)]
    seen = {alias.asname or alias.name for node in imports for alias in node.names}
    assert seen == set(sandbox.__all__)
    # A renamed import is an export to a type checker only when the block's `__all__ +=` names it.
    renamed = {alias.asname for node in imports for alias in node.names if alias.asname not in (None, alias.name)}
    added = next(node for node in block.body if isinstance(node, ast.AugAssign))
    assert set(ast.literal_eval(added.value)) == renamed
