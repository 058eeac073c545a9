"""The improver's public surface: what other layers may use, deliberately, and nothing by accident."""

from __future__ import annotations

import ast
import importlib
import pkgutil
from pathlib import Path

import improver


def test_every_public_name_resolves_and_all_is_sorted() -> None:
    assert improver.__all__ == sorted(improver.__all__)
    for name in improver.__all__:
        assert getattr(improver, name) is not None, name
    assert dir(improver) == improver.__all__


def test_no_public_name_is_shadowed_by_a_submodule() -> None:
    # `import improver.tasks.harvest` sets improver.tasks.harvest to the module, hiding a function of that name.
    submodules = {m.name for m in pkgutil.iter_modules(improver.__path__)}
    assert not submodules & set(improver.__all__)
    for module in submodules:
        importlib.import_module(f"improver.{module}")
    for name in improver.__all__:
        assert not isinstance(getattr(improver, name), type(improver)), name


ROOMS = [m.name for m in pkgutil.iter_modules(improver.__path__)]


def test_improver_holds_only_rooms_and_its_face() -> None:
    top = Path(improver.__file__).parent
    assert sorted(p.name for p in top.glob("*.py")) == ["__init__.py"]
    assert all(m.ispkg for m in pkgutil.iter_modules(improver.__path__))


def test_every_room_exports_a_sorted_surface_that_resolves() -> None:
    for room in ROOMS:
        face = importlib.import_module(f"improver.{room}")
        assert face.__doc__, room
        assert face.__all__ == sorted(face.__all__), room
        assert dir(face) == face.__all__, room
        for name in face.__all__:
            value = getattr(face, name)
            assert not isinstance(value, type(improver)), f"improver.{room}.{name} is a module"


def test_what_a_type_checker_sees_is_the_surface() -> None:
    tree = ast.parse(Path(improver.__file__).read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", "") == "TYPE_CHECKING")
    imports = [node for node in block.body if isinstance(node, ast.ImportFrom)]
    seen = {alias.asname or alias.name for node in imports for alias in node.names}
    assert seen == set(improver.__all__)
    # A renamed import is an export to a type checker only when the block's `__all__ +=` names it.
    renamed = {alias.asname for node in imports for alias in node.names if alias.asname not in (None, alias.name)}
    added = next(node for node in block.body if isinstance(node, ast.AugAssign))
    assert set(ast.literal_eval(added.value)) == renamed


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        improver.no_such_name  # noqa: B018
    except AttributeError as exc:
        assert "no_such_name" in str(exc)
    else:
        raise AssertionError("an unknown name resolved")
