"""A package's face that loads its public names on first use.

A command that needs one name of a room (a seal's file, the levels the ledger's rules
read) never pays for the imports of the room's other modules (the statistics' numpy).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def lazy(package: str, surface: dict[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The `__getattr__` and `__dir__` of `package`, whose public names are `surface`'s keys,
    each found in the submodule it maps to (`"module"`, or `"module:attribute"` when the
    name there differs)."""
    names = sorted(surface)

    def getattr_(name: str) -> Any:
        try:
            module, _, attribute = surface[name].partition(":")
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(f"{package}.{module}"), attribute or name)
        vars(importlib.import_module(package))[name] = value  # once loaded, a plain attribute
        return value

    def dir_() -> list[str]:
        return names

    return getattr_, dir_
